"""A workload whose forward has a graph break (a data-dependent Python branch)."""

import torch

batch_size = 2


class Model(torch.nn.Module):
    def forward(self, x):
        if x.sum().item() > 1e9:  # .item() forces a graph break
            return x
        return torch.sin(x) * 2


def get_inputs():
    return [torch.randn(batch_size, 8)]


def get_init_inputs():
    return []
