"""Bad kernel: ModelNew hard-codes batch size 8, so it is right only there."""

import torch


class Model(torch.nn.Module):
    def forward(self, x):
        return x - x.mean(dim=0, keepdim=True)


class ModelNew(torch.nn.Module):
    def forward(self, x):
        return x - x.sum(dim=0, keepdim=True) / 8  # BUG: assumes batch size 8


def get_inputs(batch_size=8):
    return [torch.randn(batch_size, 16)]


def get_init_inputs():
    return []
