"""Bad GPU kernel: real work left on a side stream, invisible to events on the main stream."""

import torch

_side = []  # created on first use: the harness deep-copies modules, and streams do not copy


class Model(torch.nn.Module):
    def forward(self, x):
        if not _side:
            _side.append(torch.cuda.Stream())
        big = torch.ones(4096, 4096, device=x.device, dtype=x.dtype)
        _side[0].wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(_side[0]):
            for _ in range(4):
                big @ big
        return x * 2


def get_inputs(batch_size=1):
    return [torch.randn(batch_size, 1024)]


def get_init_inputs():
    return []
