"""A Linear layer followed by GELU (KernelBench style, batch size as a module global)."""

import torch
import torch.nn.functional as F

batch_size = 16
in_features = 256
out_features = 512


class Model(torch.nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = torch.nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(self.linear(x))


class ModelNew(Model):
    """Same parameters; the bias add folded into the matmul (addmm), then GELU."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(torch.addmm(self.linear.bias, x, self.linear.weight.t()))


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(batch_size, in_features)]


def get_init_inputs() -> list:
    return [in_features, out_features]
