"""The example kernel made 2x slower: the same result, computed twice."""

import torch

batch_size = 8


class Model(torch.nn.Module):
    def __init__(self, size: int = 192):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(size, size) / size**0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        wasted = torch.relu(x @ self.weight)
        return torch.relu(x @ self.weight) + 0 * wasted


def get_inputs(batch_size: int = batch_size):
    return [torch.randn(batch_size * 32, 192)]


def get_init_inputs():
    return [192]
