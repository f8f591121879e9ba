"""An honest workload whose output scales by a module global, and that logs who imports it.

Two copies differing only in SCALE (a base and a head) must each be checked against their own
reference even in one process. With RNX_TEST_PID_LOG set, every import appends "pid path" to
that file, so a test can see which process loaded which side.
"""

import os

import torch

SCALE = 1.0

if os.environ.get("RNX_TEST_PID_LOG"):
    with open(os.environ["RNX_TEST_PID_LOG"], "a") as log:
        log.write(f"{os.getpid()} {__file__}\n")


class Model(torch.nn.Module):
    def __init__(self, n):
        super().__init__()
        self.lin = torch.nn.Linear(n, n)

    def forward(self, x):
        return torch.relu(self.lin(x)) * SCALE


def get_inputs(batch_size=2):
    return [torch.randn(batch_size, 8)]


def get_init_inputs():
    return [8]
