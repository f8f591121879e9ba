"""Row softmax: a numerically careful hand-written Model; torch.softmax as ModelNew."""

import torch

batch_size = 16
dim = 1024


class Model(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shifted = x - x.amax(dim=1, keepdim=True)
        e = shifted.exp()
        return e / e.sum(dim=1, keepdim=True)


class ModelNew(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=1)


def get_inputs(batch_size: int = batch_size) -> list[torch.Tensor]:
    return [torch.randn(batch_size, dim) * 3]


def get_init_inputs() -> list:
    return []
