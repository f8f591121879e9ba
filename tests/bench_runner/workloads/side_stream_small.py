"""Bad GPU kernel, the small kind: a ~20 us call that leaves ~0.3 ms of work on a side stream.

Close to the hidden-work check's floor (half the call's time plus 50 us): what a shared GPU's
slow synchronize must not be confused with, and what must still be caught on a GPU of its own.
"""

import torch

_side = []  # created on first use: the harness deep-copies modules, and streams do not copy
_weights = []


class Model(torch.nn.Module):
    def forward(self, x):
        if not _side:
            _side.append(torch.cuda.Stream())
            _weights.append(torch.randn(2048, 2048, device=x.device, dtype=x.dtype))
        w = _weights[0]
        _side[0].wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(_side[0]):
            w @ w  # about 0.3 ms in float32 on an H200, never seen by events on the main stream
        return x * 2


def get_inputs(batch_size=1):
    return [torch.randn(batch_size, 1024)]


def get_init_inputs():
    return []
