"""benchmarks/profile_diff.py's head: base.py with one change, EXTRA_SOFTMAX = True."""

import torch
import torch.nn.functional as F

batch_size = 64
dim = 1024
WIDEN = 4  # the branch's intermediate: batch x dim x WIDEN
EXTRA_SOFTMAX = True
SDPA_MATH = False


class Model(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.softmax(torch.cat([x] * WIDEN, dim=1), dim=1)
        if EXTRA_SOFTMAX:
            h = torch.softmax(h, dim=1)
        q = x.view(x.shape[0], 4, -1, 64)
        if SDPA_MATH:
            from torch.nn.attention import SDPBackend, sdpa_kernel

            with sdpa_kernel(SDPBackend.MATH):
                a = F.scaled_dot_product_attention(q, q, q)
        else:
            a = F.scaled_dot_product_attention(q, q, q)
        return a.sum(dim=(1, 2, 3)) + h.sum(dim=1)


def get_inputs(batch_size: int = batch_size) -> list[torch.Tensor]:
    return [torch.randn(batch_size, dim)]


def get_init_inputs() -> list:
    return []
