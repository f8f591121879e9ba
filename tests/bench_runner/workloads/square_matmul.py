"""KernelBench level 1 style: a square matmul with a module-level N and no batch dimension."""

import torch

N = 64


class Model(torch.nn.Module):
    def forward(self, a, b):
        return torch.matmul(a, b)


def get_inputs():
    return [torch.randn(N, N), torch.randn(N, N)]


def get_init_inputs():
    return []
