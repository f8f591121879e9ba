"""A few profiled calls of a configuration after its timing: where its time and memory went.

The worker calls `profile_configuration` once per configuration, in the process that timed it,
once its timing is over (nothing else is measured meanwhile), so the profiler's overhead never
reaches a sample. Two passes over the bound call:

1. memory (no profiler): on a GPU the caching allocator's peaks (torch.cuda, reset first); on
   the CPU the resident set's high-water mark (VmHWM, reset by writing 5 to
   /proc/self/clear_refs) as the operating system sees it;
2. profile: torch.autograd.profiler (Kineto; the object torch.profiler.profile wraps, without
   its start-up import of torch._inductor, seconds on a cold process) over a few calls, CPU
   activity plus CUDA (CUPTI) on a GPU. On the CPU the same pass records allocations
   (profile_memory), whose running sum gives the peak tensor memory of the calls.

The summary (rnx.schema.Profile and Memory) is per call, names normalised so the same
kernel matches across runs (`normalise_name`), rows capped. docs/profiles.md says what it can
and cannot tell.
"""

from __future__ import annotations

import contextlib
import re
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from rnx.schema import MAX_OPERATOR_KERNELS, MAX_PROFILE_NAME, MAX_PROFILE_ROWS

# As many profiled calls as fit this budget, between 1 and MAX_PROFILED_CALLS: the profile is
# a structure (which operators and kernels, how many launches) more than a timing, and its
# cost is paid once per configuration and side (goal: within 10% of a run's wall time).
PROFILE_BUDGET_NS = 5e7
MAX_PROFILED_CALLS = 7
# Each profiled call runs inside this record_function, so each operator's time is known per
# call: its least over the calls resists the slow calls (page faults of a fresh buffer, a
# preempted thread: noise only ever adds time) that move a mean, or even a median, of a few
# calls by more than an extra operator costs (a softmax read 0.6 to 1.1 ms from one
# profile to the next on a 2-core CPU).
CALL_MARK = "rnx::profiled_call"
MEMORY_CALLS = 2
# The device events of the kernels, copies and sets; any other CPU-side event of the CUDA
# runtime or driver (cudaLaunchKernel, cuLaunchKernel...) is host work, not an operator.
_RUNTIME_API = re.compile(r"^(cuda|cu[A-Z]|hip|nccl|nvtx)")
_NOT_OPERATORS = ("[memory]", "ProfilerStep", "[OutOfMemory]", CALL_MARK)


@dataclass(frozen=True)
class OwnProfile:
    """What a runtime's own profiler saw over `calls` calls, for a runtime whose operators
    torch.profiler cannot see (ONNX Runtime runs its graph in its own code): each operator
    event as (name, call index, self ns), and the most memory a call held beyond what was in
    use before it (None: not known)."""

    source: str
    events: list[tuple[str, int, float]]
    peak_bytes: int | None


_HEX = re.compile(r"0x[0-9a-fA-F]+")
# A number standing alone (a template argument, a size): not one inside an identifier, so
# `sm90_gemm_128x64` and `triton_poi_fused_add_0` keep theirs (they name the variant).
_NUMBER = re.compile(r"(?<![A-Za-z0-9_.])\d+(?![A-Za-z0-9_])")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]+")


def normalise_name(name: str) -> str:
    """The key an operator or kernel is matched by across runs: no return type, no argument
    list, no addresses, template and size numbers as N, at most MAX_PROFILE_NAME characters.

    `void at::native::(anonymous namespace)::softmax_warp_forward<float, float, 10>(float*, int)`
    becomes `at::native::softmax_warp_forward<float, float, N>`.
    """
    text = _CONTROL.sub(" ", name).strip()
    if text.startswith("void "):
        text = text[5:]
    text = text.replace("(anonymous namespace)::", "")
    if ("::" in text or "<" in text) and text.endswith(")"):
        text = _without_arguments(text)
    text = _HEX.sub("ADDR", text)
    text = _NUMBER.sub("N", text)
    text = " ".join(text.split()) or "?"
    if len(text) > MAX_PROFILE_NAME:
        text = text[: MAX_PROFILE_NAME - 1] + "\u2026"
    return text


def _without_arguments(text: str) -> str:
    """`f<T>(int, float*)` -> `f<T>`: drop the last balanced parenthesised group."""
    depth = 0
    for i in range(len(text) - 1, -1, -1):
        depth += {")": 1, "(": -1}.get(text[i], 0)
        if depth == 0:
            return text[:i].rstrip() if i > 0 else text
    return text


def profiled_calls(per_call_ns: float) -> int:
    """How many calls to profile: a few, within PROFILE_BUDGET_NS."""
    if per_call_ns <= 0:
        return MAX_PROFILED_CALLS
    return max(1, min(MAX_PROFILED_CALLS, int(PROFILE_BUDGET_NS // per_call_ns)))


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


# ---- memory


def _status_kib(field: str) -> int | None:
    with contextlib.suppress(OSError, ValueError):
        for line in open("/proc/self/status"):  # noqa: SIM115
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return None


def _reset_high_water_mark() -> bool:
    """VmHWM := VmRSS now (Linux 4.0+). ru_maxrss cannot be reset: it is the process's
    lifetime peak, so after timing it says nothing about these calls."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        return False
    return True


def measure_memory(call: Callable[[], object], device: torch.device) -> dict[str, Any]:
    """Peak memory over MEMORY_CALLS calls (the Memory fields; on the CPU the profile pass
    adds peak_allocated_bytes)."""
    if device.type == "cuda":
        _synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        held = int(torch.cuda.memory_allocated(device))
        for _ in range(MEMORY_CALLS):
            call()
        _synchronize(device)
        allocated = int(torch.cuda.max_memory_allocated(device))
        reserved = int(torch.cuda.max_memory_reserved(device))
        stranded = (reserved - allocated) / reserved if reserved > 0 else None
        return {
            "device": "cuda",
            # What the calls themselves held at their peak, beyond what was allocated before
            # them (weights, inputs, and the harness's own L2-flush buffer of twice the L2,
            # 120 MiB on an H200, which diluted a doubled 2 MiB intermediate to +1.3%), as on
            # the CPU.
            "peak_allocated_bytes": max(0, allocated - held),
            "held_bytes": held,
            "peak_reserved_bytes": reserved,
            "reserved_unallocated_share": None if stranded is None else max(0.0, stranded),
        }
    before = _status_kib("VmRSS") if _reset_high_water_mark() else None
    for _ in range(MEMORY_CALLS):
        call()
    peak = _status_kib("VmHWM") if before is not None else None
    growth = None if before is None or peak is None else max(0, peak - before) * 1024
    return {"device": "cpu", "peak_allocated_bytes": 0, "rss_growth_bytes": growth}


def peak_from_allocations(records: Iterable[tuple[int, int]]) -> int:
    """The most bytes held at once by the allocations (+) and frees (-) the profiler recorded,
    (time ns, bytes) in any order, counted from zero at the profile's start."""
    changes = sorted(records)
    held = peak = 0
    for _, change in changes:
        held += change
        peak = max(peak, held)
    return peak


# ---- profile


def _is_device_event(event: Any) -> bool:
    return str(getattr(event, "device_type", "")).endswith(("CUDA", "HIP"))


def _call_index(event: Any, marks: dict[int, int]) -> int | None:
    """Which profiled call an operator ran in: the CALL_MARK above it, if any."""
    parent = event.cpu_parent
    while parent is not None:
        if parent.name == CALL_MARK:
            return marks.get(id(parent))
        parent = parent.cpu_parent
    return None


def _operator_rows(calls: int) -> dict[str, dict[str, Any]]:
    """Per operator name: its calls, its self time in each profiled call, launches, kernels."""
    return defaultdict(
        lambda: {"calls": 0, "per_call": [0.0] * calls, "launches": 0, "kernels": Counter()}
    )


def summarise(events: Iterable[Any], *, calls: int, on_gpu: bool) -> dict[str, Any]:
    """Per call: each operator's calls, self time (its least over the calls) and kernels,
    each kernel's launches and time; top MAX_PROFILE_ROWS rows of each, the rest counted in
    other_rows/other_ns."""
    events = list(events)
    starts = sorted((e.time_range.start, id(e)) for e in events if e.name == CALL_MARK)
    marks = {key: i for i, (_, key) in enumerate(starts)}
    calls = len(marks) or calls
    ops = _operator_rows(calls)
    kernels: dict[str, dict[str, float]] = defaultdict(lambda: {"launches": 0, "ns": 0.0})
    for e in events:
        if _is_device_event(e):
            row = kernels[normalise_name(e.name)]
            row["launches"] += 1
            row["ns"] += (e.time_range.end - e.time_range.start) * 1e3
            continue
        if e.name.startswith(_NOT_OPERATORS) or _RUNTIME_API.match(e.name):
            continue
        index = _call_index(e, marks) if marks else 0
        if index is None:
            continue  # outside the calls: the profiler's own synchronisation
        op = ops[normalise_name(e.name)]
        op["calls"] += 1
        if on_gpu:
            for k in getattr(e, "kernels", []):
                op["per_call"][index] += k.duration * 1e3
                op["launches"] += 1
                op["kernels"][normalise_name(k.name)] += k.duration
        else:
            op["per_call"][index] += e.self_cpu_time_total * 1e3
    return _summary(ops, kernels, calls=calls, on_gpu=on_gpu, source="torch.profiler")


def summarise_own(own: OwnProfile, *, calls: int) -> dict[str, Any]:
    """The summary of a runtime's own profile: its operators, CPU self time, no kernels."""
    ops = _operator_rows(calls)
    for name, index, ns in own.events:
        op = ops[normalise_name(name)]
        op["calls"] += 1
        op["per_call"][index] += ns
    return _summary(ops, {}, calls=calls, on_gpu=False, source=own.source)


def _summary(
    ops: dict[str, dict[str, Any]],
    kernels: dict[str, dict[str, float]],
    *,
    calls: int,
    on_gpu: bool,
    source: str,
) -> dict[str, Any]:
    """Rows per call from per-operator and per-kernel totals; top MAX_PROFILE_ROWS of each."""
    for op in ops.values():
        op["self_ns"] = min(op["per_call"]) * calls  # per call below
    kernel_ns = sum(k["ns"] for k in kernels.values())
    total = kernel_ns if on_gpu else sum(o["self_ns"] for o in ops.values())
    op_rows = sorted(ops.items(), key=lambda kv: (-kv[1]["self_ns"], -kv[1]["calls"], kv[0]))
    kernel_rows = sorted(kernels.items(), key=lambda kv: (-kv[1]["ns"], kv[0]))

    def share(ns: float) -> float:
        return min(1.0, ns / total) if total > 0 else 0.0

    cut = [*op_rows[MAX_PROFILE_ROWS:], *kernel_rows[MAX_PROFILE_ROWS:]]
    return {
        "source": source,
        "time_basis": "device" if on_gpu else "cpu",
        "calls": calls,
        "total_ns": total / calls,
        "launches_per_call": sum(k["launches"] for k in kernels.values()) / calls,
        "kernel_ns": kernel_ns / calls if on_gpu else None,
        "operators": [
            {
                "name": name,
                "calls": o["calls"] / calls,
                "self_ns": o["self_ns"] / calls,
                "share": share(o["self_ns"]),
                "launches": o["launches"] / calls,
                "kernels": [k for k, _ in o["kernels"].most_common(MAX_OPERATOR_KERNELS)],
            }
            for name, o in op_rows[:MAX_PROFILE_ROWS]
        ],
        "kernels": [
            {
                "name": name,
                "launches": k["launches"] / calls,
                "ns": k["ns"] / calls,
                "share": share(k["ns"]),
            }
            for name, k in kernel_rows[:MAX_PROFILE_ROWS]
        ],
        "other_rows": len(cut),
        "other_ns": sum(r.get("self_ns", r.get("ns", 0.0)) for _, r in cut) / calls,
    }


def profile_calls(
    call: Callable[[], object],
    device: torch.device,
    calls: int,
    *,
    trace_path: Path | None = None,
) -> tuple[dict[str, Any], int | None]:
    """(the summary of `calls` profiled calls, the peak tensor bytes on the CPU or None)."""
    from torch.autograd import profiler

    on_gpu = device.type == "cuda"
    _synchronize(device)
    with profiler.profile(
        use_kineto=True,
        use_cpu=True,
        use_device="cuda" if on_gpu else None,
        profile_memory=not on_gpu,
    ) as prof:
        for _ in range(calls):
            with profiler.record_function(CALL_MARK):
                call()
        _synchronize(device)
    events = prof.function_events
    summary = summarise(events, calls=calls, on_gpu=on_gpu)
    if trace_path is not None:
        trace_path.parent.mkdir(parents=True, exist_ok=True)
        prof.export_chrome_trace(str(trace_path))
        summary["trace"] = trace_path.name
    if on_gpu:
        return summary, None
    # The raw records: the processed events fold an allocation into the operator around it.
    records = [
        (r.start_ns(), int(r.nbytes()))
        for r in prof.kineto_results.events()
        if r.name() == "[memory]" and str(r.device_type()).endswith("CPU")
    ]
    return summary, peak_from_allocations(records)


def profile_configuration(
    call: Callable[[], object],
    device: torch.device,
    *,
    per_call_ns: float,
    trace_path: Path | None = None,
    own_profiler: Callable[[int, Path | None], OwnProfile] | None = None,
) -> dict[str, Any]:
    """{"memory": ..., "profile": ..., "profile_wall_ns": ...} for one bound call; a failure of
    either pass is its own `*_error` key, never the configuration's. own_profiler(calls,
    trace_path): the runtime's own profile, on the CPU where a runtime offers one (on a GPU
    torch.profiler's CUDA activity sees every kernel, the runtime's too)."""
    out: dict[str, Any] = {}
    t0 = time.perf_counter_ns()
    try:
        out["memory"] = measure_memory(call, device)
    except Exception as e:  # noqa: BLE001 - no memory figure costs that figure only
        out["memory_error"] = f"{type(e).__name__}: {e}"[:2000]
    try:
        calls = profiled_calls(per_call_ns)
        if own_profiler is not None and device.type == "cpu":
            own = own_profiler(calls, trace_path)
            profile, cpu_peak = summarise_own(own, calls=calls), own.peak_bytes
            if trace_path is not None:
                profile["trace"] = trace_path.name
        else:
            profile, cpu_peak = profile_calls(call, device, calls, trace_path=trace_path)
        out["profile"] = profile
        if cpu_peak is not None and "memory" in out:
            out["memory"]["peak_allocated_bytes"] = cpu_peak
    except Exception as e:  # noqa: BLE001 - the profiler can fail (CUPTI busy, say)
        out["profile_error"] = f"{type(e).__name__}: {e}"[:2000]
    out["profile_wall_ns"] = time.perf_counter_ns() - t0
    return out
