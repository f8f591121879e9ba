"""TF32: a precision of its own, never a silent property of float32.

float32 means float32 everywhere in the harness: TF32 tensor-core math (10-bit mantissa) is off
for matrix products and convolutions. A configuration that asks for `tf32` gets float32 tensors
with TF32 math on, the way a user's `torch.backends.cuda.matmul.allow_tf32 = True` or ORT's
default `use_tf32=1` would run them, and is checked against its own tolerance. The switch is a
process-wide setting of torch, so it is set before every step of a configuration (build,
check, warm-up, each sample): a worker holds configurations of several dtypes at once.
"""

from __future__ import annotations

import torch

TF32 = "tf32"


def uses_tf32(dtype: str) -> bool:
    return dtype == TF32


def set_matmul_precision(dtype: str) -> None:
    """TF32 math on for the tf32 configurations, off for every other dtype."""
    on = uses_tf32(dtype)
    torch.backends.cuda.matmul.allow_tf32 = on
    torch.backends.cudnn.allow_tf32 = on
    torch.set_float32_matmul_precision("high" if on else "highest")
