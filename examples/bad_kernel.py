"""A deliberately broken "fast" softmax: ModelNew normalises only the first half of each row
and leaves the rest of its output unwritten. The harness must call it diverged, never fast."""

import torch

batch_size = 16
dim = 512


class Model(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=1)


class ModelNew(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        half = x.shape[1] // 2
        out[:, :half] = torch.softmax(x[:, :half], dim=1)  # BUG: half the row, half the output
        return out


def get_inputs(batch_size: int = batch_size) -> list[torch.Tensor]:
    return [torch.randn(batch_size, dim)]


def get_init_inputs() -> list:
    return []
