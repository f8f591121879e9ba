"""Per-call GPU kernel time from a profile: the kernels timer's arithmetic, apart from torch.

A GPU activity (kernel, memcpy, memset) belongs to the call whose host-side range holds the
host time of the API call that launched it (`cudaLaunchKernel`, `cuLaunchKernel`,
`cudaMemcpyAsync`, ...), matched by CUPTI's correlation id. So the harness's own L2 flush and
busy-stream spin, launched between the ranges, are left out by where they were launched, not
by their names (a workload may launch the same `FillFunctor` kernel), and a runtime that
launches from its own library (ONNX Runtime, Triton) is attributed as eager is.
"""

from __future__ import annotations

import bisect
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

# The host-side range the kernels timer opens around each timed call.
CALL_RANGE = "rnx::timed_call"
# CUPTI's synchronization records (kineto's names): a stream waiting, not work on the GPU.
SYNC_RECORDS = frozenset(
    {"Event Sync", "Stream Wait Event", "Stream Sync", "Context Sync", "Wait Event"}
)


@dataclass(frozen=True)
class GpuActivity:
    """One kernel, memcpy or memset on the GPU (times in us, the profiler's clock)."""

    name: str
    start_us: float
    end_us: float
    # Host time of the API call that launched it; None when the profile has no such record.
    launched_at_us: float | None


@dataclass(frozen=True)
class CallKernels:
    """One call's GPU work: the sum of its activities' durations, their count and span."""

    kernel_ns: float
    count: int
    span_ns: float


@dataclass(frozen=True)
class Attribution:
    calls: tuple[CallKernels, ...]
    # Launched outside every call: the harness's own flush and spin (and nothing else).
    outside: int
    # No launch record in the profile: cannot be attributed, so counted in no call.
    unattributed: int

    @property
    def mean_kernel_ns(self) -> float:
        return sum(c.kernel_ns for c in self.calls) / len(self.calls) if self.calls else 0.0

    @property
    def median_count(self) -> float:
        return float(statistics.median(c.count for c in self.calls)) if self.calls else 0.0


def attribute(
    activities: Iterable[GpuActivity], calls: Sequence[tuple[float, float]]
) -> Attribution:
    """Each activity to the call (host range start_us, end_us, both inclusive) during which
    it was launched; calls must be in time order and must not overlap."""
    starts = [s for s, _ in calls]
    for (s0, e0), (s1, _) in zip(calls, calls[1:], strict=False):
        if s1 < e0 or e0 < s0:
            raise ValueError(f"call ranges overlap or run backwards: ({s0}, {e0}) then {s1}")
    per_call: list[list[GpuActivity]] = [[] for _ in calls]
    outside = unattributed = 0
    for a in activities:
        if a.launched_at_us is None:
            unattributed += 1
            continue
        i = bisect.bisect_right(starts, a.launched_at_us) - 1
        if i < 0 or a.launched_at_us > calls[i][1]:
            outside += 1
            continue
        per_call[i].append(a)
    found = tuple(
        CallKernels(
            kernel_ns=1e3 * sum(a.end_us - a.start_us for a in acts),
            count=len(acts),
            span_ns=1e3 * (max(a.end_us for a in acts) - min(a.start_us for a in acts))
            if acts
            else 0.0,
        )
        for acts in per_call
    )
    return Attribution(calls=found, outside=outside, unattributed=unattributed)


def _is_device(event: Any) -> bool:
    return str(event.device_type).endswith("CUDA")


def _is_launch(event: Any) -> bool:
    # CUDA runtime and driver API calls (cudaLaunchKernel, cuLaunchKernelEx, cudaMemcpyAsync,
    # cudaGraphLaunch ...); torch ops and record_function ranges are named otherwise (aten::..).
    return not _is_device(event) and event.name.startswith("cu") and "::" not in event.name


def from_profile(events: Iterable[Any]) -> tuple[list[GpuActivity], list[tuple[float, float]]]:
    """GPU activities and the timed calls' host ranges from torch.profiler's events
    (`prof.events()`: FunctionEvent-like objects with name, id, device_type, time_range and
    is_user_annotation)."""
    events = list(events)
    launched = {e.id: e.time_range.start for e in events if _is_launch(e)}
    activities = [
        GpuActivity(
            name=e.name,
            start_us=e.time_range.start,
            end_us=e.time_range.end,
            launched_at_us=launched.get(e.id),
        )
        for e in events
        if _is_device(e)
        # record_function ranges are drawn on the GPU timeline too (gpu_user_annotation):
        # a span over kernels, not work of its own.
        and not getattr(e, "is_user_annotation", False)
        and e.name != CALL_RANGE
        and e.name not in SYNC_RECORDS
    ]
    calls = sorted(
        (e.time_range.start, e.time_range.end)
        for e in events
        if not _is_device(e) and e.name == CALL_RANGE
    )
    return activities, calls
