"""Honest: a mean squared error over batch_size x 4096 float32 elements, one scalar output.

At batch 4096 the mean is over 16.7 million elements, the size of issue 14's ONNX Runtime row:
how far a runtime's own summation strays from the float64 reference over such a reduction.
"""

import torch


class Model(torch.nn.Module):
    def forward(self, a, b):
        return ((a - b) ** 2).mean()


def get_inputs(batch_size=4096):
    return [torch.randn(batch_size, 4096), torch.randn(batch_size, 4096)]


def get_init_inputs():
    return []
