"""Doubles its input, and declares its work: bytes honestly (read once, written once, per
dtype), FLOPs absurdly high, so its speed-of-light score must be flagged as a problem."""

import torch


class Model(torch.nn.Module):
    def forward(self, x):
        return x * 2


def get_inputs(batch_size=2):
    return [torch.randn(batch_size, 4096)]


def get_init_inputs():
    return []


def get_bytes(batch_size, dtype):
    size = {"float64": 8, "float32": 4, "float16": 2, "bfloat16": 2}[dtype]
    return 2 * batch_size * 4096 * size


def get_flops(batch_size):
    return 10**18 * batch_size  # no CPU does this in the time: "beyond the roofline"
