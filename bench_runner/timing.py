"""The timing loop: CPU and GPU clocks, warm-up, and the checks that keep the numbers honest."""

from __future__ import annotations

import functools
import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from bench_runner.errors import ConfigFailure
from bench_runner.gpu_checks import (
    CHECK_ROUNDS,
    RECHECKS,
    StreamCheck,
    SyncRound,
    shows_hidden_work,
)
from bench_runner.kernel_time import CALL_RANGE, attribute, from_profile
from bench_runner.telemetry import GpuTelemetry
from rnx.schema import CPU_METHOD, EVENTS_METHOD, KERNELS_METHOD

Call = Callable[[], object]
# The idle round of the stream check spins about as long as the call, at most this long.
IDLE_SPIN_MAX_NS = 2e6


@dataclass
class CpuTimer:
    """perf_counter_ns around `loops` back-to-back calls; a sample is the time per call."""

    method: str = CPU_METHOD
    details: dict[str, Any] = field(default_factory=dict)

    def sample(self, fn: Call, loops: int) -> float:
        t0 = time.perf_counter_ns()
        for _ in range(loops):
            fn()
        return (time.perf_counter_ns() - t0) / loops

    def check(self, fn: Call) -> StreamCheck | None:
        """Nothing runs asynchronously on the CPU clock."""
        return None


class _Telemetered:
    """The GPU's clock, power and temperature around each sample (NVML; None where unknown)."""

    telemetry: GpuTelemetry
    last: dict[str, Any]

    def _before(self) -> dict[str, float | None]:
        return self.telemetry.read()

    def _after(self, before: dict[str, float | None]) -> None:
        after = self.telemetry.read()
        clocks = [c for c in (before["sm_mhz"], after["sm_mhz"]) if c is not None]
        # The lower of the two: a sample is as fast as its slowest clock allows.
        self.last = {**after, "sm_mhz": min(clocks) if clocks else None}
        mask = self.telemetry.clock_reasons()
        if mask:
            self.details["clock_reasons_mask"] = self.details.get("clock_reasons_mask", 0) | mask

    details: dict[str, Any]


# The busy-stream spin before each call: its first length, and at most this long.
SPIN_START_NS = 100_000.0
SPIN_MAX_NS = 50e6
# A sample in which the GPU reached a call before the host had launched it is taken again, with
# a longer spin, at most this many times; the last is kept and counted (`late_samples_kept`).
LATE_RETAKES = 3


def next_spin_ns(spin_ns: float, launch_ns: Sequence[float], late: bool) -> float:
    """The spin for the next sample: twice the median host launch time plus 50 us, never shorter
    than now, and doubled after a sample in which the GPU waited for the host (a late call)."""
    wanted = 2.0 * statistics.median(launch_ns) + 50_000.0 if launch_ns else 0.0
    spin = max(spin_ns, wanted)
    if late:
        spin = max(2.0 * spin_ns, spin)
    return min(spin, SPIN_MAX_NS)


class CudaTimer(_Telemetered):
    """CUDA events on the stream the work runs on, with the host's launch time kept out.

    Before each call: the L2 is flushed (a buffer twice its size is zeroed, outside the events),
    then a spin kernel keeps the stream busy while the host records the start event and
    launches the work, so the start event fires only when the work can follow at once: the
    host's launch latency lands in the spin, not in the sample ("busy stream"). The host's time
    to launch the call is measured on the side and reported apart as launch overhead.

    The spin must outlast the host's launches, which take 60-80 us for a three-op eager layer
    on an H200 (experiments/gpu_launch_noise.py): with 50 us the stream ran dry in 3 calls of 4,
    the GPU waited for the host inside the events, and a 15 us layer read 14-60 us. So each
    sample checks it: an event recorded just after a synchronize ties the GPU's clock to the
    host's, and a call whose start event fired before the host had launched all of it is late;
    a sample with a late call is taken again with a longer spin (`next_spin_ns`).
    """

    method = EVENTS_METHOD

    def __init__(self, device: torch.device, telemetry: GpuTelemetry):
        self.device = device
        self.telemetry = telemetry
        props = torch.cuda.get_device_properties(device)
        l2 = int(getattr(props, "L2_cache_size", 0) or 64 * 2**20)
        self.flush_buffer = torch.empty(2 * l2 // 4, dtype=torch.int32, device=device)
        self.cycles_per_ns = self._calibrate_spin()
        self.details: dict[str, Any] = {"l2_bytes": l2, "flush_bytes": 2 * l2}
        self._fresh_statistics()

    def for_configuration(self, kind: type[CudaTimer] | None = None) -> CudaTimer:
        """A timer (this class, or `kind`) sharing this one's flush buffer and calibration, with
        its own statistics."""
        cls = kind or type(self)
        timer = cls.__new__(cls)
        timer.__dict__.update(self.__dict__)
        timer._fresh_statistics()
        return timer

    def _fresh_statistics(self) -> None:
        self.launch_ns: list[float] = []
        self.naive_ns: list[float] = []
        self.details = dict(self.details)
        self.spin_ns = SPIN_START_NS
        self.last: dict[str, Any] = {}

    def _calibrate_spin(self) -> float:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(1000)  # first launch loads the kernel
        cycles = 2_000_000
        start.record()
        torch.cuda._sleep(cycles)
        end.record()
        torch.cuda.synchronize(self.device)
        return cycles / max(start.elapsed_time(end) * 1e6, 1.0)

    def _count(self, key: str) -> None:
        self.details[key] = self.details.get(key, 0) + 1

    def sample(self, fn: Call, loops: int) -> float:
        before = self._before()
        for attempt in range(LATE_RETAKES + 1):
            ns, host, late = self._timed_calls(fn, loops)
            self.launch_ns.extend(host)
            spin = next_spin_ns(self.spin_ns, host, late > 0)
            if spin > self.spin_ns:
                self._count("spin_extended")
            self.spin_ns = spin
            if not late:
                break
            self._count("late_samples_retaken" if attempt < LATE_RETAKES else "late_samples_kept")
        self._after(before)
        return ns

    def _timed_calls(self, fn: Call, loops: int) -> tuple[float, list[float], int]:
        """(event ns per call, host launch ns of each call, calls the GPU reached too early)."""
        stream = torch.cuda.current_stream(self.device)
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(loops)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(loops)]
        anchor = torch.cuda.Event(enable_timing=True)
        host, launched = [], []
        cycles = int(self.spin_ns * self.cycles_per_ns)
        torch.cuda.synchronize(self.device)
        t_anchor = time.perf_counter_ns()
        anchor.record(stream)  # the GPU reaches it a few us after t_anchor: both clocks' zero
        for i in range(loops):
            self.flush_buffer.zero_()
            torch.cuda._sleep(cycles)
            h0 = time.perf_counter_ns()
            starts[i].record(stream)
            fn()
            ends[i].record(stream)
            launched.append(time.perf_counter_ns())
            host.append(float(launched[-1] - h0))
        torch.cuda.synchronize(self.device)
        total_ms = sum(s.elapsed_time(e) for s, e in zip(starts, ends, strict=True))
        # Started on the GPU (from the anchor) before the host was done launching the call: the
        # GPU waited inside the events. Conservative by the anchor's own few us of latency.
        late = sum(
            anchor.elapsed_time(s) * 1e6 < done - t_anchor
            for s, done in zip(starts, launched, strict=True)
        )
        return total_ms * 1e6 / loops, host, late

    def _sync_round(self, fn: Call) -> tuple[float, float, float]:
        """(event time, wall time, the device-wide synchronize after the timed stream)."""
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize(self.device)
        w0 = time.perf_counter_ns()
        start.record()
        fn()
        end.record()
        end.synchronize()  # the timed stream is done with the call...
        w1 = time.perf_counter_ns()
        torch.cuda.synchronize(self.device)  # ...and so is every stream of this process
        w2 = time.perf_counter_ns()
        return start.elapsed_time(end) * 1e6, float(w2 - w0), float(w2 - w1)

    def _check_rounds(self, fn: Call) -> tuple[SyncRound, ...]:
        rounds = []
        for _ in range(CHECK_ROUNDS):
            event, wall, after = self._sync_round(fn)
            # The idle round: the timed stream busy about as long as the call, and nothing else.
            cycles = max(1000, int(min(event, IDLE_SPIN_MAX_NS) * self.cycles_per_ns))
            _, _, idle_after = self._sync_round(functools.partial(torch.cuda._sleep, cycles))
            rounds.append(SyncRound(event, wall, after, idle_after))
        return tuple(rounds)

    def check(self, fn: Call) -> StreamCheck:
        """Work the call leaves on another stream of this process is an error: the events would
        report it as free. A GPU shared with other processes is not (see gpu_checks)."""
        checks: list[tuple[SyncRound, ...]] = []
        for _ in range(RECHECKS):
            checks.append(self._check_rounds(fn))
            if not shows_hidden_work(checks[-1]):
                break
        self.naive_ns = [r.event_ns for r in checks[0]]
        found = StreamCheck(tuple(checks))
        self.details.update(found.as_details())
        if found.hidden_work:
            raise ConfigFailure(found.hidden_reason(), details=dict(found.as_details()))
        return found

    def calibration_spread(self, runs: int = 9) -> float:
        """Median over fastest time of a fixed ~20 us kernel: near 1 on a GPU of our own."""
        a = self.flush_buffer[: 1 << 22].view(torch.float32)
        times = []
        for _ in range(runs):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            a.mul_(1.0)
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
        fastest = max(min(times), 1e-6)
        return round(statistics.median(times) / fastest, 3)

    def report(self) -> dict[str, Any]:
        out = dict(self.details)
        if self.launch_ns:
            out["launch_overhead_ns"] = round(statistics.median(self.launch_ns))
        if self.naive_ns:
            out["naive_event_ns"] = round(statistics.median(self.naive_ns))
        out["spin_ns"] = round(self.spin_ns)
        return out


class KernelTimer(CudaTimer):
    """The sum of the GPU durations of the call's own kernels, memcpys and memsets (CUPTI).

    Each sample runs its `loops` calls exactly as CudaTimer does (L2 flush, spin, events), with
    torch.profiler's CUDA activity on and each call inside a `record_function` range; CUPTI
    sees every kernel of the process, ONNX Runtime's and Triton's included. A call's time is
    the sum of the durations of what it launched inside its range (bench_runner/kernel_time.py),
    so the flush and spin fall out, and so do the GPU's idle gaps between kernels and the
    events' own few us, which dominate microsecond kernels under the events timer. The
    profiler's start, stop and parsing happen outside the GPU's kernels: no sample can contain
    them; their wall time is recorded (`profile_wall_ns`). A sample is the mean per call.
    """

    method = KERNELS_METHOD

    def _fresh_statistics(self) -> None:
        super()._fresh_statistics()
        self.kernel_counts: list[float] = []
        self.span_ns: list[float] = []
        self.profile_wall_ns: list[float] = []
        self.outside = self.unattributed = 0

    def sample(self, fn: Call, loops: int) -> float:
        from torch.profiler import ProfilerActivity, profile, record_function

        def in_range() -> None:
            with record_function(CALL_RANGE):
                fn()

        before = self._before()
        t0 = time.perf_counter_ns()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            span, host, late = self._timed_calls(in_range, loops)
        found = attribute(*from_profile(prof.events()))
        self.profile_wall_ns.append(float(time.perf_counter_ns() - t0))
        self._after(before)
        self.launch_ns.extend(host)
        # A late call only widens the event span, never a kernel's duration: no retake, but a
        # longer spin, so that the span recorded beside stays comparable with the events timer.
        self.spin_ns = next_spin_ns(self.spin_ns, host, late > 0)
        if len(found.calls) != loops:
            raise ConfigFailure(
                f"the kernels timer found {len(found.calls)} call ranges in the profile of "
                f"{loops} calls; the profiler lost events: time with harness.gpu-timer: events"
            )
        if not any(c.count for c in found.calls):
            raise ConfigFailure(
                f"the kernels timer saw no GPU work launched by the call ({loops} calls): a "
                "call that runs on the host has no kernel time; time it with harness.gpu-timer: "
                "events"
            )
        self.span_ns.append(span)
        self.kernel_counts.append(found.median_count)
        self.outside += found.outside
        self.unattributed += found.unattributed
        return found.mean_kernel_ns

    def report(self) -> dict[str, Any]:
        out = super().report()
        if self.span_ns:
            # The events' time of the same calls, for comparison with the events timer.
            out["event_span_ns"] = round(statistics.median(self.span_ns))
            out["kernels_per_call"] = statistics.median(self.kernel_counts)
            out["profile_wall_ns"] = round(statistics.median(self.profile_wall_ns))
        out["activities_outside_calls"] = self.outside
        out["activities_unattributed"] = self.unattributed
        return out


Timer = CpuTimer | CudaTimer


def make_timer(
    kind: str,
    device: torch.device,
    cache: dict[str, Any],
    telemetry: GpuTelemetry,
    gpu_timer: str = "events",
) -> Timer:
    """The clock for a configuration; `gpu_timer` (harness.gpu-timer) picks the GPU's."""
    if kind == "cpu":
        return CpuTimer()
    if gpu_timer not in GPU_TIMERS:
        raise ValueError(f"gpu_timer {gpu_timer!r}: use one of {', '.join(GPU_TIMERS)}")
    if "cuda" not in cache:
        # One flush buffer and calibration per process; per-config launch statistics.
        cache["cuda"] = CudaTimer(device, telemetry)
    shared: CudaTimer = cache["cuda"]
    return shared.for_configuration(GPU_TIMERS[gpu_timer])


GPU_TIMERS: dict[str, type[CudaTimer]] = {"events": CudaTimer, "kernels": KernelTimer}


@dataclass
class WarmUp:
    loops: int
    iterations: int
    stable: bool
    per_call_ns: float


def warm_up(
    timer: Timer,
    fn: Call,
    *,
    min_iterations: int,
    budget_ns: float,
    target_sample_ns: float,
    max_sample_ns: float,
    max_loops: int = 10_000,
) -> WarmUp:
    """Run until three consecutive samples agree within 5%, or the budget is spent.

    Also picks `loops`, the calls per sample: enough for a sample of about target_sample_ns
    (so the clock's resolution does not matter), never more than max_sample_ns per sample.
    """
    t_start = time.perf_counter_ns()
    first = timer.sample(fn, 1)
    per_call = max(first, 1.0)
    loops = 1
    history: list[float] = []
    stable = False
    iterations = 1
    while True:
        loops = max(1, min(max_loops, math.ceil(target_sample_ns / per_call)))
        loops = max(1, min(loops, int(max_sample_ns // per_call)))
        s = timer.sample(fn, loops)
        iterations += 1
        per_call = max(s, 1.0)
        history.append(s)
        last = history[-3:]
        if len(last) == 3 and (max(last) - min(last)) <= 0.05 * min(last):
            stable = True
        elapsed = time.perf_counter_ns() - t_start
        if iterations >= min_iterations and (stable or elapsed > budget_ns):
            break
    return WarmUp(loops=loops, iterations=iterations, stable=stable, per_call_ns=per_call)
