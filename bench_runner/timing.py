"""The timing loop: CPU and GPU clocks, warm-up, and the checks that keep the numbers honest."""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from bench_runner.errors import ConfigFailure

Call = Callable[[], object]


@dataclass
class CpuTimer:
    """perf_counter_ns around `loops` back-to-back calls; a sample is the time per call."""

    method: str = "perf_counter_ns"
    details: dict[str, Any] = field(default_factory=dict)

    def sample(self, fn: Call, loops: int) -> float:
        t0 = time.perf_counter_ns()
        for _ in range(loops):
            fn()
        return (time.perf_counter_ns() - t0) / loops

    def check(self, fn: Call) -> None:
        """Nothing runs asynchronously on the CPU clock."""


@dataclass
class CudaWallTimer:
    """For runtimes that launch on their own stream (ONNX Runtime): wall clock with a sync."""

    device: torch.device
    method: str = "wall_clock+device_sync"
    details: dict[str, Any] = field(default_factory=dict)

    def sample(self, fn: Call, loops: int) -> float:
        torch.cuda.synchronize(self.device)
        t0 = time.perf_counter_ns()
        for _ in range(loops):
            fn()
        torch.cuda.synchronize(self.device)
        return (time.perf_counter_ns() - t0) / loops

    def check(self, fn: Call) -> None:
        """A device-wide sync already covers every stream."""


class CudaTimer:
    """CUDA events on the stream the work runs on, with the host's launch time kept out.

    Before each call: the L2 is flushed (a buffer twice its size is zeroed, outside the events),
    then a spin kernel keeps the stream busy while the host records the start event and
    launches the work, so the start event fires only when the work can follow at once: the
    host's launch latency lands in the spin, not in the sample ("busy stream"). The host's time
    to launch the call is measured on the side and reported apart as launch overhead.
    """

    method = "cuda_events+busy_stream+l2_flush"

    def __init__(self, device: torch.device):
        self.device = device
        props = torch.cuda.get_device_properties(device)
        l2 = int(getattr(props, "L2_cache_size", 0) or 64 * 2**20)
        self.flush_buffer = torch.empty(2 * l2 // 4, dtype=torch.int32, device=device)
        self.cycles_per_ns = self._calibrate_spin()
        self.spin_ns = 50_000.0
        self.launch_ns: list[float] = []
        self.naive_ns: list[float] = []
        self.details: dict[str, Any] = {"l2_bytes": l2, "flush_bytes": 2 * l2}

    def _calibrate_spin(self) -> float:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(1000)  # first launch loads the kernel
        cycles = 2_000_000
        start.record()
        torch.cuda._sleep(cycles)
        end.record()
        torch.cuda.synchronize(self.device)
        return cycles / max(start.elapsed_time(end) * 1e6, 1.0)

    def sample(self, fn: Call, loops: int) -> float:
        stream = torch.cuda.current_stream(self.device)
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(loops)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(loops)]
        host = []
        for i in range(loops):
            self.flush_buffer.zero_()
            torch.cuda._sleep(int(self.spin_ns * self.cycles_per_ns))
            h0 = time.perf_counter_ns()
            starts[i].record(stream)
            fn()
            ends[i].record(stream)
            host.append(time.perf_counter_ns() - h0)
        torch.cuda.synchronize(self.device)
        total_ms = sum(s.elapsed_time(e) for s, e in zip(starts, ends, strict=True))
        slowest_launch = max(host)
        self.launch_ns.extend(host)
        if slowest_launch > 0.7 * self.spin_ns:
            # The spin did not outlast the launch: lengthen it; flagged when it keeps happening.
            self.spin_ns = min(2.0 * slowest_launch + 20_000, 50e6)
            self.details["spin_extended"] = self.details.get("spin_extended", 0) + 1
        return total_ms * 1e6 / loops

    def check(self, fn: Call) -> None:
        """Event time must agree with synchronised wall time: work hidden on another stream is
        not in the events (and would be reported as free)."""
        events, walls = [], []
        for _ in range(5):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda.synchronize(self.device)
            w0 = time.perf_counter_ns()
            start.record()
            fn()
            end.record()
            torch.cuda.synchronize(self.device)
            walls.append(time.perf_counter_ns() - w0)
            events.append(start.elapsed_time(end) * 1e6)
        ev, wall = statistics.median(events), statistics.median(walls)
        self.naive_ns = events
        self.details.update(
            {"stream_check_event_ns": round(ev), "stream_check_wall_ns": round(wall)}
        )
        if wall - ev > 0.5 * ev + 200_000:
            raise ConfigFailure(
                f"event time ({ev / 1e3:.1f} us) and synchronised wall time ({wall / 1e3:.1f} us) "
                f"disagree: the call leaves work on another stream, which the events do not "
                f"time. Run the work on torch.cuda.current_stream()"
            )

    def report(self) -> dict[str, Any]:
        out = dict(self.details)
        if self.launch_ns:
            out["launch_overhead_ns"] = round(statistics.median(self.launch_ns))
        if self.naive_ns:
            out["naive_event_ns"] = round(statistics.median(self.naive_ns))
        out["spin_ns"] = round(self.spin_ns)
        return out


Timer = CpuTimer | CudaWallTimer | CudaTimer


def make_timer(kind: str, device: torch.device, cache: dict[str, Any]) -> Timer:
    if kind == "cpu":
        return CpuTimer()
    if kind == "cuda_wall":
        return CudaWallTimer(device)
    if "cuda" not in cache:
        cache["cuda"] = CudaTimer(device)
    # One flush buffer and calibration per process; per-config launch statistics.
    shared: CudaTimer = cache["cuda"]
    timer = CudaTimer.__new__(CudaTimer)
    timer.__dict__.update(shared.__dict__)
    timer.launch_ns, timer.naive_ns, timer.details = [], [], dict(shared.details)
    return timer


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
