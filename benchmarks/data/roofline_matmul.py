"""A large matrix product for the speed-of-light figures (benchmarks/gpu_roofline.py, docs):
(batch_size x 8192) @ (8192 x 8192), compute-bound in float16 from a batch of a few thousand."""

import torch

batch_size = 8192
K = N = 8192


class Model(torch.nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a @ b


def get_inputs(batch_size: int = batch_size) -> list[torch.Tensor]:
    return [torch.randn(batch_size, K) / K**0.25, torch.randn(K, N) / K**0.25]


def get_init_inputs() -> list:
    return []
