"""Conv2d + BatchNorm (inference) + ReLU; ModelNew folds the BatchNorm into the convolution."""

import torch
import torch.nn.functional as F

batch_size = 4
channels_in = 8
channels_out = 16
size = 32


class Model(torch.nn.Module):
    def __init__(self, cin: int, cout: int):
        super().__init__()
        self.conv = torch.nn.Conv2d(cin, cout, kernel_size=3, padding=1)
        self.bn = torch.nn.BatchNorm2d(cout)
        # Non-trivial running statistics, so the fold is really exercised.
        with torch.no_grad():
            self.bn.running_mean.uniform_(-0.5, 0.5)
            self.bn.running_var.uniform_(0.5, 1.5)
            self.bn.weight.uniform_(0.5, 1.5)
            self.bn.bias.uniform_(-0.5, 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.bn(self.conv(x)))


class ModelNew(Model):
    """Same parameters (so Model's state loads into it); one convolution with folded weights."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        bn = self.bn
        scale = bn.weight / torch.sqrt(bn.running_var + bn.eps)
        weight = self.conv.weight * scale[:, None, None, None]
        bias = (self.conv.bias - bn.running_mean) * scale + bn.bias
        return F.conv2d(x, weight, bias, padding=1).relu()


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(batch_size, channels_in, size, size)]


def get_init_inputs() -> list:
    return [channels_in, channels_out]
