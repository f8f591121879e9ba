"""Bad kernel: ModelNew returns the right values but scribbles over its input."""

import torch

batch_size = 4


class Model(torch.nn.Module):
    def forward(self, x):
        return x * 3 + 1


class ModelNew(torch.nn.Module):
    def forward(self, x):
        x.mul_(3)  # BUG: in place on the caller's tensor
        return x + 1


def get_inputs():
    return [torch.randn(batch_size, 16)]


def get_init_inputs():
    return []
