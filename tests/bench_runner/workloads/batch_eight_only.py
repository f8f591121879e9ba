"""Bad kernel, subtly: partial centring over the batch, with the divisor hard-coded for batch 8.

Right at batch size 8. At batch size 9 its error is 0.4 x the batch sum / 72, which random
signs mostly cancel: in bfloat16 only a handful of the 9 x 4096 elements leave the tolerance on
drawn inputs (the 1 in 32,768 of issue 14), while with same-sign inputs the sum adds up and
hundreds do.
"""

import torch

features = 4096
share = 0.4


class Model(torch.nn.Module):
    def forward(self, x):
        return x - share * x.mean(dim=0, keepdim=True)


class ModelNew(torch.nn.Module):
    def forward(self, x):
        return x - share * x.sum(dim=0, keepdim=True) / 8  # BUG: assumes batch size 8


def get_inputs(batch_size=8):
    return [torch.randn(batch_size, features)]


def get_init_inputs():
    return []
