"""From the orchestrator's states to the results document's configurations."""

from __future__ import annotations

import statistics
from typing import Any

from bench_runner.state import ConfigState
from rnx.roofline import PEAK_KEYS, roofline
from rnx.schema import (
    BuildTime,
    Configuration,
    Correctness,
    Memory,
    Profile,
    Samples,
    SpeedOfLight,
    Work,
)

NATIVE_NOTE = (
    "the workload has no batch dimension (neither a get_inputs(batch_size=...) keyword nor a "
    "module-level batch_size) and no batch sizes were given: it ran at its own shapes"
)


def _samples(st: ConfigState) -> Samples | None:
    if not st.ns:
        return None
    return Samples(ns=st.ns, round=st.rounds, process=st.processes)


def _measurement_details(head: ConfigState, run_pids: set[int]) -> dict[str, Any]:
    details = dict(head.details)
    details["timing_wall_ns"] = head.timing_wall_ns
    telemetry = head.telemetry_details()
    if telemetry is not None:
        details["gpu_telemetry"] = telemetry
    contention = head.contention_details(run_pids)
    if contention is not None:
        details["contention"] = contention
    if head.spec.batch_size is None:
        details["shapes"] = NATIVE_NOTE
    return details


def _work(found: dict[str, Any] | None, details: dict[str, Any]) -> Work | None:
    """The checking worker's count, or None (with the reason in details) if it does not fit."""
    if not found:
        return None
    try:
        return Work(**found)
    except ValueError as e:  # pydantic's ValidationError: a figure out of bounds
        details["work_error"] = f"the work counted does not fit the document: {e}"[:2000]
        return None


def _profile(
    st: ConfigState, samples: Samples | None, details: dict[str, Any], key: str
) -> tuple[Profile | None, Memory | None]:
    """The worker's profile and memory as the document's models, with the timed median and
    the host-side share the profile alone cannot know; what does not fit is a detail."""
    profile = memory = None
    if st.profile:
        found = dict(st.profile)
        kernel_ns = found.get("kernel_ns")
        if samples is not None and samples.ns:
            median = float(statistics.median(samples.ns))
            found["timed_median_ns"] = median
            if kernel_ns is not None and median > 0:
                found["host_share"] = min(1.0, max(0.0, 1.0 - kernel_ns / median))
        try:
            profile = Profile(**found)
        except ValueError as e:
            details[f"{key}_error"] = f"the profile does not fit the document: {e}"[:2000]
    if st.memory:
        try:
            memory = Memory(**st.memory)
        except ValueError as e:
            details[f"{key}_memory_error"] = f"the memory figures do not fit: {e}"[:2000]
    return profile, memory


def speed_of_light(
    work: Work | None, peaks: dict[str, Any] | None, dtype: str, samples: Samples | None
) -> SpeedOfLight | None:
    """The median sample's roofline score, when the work, the peaks and samples are known."""
    if work is None or not peaks or "error" in peaks or samples is None or not samples.ns:
        return None
    peak_flops = (peaks.get("flops") or {}).get(PEAK_KEYS[dtype])
    measured_s = statistics.median(samples.ns) / 1e9
    line = roofline(
        flops=work.flops,
        bytes_moved=work.bytes,
        peak_flops=peak_flops,
        peak_bandwidth=peaks.get("bandwidth"),
        measured_s=measured_s,
    )
    if line is None:
        return None
    return SpeedOfLight(
        score=line.score,
        bound=line.bound,
        roofline_s=line.roofline_s,
        measured_s=measured_s,
        peak_flops=peak_flops if line.compute_s is not None else None,
        peak_bandwidth=peaks.get("bandwidth") if line.memory_s is not None else None,
        peak_source=peaks["source"],
        peak_part=str(peaks["part"])[:200],
        beyond_roofline=line.beyond_roofline,
    )


def configuration(
    head: ConfigState,
    base: ConfigState | None,
    run_pids: set[int],
    peaks: dict[str, Any] | None = None,
) -> Configuration:
    status, reason = head.status, head.reason
    samples = _samples(head) if status == "ok" else None
    if status == "ok" and samples is None:
        status, reason = "error", "no samples were measured (every worker process failed)"
    details = _measurement_details(head, run_pids)
    base_samples = None
    profile, memory = _profile(head, samples, details, "profile")
    base_profile = base_memory = None
    if base is not None:
        details["base_status"] = base.status
        if base.status != "ok":
            details["base_reason"] = base.reason
        else:
            base_samples = _samples(base)
            base_profile, base_memory = _profile(base, base_samples, details, "base_profile")
            base_telemetry = base.telemetry_details()
            if base_telemetry is not None:
                details["base_gpu_telemetry"] = base_telemetry
        if base.correctness is not None:
            details["base_correctness"] = base.correctness
    correctness = Correctness(**head.correctness) if head.correctness else None
    work = _work(head.work, details)
    return Configuration(
        runtime=head.spec.runtime,
        dtype=head.spec.dtype,
        batch_size=head.spec.batch_size,
        status=status,
        reason=reason,
        correctness=correctness,
        build=BuildTime(**head.build),
        samples=samples,
        base_samples=base_samples,
        details=jsonable(details),
        work=work,
        speed_of_light=speed_of_light(work, peaks, head.spec.dtype, samples),
        profile=profile,
        memory=memory,
        base_profile=base_profile,
        base_memory=base_memory,
    )


def jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, float) and value != value:
        return None
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return str(value)
