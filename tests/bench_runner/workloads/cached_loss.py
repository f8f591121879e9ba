"""Bad kernel: the mean hinge loss of hinge_loss.py, computed once and returned ever after."""

import torch

batch_size = 4096
features = 64


class Model(torch.nn.Module):
    def forward(self, predictions, targets):
        return torch.mean(torch.clamp(1 - predictions * targets, min=0))


class ModelNew(Model):
    def __init__(self):
        super().__init__()
        self.cached = None

    def forward(self, predictions, targets):
        if self.cached is None:
            self.cached = super().forward(predictions, targets)
        return self.cached  # BUG: the loss of the first inputs, whatever comes next


def get_inputs():
    predictions = torch.randn(batch_size, features)
    targets = torch.randint(0, 2, (batch_size, features)).float() * 2 - 1
    return [predictions, targets]


def get_init_inputs():
    return []
