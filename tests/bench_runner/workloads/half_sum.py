"""Bad kernel: a float32 sum of squares over 1M elements, accumulated in float16."""

import torch

n = 1 << 20


class Model(torch.nn.Module):
    def forward(self, x):
        return (x * x).sum()


class ModelNew(torch.nn.Module):
    def forward(self, x):
        acc = torch.zeros(1024, dtype=torch.float16)
        for row in x.half().view(-1, 1024):
            acc += row * row  # BUG: 1024 running sums kept in float16
        return acc.float().sum()


def get_inputs(batch_size=1):
    return [torch.randn(batch_size * n)]


def get_init_inputs():
    return []
