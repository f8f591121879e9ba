"""Bad kernel: ModelNew ignores its second input."""

import torch

batch_size = 4


class Model(torch.nn.Module):
    def forward(self, x, y):
        return x * 2 + y


class ModelNew(torch.nn.Module):
    def forward(self, x, y):
        return x * 2 + 0.5  # BUG: y never read


def get_inputs():
    return [torch.randn(batch_size, 16), torch.randn(batch_size, 16)]


def get_init_inputs():
    return []
