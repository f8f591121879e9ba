"""An honest scalar-output kernel: a mean hinge loss over 4096 x 64 (KernelBench level 1 style).

Its float16/bfloat16 result often rounds to the same value for two fresh draws of the inputs:
that is not a cached result, and the harness must not call it one.
"""

import torch

batch_size = 4096
features = 64


class Model(torch.nn.Module):
    def forward(self, predictions, targets):
        return torch.mean(torch.clamp(1 - predictions * targets, min=0))


def get_inputs():
    predictions = torch.randn(batch_size, features)
    targets = torch.randint(0, 2, (batch_size, features)).float() * 2 - 1
    return [predictions, targets]


def get_init_inputs():
    return []
