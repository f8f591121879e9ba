"""Per-dtype correctness tolerances: documented defaults, overridable per workload."""

from __future__ import annotations

from rnx.config import Benchmark, Tolerance

# An element passes when |out - ref| <= atol + rtol * |ref|, ref being float64 eager on the same
# dtype-rounded inputs and weights. The float32 bounds assume TF32 is off (the harness turns it
# off): they are tight enough that a kernel computing in float16 or bfloat16 behind a float32
# signature fails, and loose enough for honest reordering of float32 sums.
DEFAULT_TOLERANCES: dict[str, Tolerance] = {
    "float64": Tolerance(atol=1e-9, rtol=1e-9),
    "float32": Tolerance(atol=1e-4, rtol=1e-4),
    # TF32 keeps float16's 10-bit mantissa in products (float32 range and accumulation): an
    # H200's honest Linear+GELU is 6e-4 off in TF32 (5e-7 in float32).
    "tf32": Tolerance(atol=1e-2, rtol=1e-2),
    "float16": Tolerance(atol=1e-2, rtol=1e-2),
    "bfloat16": Tolerance(atol=5e-2, rtol=5e-2),
}


def tolerance_for(benchmark: Benchmark, dtype: str) -> Tolerance:
    return benchmark.tolerances.get(dtype, DEFAULT_TOLERANCES[dtype])  # type: ignore[call-overload]
