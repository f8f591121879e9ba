"""A workload that gives the harness no way to set the batch size."""

import torch


class Model(torch.nn.Module):
    def forward(self, x):
        return x * 2


def get_inputs():
    return [torch.randn(4, 4)]


def get_init_inputs():
    return []
