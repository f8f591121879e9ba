"""An honest kernel whose get_flops raises: it costs the score, never the timing."""

import torch


class Model(torch.nn.Module):
    def forward(self, x):
        return x + 1


def get_inputs(batch_size=2):
    return [torch.randn(batch_size, 64)]


def get_init_inputs():
    return []


def get_flops(batch_size):
    raise RuntimeError("flops unknown on purpose")
