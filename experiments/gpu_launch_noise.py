"""Why a launch-bound layer's CUDA-event times are noisy: variants of the method, side by side.

Run on a GPU machine from the repository root: `python3 -m experiments.gpu_launch_noise --out DIR`
(about 2 minutes on an H200; writes DIR/launch-noise.npz and prints a table). Needs numpy and
torch, plus bench_runner's timing module (no pydantic).

--processes fresh worker processes, one after the other, each time the launch-bound layer of
benchmarks/gpu/gpu_corpus.py (matmul + GELU + layer norm on 8x256, float32 and bfloat16) under every
variant of the method below, interleaved in random order round by round, --loops calls a sample:

- corpus: gpu_corpus's method as recorded (spin calibrated once at process start, zero_ flush,
  a 50 us spin, events around each call);
- timer: bench_runner.timing.CudaTimer itself, as the harness builds it;
- spinN: the same with the spin calibrated on a warm GPU and N us long;
- read200 / noflush200: the L2 flushed by a read (a sum over the buffer) or not at all;
- graphN: the layer captured in a CUDA graph, one replay per call, events around it;
- loopN: one flush and one spin, then one event pair around all the sample's calls.

Per sample it records the event time per call, the host's time to launch a call (perf_counter_ns
around the start event, the call and the end event), the spin's real length (an event before it),
the flush's length, and the slack: how long after the host had launched the call's last kernel
the GPU reached the start event (an event recorded just after a synchronize anchors the two
clocks; the slack is a lower bound by that launch's few us). A negative slack means the GPU waited
for the host inside the timed region: host launch time leaked into the sample.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

DTYPES = ("float32", "bfloat16")


@dataclass(frozen=True)
class Variant:
    name: str
    mode: str  # per_call | loop | graph | timer
    flush: str = "zero"  # zero | sum | none
    spin_us: float = 50.0
    calibration: str = "warm"  # cold: at process start, as gpu_corpus and CudaTimer did


VARIANTS = (
    Variant("corpus", "per_call", calibration="cold"),
    Variant("timer", "timer"),
    Variant("spin50", "per_call"),
    Variant("spin200", "per_call", spin_us=200),
    Variant("spin1000", "per_call", spin_us=1000),
    Variant("read200", "per_call", flush="sum", spin_us=200),
    Variant("noflush200", "per_call", flush="none", spin_us=200),
    Variant("graph50", "graph"),
    Variant("graph200", "graph", spin_us=200),
    Variant("loop50", "loop"),
    Variant("loop1000", "loop", spin_us=1000),
)
# What each sample records, per variant and dtype (NaN where a variant cannot say).
FIELDS = ("ns", "launch_ns", "spin_ns", "flush_ns", "min_slack_ns", "late_calls")


def _calibrate(torch: Any, cycles: int = 2_000_000) -> float:
    """Spin cycles per ns: a 2M-cycle spin timed with events (CudaTimer's way)."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    torch.cuda._sleep(cycles)
    end.record()
    torch.cuda.synchronize()
    return float(cycles / max(start.elapsed_time(end) * 1e6, 1.0))


def _sm_mhz() -> float:
    try:
        import pynvml

        pynvml.nvmlInit()
        h = pynvml.nvmlDeviceGetHandleByIndex(0)
        return float(pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM))
    except Exception:  # noqa: BLE001 - no NVML: the clock is simply not recorded
        return float("nan")


def _layers(torch: Any) -> dict[str, Callable[[], object]]:
    fns: dict[str, Callable[[], object]] = {}
    for dt in DTYPES:
        dtype = getattr(torch, dt)
        x = torch.randn(8, 256, device="cuda", dtype=dtype)
        w = torch.randn(256, 256, device="cuda", dtype=dtype) / 16

        def layer(x: Any = x, w: Any = w) -> object:
            return torch.nn.functional.layer_norm(torch.nn.functional.gelu(x @ w), (256,))

        fns[dt] = layer
    return fns


def _graphed(torch: Any, fn: Callable[[], object]) -> Callable[[], object]:
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    torch.cuda.synchronize()
    return graph.replay


class Methods:
    """The variants' sampling loops over one process's flush buffer and calibrations."""

    def __init__(self, torch: Any) -> None:
        self.torch = torch
        props = torch.cuda.get_device_properties(0)
        l2 = int(getattr(props, "L2_cache_size", 0) or 64 * 2**20)
        self.buffer = torch.empty(2 * l2 // 4, dtype=torch.int32, device="cuda")
        torch.cuda._sleep(1000)  # the first launch loads the kernel
        self.cold = _calibrate(torch)  # as gpu_corpus and CudaTimer did, on an idle GPU
        self.cold_mhz = _sm_mhz()
        self.warm = self.cold
        self.warm_mhz = self.cold_mhz

    def warm_up(self) -> None:
        """Calibrate again with the GPU's clock up: several spins, the highest rate."""
        a = self.torch.randn(4096, 4096, device="cuda")
        for _ in range(20):
            a @ a
        self.warm = max(_calibrate(self.torch) for _ in range(5))
        self.warm_mhz = _sm_mhz()

    def _flush(self, how: str) -> None:
        if how == "zero":
            self.buffer.zero_()
        elif how == "sum":
            self.buffer.sum()

    def _cycles(self, v: Variant) -> int:
        rate = self.cold if v.calibration == "cold" else self.warm
        return int(v.spin_us * 1e3 * rate)

    def _event(self) -> Any:
        return self.torch.cuda.Event(enable_timing=True)

    def per_call(self, v: Variant, fn: Callable[[], object], loops: int) -> dict[str, float]:
        torch, clock = self.torch, time.perf_counter_ns
        ev = [[self._event() for _ in range(loops)] for _ in range(4)]  # pre, spin, start, end
        launch, done = [], []
        cycles = self._cycles(v)
        anchor = self._event()
        torch.cuda.synchronize()
        t_anchor = clock()
        anchor.record()
        for i in range(loops):
            ev[0][i].record()
            self._flush(v.flush)
            ev[1][i].record()
            torch.cuda._sleep(cycles)
            h0 = clock()
            ev[2][i].record()
            fn()
            ev[3][i].record()
            done.append(clock())
            launch.append(done[-1] - h0)
        torch.cuda.synchronize()
        ms = [[a.elapsed_time(b) for a, b in zip(ev[j], ev[j + 1], strict=True)] for j in (0, 1, 2)]
        slack = [
            anchor.elapsed_time(s) * 1e6 - (d - t_anchor) for s, d in zip(ev[2], done, strict=True)
        ]
        return {
            "ns": float(np.mean(ms[2]) * 1e6),
            "launch_ns": float(np.median(launch)),
            "spin_ns": float(np.median(ms[1]) * 1e6),
            "flush_ns": float(np.median(ms[0]) * 1e6),
            "min_slack_ns": float(min(slack)),
            "late_calls": float(sum(s < 0 for s in slack)),
        }

    def loop(self, v: Variant, fn: Callable[[], object], loops: int) -> dict[str, float]:
        torch, clock = self.torch, time.perf_counter_ns
        anchor, pre, start, end = (self._event() for _ in range(4))
        torch.cuda.synchronize()
        t_anchor = clock()
        anchor.record()
        self._flush(v.flush)
        pre.record()
        torch.cuda._sleep(self._cycles(v))
        h0 = clock()
        start.record()
        for _ in range(loops):
            fn()
        end.record()
        h1 = clock()
        torch.cuda.synchronize()
        slack = anchor.elapsed_time(start) * 1e6 - (h1 - t_anchor)
        return {
            "ns": start.elapsed_time(end) * 1e6 / loops,
            "launch_ns": (h1 - h0) / loops,
            "spin_ns": pre.elapsed_time(start) * 1e6,
            "flush_ns": anchor.elapsed_time(pre) * 1e6,
            "min_slack_ns": slack,
            "late_calls": float(slack < 0),
        }


def _nan_row() -> dict[str, float]:
    return dict.fromkeys(FIELDS, float("nan"))


def worker(out: str, seed: int, rounds: int, loops: int) -> None:
    import torch

    from bench_runner.telemetry import open_telemetry
    from bench_runner.timing import CudaTimer

    torch.manual_seed(seed)
    torch.set_num_threads(1)
    rng = np.random.default_rng(seed)
    methods = Methods(torch)  # calibrates cold, first thing, as the corpus worker does
    shared = CudaTimer(torch.device("cuda"), open_telemetry(None, 0))
    fns = _layers(torch)
    for fn in fns.values():
        for _ in range(50):
            fn()
    graphs = {dt: _graphed(torch, fn) for dt, fn in fns.items()}
    timers = {dt: shared.for_configuration() for dt in DTYPES}
    methods.warm_up()
    pairs = [(d, v) for d in range(len(DTYPES)) for v in range(len(VARIANTS))]
    data = np.full((len(DTYPES), len(VARIANTS), rounds, len(FIELDS)), np.nan)
    mhz = np.full(rounds, np.nan)
    for r in range(-3, rounds):  # three rounds of warm-up, not kept
        if r >= 0:
            mhz[r] = _sm_mhz()
        for i in rng.permutation(len(pairs)):
            d, vi = pairs[i]
            v, dt = VARIANTS[vi], DTYPES[d]
            if v.mode == "timer":
                row = _nan_row()
                row["ns"] = timers[dt].sample(fns[dt], loops)
                row["launch_ns"] = float(np.median(timers[dt].launch_ns[-loops:]))
            elif v.mode == "loop":
                row = methods.loop(v, fns[dt], loops)
            else:
                row = methods.per_call(v, graphs[dt] if v.mode == "graph" else fns[dt], loops)
            if r >= 0:
                data[d, vi, r] = [row[f] for f in FIELDS]
    reports = [t.report() for t in timers.values()]
    keys = ("spin_ns", "late_samples_retaken", "late_samples_kept")
    timer_spin = [[rep.get(key, 0) for key in keys] for rep in reports]
    calib = [methods.cold, methods.warm, methods.cold_mhz, methods.warm_mhz, shared.cycles_per_ns]
    np.savez(out, data=data, mhz=mhz, calib=np.array(calib), timer_spin=np.array(timer_spin))


# ---------------------------------------------------------------- the parent: processes and table


def _log_sd(x: np.ndarray) -> float:
    return float(np.std(np.log(x), ddof=1))


def summarize(data: np.ndarray, loops: int) -> list[str]:
    """One line per variant and dtype over processes: data (process, dtype, variant, round, f)."""
    f = {name: i for i, name in enumerate(FIELDS)}
    lines = [
        "| variant | dtype | median us/call | within-process log sd (median, max) | process "
        "medians min-max us | max/min | host launch us/call | spin us | flush us | late calls "
        "| min slack us |",
        "|" + "---|" * 11,
    ]
    for vi, v in enumerate(VARIANTS):
        for d, dt in enumerate(DTYPES):
            x = data[:, d, vi, :, :]
            ns = x[..., f["ns"]]
            med = np.median(ns, axis=1)
            sds = [_log_sd(row) for row in ns]
            late = np.nansum(x[..., f["late_calls"]])
            calls = ns.size * (1 if v.mode == "loop" else loops)

            def us(name: str, x: np.ndarray = x) -> str:
                vals = x[..., f[name]]
                return "-" if np.isnan(vals).all() else f"{np.nanmedian(vals) / 1e3:.1f}"

            slack = x[..., f["min_slack_ns"]]
            min_slack = "-" if np.isnan(slack).all() else f"{np.nanmin(slack) / 1e3:.1f}"
            late_s = "-" if np.isnan(x[..., f["late_calls"]]).all() else f"{late:.0f}/{calls}"
            lines.append(
                f"| {v.name} | {dt} | {np.median(med) / 1e3:.2f} | {np.median(sds):.3f}, "
                f"{max(sds):.3f} | {med.min() / 1e3:.2f}-{med.max() / 1e3:.2f} | "
                f"{med.max() / med.min():.3f} | {us('launch_ns')} | {us('spin_ns')} | "
                f"{us('flush_ns')} | {late_s} | {min_slack} |"
            )
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--worker", help=argparse.SUPPRESS)
    p.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--out", type=Path, help="folder for launch-noise.npz (required)")
    p.add_argument("--processes", type=int, default=8, help="fresh worker processes (8)")
    p.add_argument("--rounds", type=int, default=40, help="samples per variant and process (40)")
    p.add_argument("--loops", type=int, default=8, help="calls a sample (8, as the corpus)")
    args = p.parse_args(argv)
    if args.worker:
        worker(args.worker, args.seed, args.rounds, args.loops)
        return 0
    if args.out is None:
        raise SystemExit("--out is required: the folder to write launch-noise.npz into")
    args.out.mkdir(parents=True, exist_ok=True)
    datas, mhz, calib, timer_spin = [], [], [], []
    started = time.monotonic()
    for proc in range(args.processes):
        path = args.out / f"launch-noise-{proc}.npz"
        subprocess.run(
            [sys.executable, "-m", "experiments.gpu_launch_noise", "--worker", str(path)]
            + ["--seed", str(proc), "--rounds", str(args.rounds), "--loops", str(args.loops)],
            check=True,
            env=dict(os.environ, OMP_NUM_THREADS="1"),
        )
        with np.load(path) as z:
            datas.append(z["data"])
            mhz.append(z["mhz"])
            calib.append(z["calib"])
            timer_spin.append(z["timer_spin"])
        path.unlink()
    data = np.stack(datas)
    np.savez_compressed(
        args.out / "launch-noise.npz",
        data=data,
        mhz=np.stack(mhz),
        calib=np.stack(calib),
        timer_spin=np.stack(timer_spin),
        meta=json.dumps(
            {"variants": [v.__dict__ for v in VARIANTS], "dtypes": DTYPES, "fields": FIELDS}
        ),
    )
    print(
        f"{args.processes} processes x {args.rounds} rounds x {args.loops} calls a sample, "
        f"{time.monotonic() - started:.0f} s; load average {os.getloadavg()[0]:.2f}"
    )
    for proc, c in enumerate(calib):
        print(
            f"process {proc}: spin cycles/ns cold {c[0]:.3f} (SM {c[2]:.0f} MHz), warm "
            f"{c[1]:.3f} (SM {c[3]:.0f} MHz), CudaTimer's {c[4]:.3f}; SM MHz over rounds "
            f"{np.nanmin(mhz[proc]):.0f}-{np.nanmax(mhz[proc]):.0f}; CudaTimer at end (spin, "
            "samples retaken, late kept) "
            + ", ".join(f"{s / 1e3:.0f} us {r} {k}" for s, r, k in timer_spin[proc])
        )
    print("\n".join(summarize(data, args.loops)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
