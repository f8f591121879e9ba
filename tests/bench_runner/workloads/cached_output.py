"""Bad kernel: ModelNew computes once and returns the cached tensor ever after."""

import torch

batch_size = 4


class Model(torch.nn.Module):
    def forward(self, x):
        return torch.sigmoid(x)


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.cached = None

    def forward(self, x):
        if self.cached is None or self.cached.shape != x.shape:
            self.cached = torch.sigmoid(x)
        return self.cached  # BUG: stale after the first call


def get_inputs():
    return [torch.randn(batch_size, 16)]


def get_init_inputs():
    return []
