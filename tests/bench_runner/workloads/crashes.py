"""A workload whose forward kills its process (as a segfaulting extension would)."""

import os

import torch

batch_size = 2


class Model(torch.nn.Module):
    def forward(self, x):
        os._exit(3)


def get_inputs():
    return [torch.randn(batch_size, 4)]


def get_init_inputs():
    return []
