"""Scaled dot-product attention: a deliberately unfused Model and a fused ModelNew.

Model spells attention out op by op (two matmuls, a scale, a softmax), materialising the
seq x seq score matrix; ModelNew calls torch's fused scaled_dot_product_attention.
"""

import math

import torch
import torch.nn.functional as F

batch_size = 8
heads = 4
seq_len = 64
head_dim = 32


class Model(torch.nn.Module):
    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        scores = q @ k.transpose(-2, -1)
        scores = scores / math.sqrt(q.shape[-1])
        weights = torch.softmax(scores, dim=-1)
        return weights @ v


class ModelNew(torch.nn.Module):
    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(q, k, v)


def get_inputs(batch_size: int = batch_size) -> list[torch.Tensor]:
    shape = (batch_size, heads, seq_len, head_dim)
    return [torch.randn(shape), torch.randn(shape), torch.randn(shape)]


def get_init_inputs() -> list:
    return []
