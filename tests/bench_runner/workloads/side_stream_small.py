"""Bad GPU kernel, the small kind: a 2048^3 float32 matmul on a side stream behind `x * 2`.

On an H200 the call's events read 252-293 us for an `x * 2` of 1024 elements (the matmul holds
the SMs its kernel waits for), and about 0.12 ms of the matmul is left after the timed stream
finished: about twice the hidden-work check's bar (50 us, or twice the synchronize after an
idle round), where the honest examples with four runs sharing the GPU left at most 28 us. What
a shared GPU's slow synchronize must not be confused with, and what must be caught alone on the
GPU and with two other runs on it.
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
            w @ w  # partly after the main stream's end event: that part no event times
        return x * 2


def get_inputs(batch_size=1):
    return [torch.randn(batch_size, 1024)]


def get_init_inputs():
    return []
