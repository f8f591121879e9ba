"""A tiny honest workload for the end-to-end tests (batch size through get_inputs)."""

import torch


class Model(torch.nn.Module):
    def __init__(self, n):
        super().__init__()
        self.lin = torch.nn.Linear(n, n)

    def forward(self, x):
        return torch.relu(self.lin(x))


def get_inputs(batch_size=2):
    return [torch.randn(batch_size, 8)]


def get_init_inputs():
    return [8]
