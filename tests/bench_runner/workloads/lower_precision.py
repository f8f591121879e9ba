"""Bad kernel: ModelNew silently does its matmul in float16 and casts back."""

import torch

batch_size = 8


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(64, 64) / 8)

    def forward(self, x):
        return x @ self.weight


class ModelNew(Model):
    def forward(self, x):
        return (x.half() @ self.weight.half()).to(x.dtype)  # BUG: float16 inside


def get_inputs():
    return [torch.randn(batch_size, 64)]


def get_init_inputs():
    return []
