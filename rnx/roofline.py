"""The speed-of-light arithmetic: roofline time, score and bound from work and peaks.

Pure arithmetic (no pydantic, no torch), so the harness, the GPU benchmark script and the
readers of a results document share one formula. The score never changes a verdict.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

# A score above this is not a fast kernel but a measurement or counting problem: the work was
# under-counted (a declared get_flops/get_bytes too low), the peak is wrong for the part (a
# power cap, a sparse figure) or the timer missed work (asynchronous or cached results).
BEYOND_ROOFLINE_TOLERANCE = 1.05

# The harness's dtypes and the row of the peaks table each is held to. float32 is held to the
# plain FP32 peak: TF32 math runs only for the tf32 dtype (bench_runner/precision.py).
PEAK_KEYS: dict[str, str] = {
    "float64": "fp64",
    "float32": "fp32",
    "tf32": "tf32",
    "float16": "fp16",
    "bfloat16": "bf16",
}

Bound = Literal["compute", "memory"]


@dataclass(frozen=True)
class Roofline:
    roofline_s: float  # max(compute_s, memory_s)
    compute_s: float | None  # flops / peak FLOP/s, None without flops or a peak for the dtype
    memory_s: float | None  # bytes / peak bandwidth, None without bytes or a peak bandwidth
    bound: Bound
    score: float  # roofline_s / measured_s; 1.0 is at the limit
    beyond_roofline: bool  # score > BEYOND_ROOFLINE_TOLERANCE: a problem, not a result


def roofline(
    *,
    flops: float | None,
    bytes_moved: float | None,
    peak_flops: float | None,
    peak_bandwidth: float | None,
    measured_s: float,
    tolerance: float = BEYOND_ROOFLINE_TOLERANCE,
) -> Roofline | None:
    """The roofline of one configuration, or None when neither bound can be computed.

    A bound is computed when both its work and its peak are known and positive: flops with a
    FLOP/s peak, bytes with a bandwidth. A configuration with no counted FLOPs (an elementwise
    kernel) is held to its memory bound alone.
    """
    if not measured_s > 0:
        raise ValueError(f"measured_s must be a positive time in seconds, got {measured_s!r}")
    compute_s = flops / peak_flops if flops and peak_flops else None
    memory_s = bytes_moved / peak_bandwidth if bytes_moved and peak_bandwidth else None
    if compute_s is None and memory_s is None:
        return None
    bound: Bound = "compute" if (compute_s or 0.0) >= (memory_s or 0.0) else "memory"
    roofline_s = max(compute_s or 0.0, memory_s or 0.0)
    score = roofline_s / measured_s
    return Roofline(
        roofline_s=roofline_s,
        compute_s=compute_s,
        memory_s=memory_s,
        bound=bound,
        score=score,
        beyond_roofline=score > tolerance,
    )


def percent_of_peak_bandwidth(
    bytes_moved: float, measured_s: float, peak_bandwidth: float
) -> float:
    """nvbench's "% of peak bandwidth": achieved bytes per second over the peak, as a fraction."""
    return bytes_moved / measured_s / peak_bandwidth
