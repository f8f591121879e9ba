"""Record a GPU timing corpus for benchmarks/quality/verdict_quality.py: runs of separate processes.

Run on a GPU machine from the repository root: `python3 -m benchmarks.gpu.gpu_corpus --out DIR
--processes 6 --budget-s 470` (writes DIR/corpus-gpu.npz; about 14 s a process on an H200, so 5
runs of 6 in 425 s: --budget-s bounds it). On a machine
without a GPU, `python3 -m benchmarks.gpu.gpu_corpus --device cpu --tiny --out DIR` records a small
CPU corpus of the same shape, to check the script.

A "run" is what one CI job gives: --processes separate worker processes, one after the other,
under whatever conditions that job had. The corpus holds whole runs, and verdict_quality keeps
them whole, so the run-to-run variation of a real runner is in it. Each worker times six kernels
(a launch-bound one of about 10 us and a matrix product of 100 us to 1 ms, each in float32,
float16 and bfloat16) at eight injected slowdown levels: 48 configurations, interleaved round by
round as the harness does. Each round times three variants in random order: the kernel (v0),
the kernel again (v0', an A/A twin) and the kernel plus injected work (v2): a GPU spin kernel
inside the timed region whose length is the level's fraction of the kernel's calibrated time.
The timing is the harness's own CudaTimer (bench_runner/timing.py), called as the harness calls
it: CUDA events on a stream kept busy by a spin while the host launches, the L2 flushed before
each call, and a sample in which the GPU reached a call before the host had launched it taken
again with a longer spin; each kernel's spin and retakes are kept (`timing`, TIMING_KEYS). (The
first corpus used a fixed 50 us spin, shorter than the launch-bound layer's 60-80 us of launching:
see experiments/gpu_launch_noise.py.) This script needs numpy, torch and bench_runner's timing
module, not pydantic, so it runs where the product is not installed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

DTYPES = ("float32", "float16", "bfloat16")
KINDS = ("launch_bound", "matmul")
KERNELS = tuple(f"{kind}/{dtype}" for kind in KINDS for dtype in DTYPES)
# 0.15 is here because the criterion names it; 8 levels keep 48 configurations.
LEVELS = (0.0, 0.03, 0.05, 0.10, 0.15, 0.25, 0.40, 0.50)
ROUNDS = 24
# What the harness's timer reports per kernel and process, kept in the corpus as `timing`.
TIMING_KEYS = ("spin_ns", "late_samples_retaken", "late_samples_kept", "launch_overhead_ns")
LONG_KERNEL_NS = 150_000  # the matrix product grows until it takes at least this long


# ---------------------------------------------------------------- one worker process


class CudaSampler:
    """The harness's own CudaTimer (events, busy stream checked for late calls, L2 flush), with
    work injected inside the events: a spin after the call, launched before the end event."""

    def __init__(self, torch: Any) -> None:
        from bench_runner.telemetry import GpuTelemetry
        from bench_runner.timing import CudaTimer

        self.torch = torch
        # No NVML readings around each sample: they cost host time and the corpus keeps none.
        self.timer = CudaTimer(torch.device("cuda"), GpuTelemetry(reason="not recorded"))
        self.cycles_per_ns = self.timer.cycles_per_ns
        self.min_cycles = 1000
        self.sleep_floor_ns = 0.0  # the added time of the shortest spin, set per kernel
        self.timers: dict[int, Any] = {}

    def use(self, kernel: int) -> None:
        """Each kernel keeps its own spin length and statistics, as each configuration does."""
        if kernel not in self.timers:
            self.timers[kernel] = self.timer.for_configuration()
        self.timer = self.timers[kernel]

    def sample(self, fn: Callable[[], object], loops: int, extra: list[int]) -> int:
        """Total event time in ns of `loops` calls; call i also spins extra[i] cycles (0: none)."""
        sleep, made = self.torch.cuda._sleep, [0]

        def call() -> None:
            fn()
            cycles = extra[made[0] % loops]  # a retaken sample starts over at call 0
            made[0] += 1
            if cycles:
                sleep(cycles)

        return int(round(self.timer.sample(call, loops) * loops))

    def report(self) -> dict[int, dict[str, Any]]:
        return {k: t.report() for k, t in self.timers.items()}

    def injection(self, extra_ns: float, loops: int, phase: float) -> list[int]:
        """Spin cycles per call so that the calls take extra_ns longer on average. Below the
        shortest spin's own cost, only a fraction of the calls spin (evenly spread)."""
        if extra_ns <= 0:
            return [0] * loops
        floor = max(self.sleep_floor_ns, 1.0)
        if extra_ns >= floor:
            cycles = self.min_cycles + int((extra_ns - floor) * self.cycles_per_ns)
            return [cycles] * loops
        share, acc, out = extra_ns / floor, phase, []
        for _ in range(loops):
            acc += share
            out.append(self.min_cycles if acc >= 1.0 else 0)
            acc -= 1.0 if acc >= 1.0 else 0.0
        return out

    def calibrate_floor(self, fn: Callable[[], object]) -> None:
        plain = [self.sample(fn, 1, [0]) for _ in range(15)]
        spun = [self.sample(fn, 1, [self.min_cycles]) for _ in range(15)]
        self.sleep_floor_ns = max(float(np.median(spun) - np.median(plain)), 1.0)


class CpuSampler:
    """perf_counter around `loops` calls; injected work is a busy-wait (the CPU corpora's way)."""

    def __init__(self) -> None:
        self.sleep_floor_ns = 0.0

    def sample(self, fn: Callable[[], object], loops: int, extra: list[int]) -> int:
        clock = time.perf_counter_ns
        t0 = clock()
        for i in range(loops):
            fn()
            if extra[i]:
                end = clock() + extra[i]
                while clock() < end:
                    pass
        return clock() - t0

    def injection(self, extra_ns: float, loops: int, phase: float) -> list[int]:
        return [int(extra_ns)] * loops

    def calibrate_floor(self, fn: Callable[[], object]) -> None:
        return None

    def use(self, kernel: int) -> None:
        return None

    def report(self) -> dict[int, dict[str, Any]]:
        return {}


def _kernels(torch: Any, device: str, tiny: bool) -> dict[str, Callable[[], object]]:
    """Name -> call. The matrix product grows until it takes LONG_KERNEL_NS (GPU only)."""
    fns: dict[str, Callable[[], object]] = {}
    width = 64 if tiny else 256
    for dt in DTYPES:
        dtype = getattr(torch, dt)
        x = torch.randn(8, width, device=device, dtype=dtype)
        w = torch.randn(width, width, device=device, dtype=dtype) / width**0.5
        norm = (width,)

        def small(x: Any = x, w: Any = w, norm: tuple[int] = norm) -> object:
            # three small kernels, as a tiny MLP layer: the GPU waits on the host's launches
            return torch.nn.functional.layer_norm(torch.nn.functional.gelu(x @ w), norm)

        fns[f"launch_bound/{dt}"] = small
        fns[f"matmul/{dt}"] = _long_matmul(torch, device, dtype, tiny)
    return fns


def _long_matmul(torch: Any, device: str, dtype: Any, tiny: bool) -> Callable[[], object]:
    n = 48 if tiny else 1024
    while True:
        a = torch.randn(n, n, device=device, dtype=dtype)
        b = torch.randn(n, n, device=device, dtype=dtype)
        if tiny or device != "cuda" or n >= 16384:
            break
        for _ in range(3):
            a @ b
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(5):
            a @ b
        end.record()
        torch.cuda.synchronize()
        if start.elapsed_time(end) * 1e6 / 5 >= LONG_KERNEL_NS:
            break
        n *= 2
    return lambda: a @ b


def worker(out: str, seed: int, device: str, tiny: bool) -> None:
    import torch

    torch.manual_seed(seed)
    torch.set_num_threads(1)
    rng = np.random.default_rng(seed)
    sampler: CudaSampler | CpuSampler = CudaSampler(torch) if device == "cuda" else CpuSampler()
    fns = _kernels(torch, device, tiny)
    rounds = 6 if tiny else ROUNDS
    n_k, n_l = len(KERNELS), len(LEVELS)
    data = np.zeros((n_k, n_l, rounds, 3), dtype=np.int64)
    calib = np.zeros(n_k, dtype=np.int64)  # ns per call, calibrated
    loops_of = np.zeros(n_k, dtype=np.int64)
    floor = np.zeros(n_k)
    for k, name in enumerate(KERNELS):
        fn = fns[name]
        sampler.use(k)
        for _ in range(20):
            fn()
        once = [sampler.sample(fn, 1, [0]) for _ in range(15)]
        per_call = max(float(np.median(once)), 1.0)
        # Launch-bound calls are averaged over several calls a sample, as the harness does.
        target = 30_000 if tiny else 100_000
        loops_of[k] = max(1, min(20, int(target // per_call)))
        calib[k] = int(
            np.median(
                [sampler.sample(fn, int(loops_of[k]), [0] * int(loops_of[k])) for _ in range(9)]
            )
            / loops_of[k]
        )
        sampler.calibrate_floor(fn)
        floor[k] = sampler.sleep_floor_ns

    blocks = [(k, s) for k in range(n_k) for s in range(n_l)]
    for r in range(rounds):
        for b in rng.permutation(len(blocks)):
            k, s = blocks[b]
            fn, loops = fns[KERNELS[k]], int(loops_of[k])
            sampler.use(k)
            sampler.sleep_floor_ns = floor[k]
            extra = sampler.injection(LEVELS[s] * calib[k], loops, float(rng.random()))
            for v in rng.permutation(3):
                data[k, s, r, v] = sampler.sample(fn, loops, extra if v == 2 else [0] * loops)
    # Per kernel: the spin it ended with, samples retaken (a late call), and late ones kept.
    reports = sampler.report()
    timing = np.array(
        [[reports.get(k, {}).get(key, 0) for key in TIMING_KEYS] for k in range(n_k)],
        dtype=np.int64,
    )
    np.savez(out, data=data, calib=calib, reps=loops_of, floor=floor, timing=timing)


# ---------------------------------------------------------------- the recording: runs of processes


def _describe(device: str) -> dict[str, Any]:
    code = (
        "import json, torch\n"
        "d = {'torch': torch.__version__}\n"
        f"if {device!r} == 'cuda':\n"
        "    d['gpu'] = torch.cuda.get_device_name(0)\n"
        "    d['cuda'] = torch.version.cuda\n"
        "print(json.dumps(d))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    info: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return info


def _summary(
    device: str, calibs: np.ndarray, reps: np.ndarray, realized: np.ndarray, timings: np.ndarray
) -> None:
    """Per kernel: time per call, what each level measured, and the timer's spin and retakes."""
    ns = np.median(calibs, axis=0)
    for k, name in enumerate(KERNELS):
        got = ", ".join(f"{lv:.0%}->{x:+.1%}" for lv, x in zip(LEVELS, realized[k], strict=True))
        print(
            f"  {name}: {ns[k] / 1e3:.1f} us per call, {int(reps[0][k])} calls a sample; "
            f"injected -> measured: {got}"
        )
    if device == "cuda":
        t = timings  # (jobs, kernels, TIMING_KEYS)
        for k, name in enumerate(KERNELS):
            print(
                f"  {name}: spin {np.median(t[:, k, 0]) / 1e3:.0f} us (median; max "
                f"{t[:, k, 0].max() / 1e3:.0f}), launch {np.median(t[:, k, 3]) / 1e3:.0f} us, "
                f"samples retaken for a late call {t[:, k, 1].sum()}, late kept {t[:, k, 2].sum()}"
            )


def record(
    out: Path, *, device: str, tiny: bool, processes: int, max_runs: int, budget_s: float
) -> Path:
    """Whole runs of `processes` workers until max_runs or the time budget; returns the file."""
    tmp = out / "gpu-corpus-parts"
    tmp.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    info = _describe(device)
    datas: list[np.ndarray] = []
    calibs: list[np.ndarray] = []
    reps: list[np.ndarray] = []
    floors: list[np.ndarray] = []
    timings: list[np.ndarray] = []
    run_of: list[int] = []
    loads: list[float] = []
    seconds: list[float] = []
    per_run = 0.0
    for run in range(max_runs):
        elapsed = time.monotonic() - started
        if run >= 2 and elapsed + 1.2 * per_run > budget_s:
            break
        t_run = time.monotonic()
        for p in range(processes):
            job = len(datas)
            path = tmp / f"job{job}.npz"
            loads.append(os.getloadavg()[0])
            t0 = time.monotonic()
            subprocess.run(
                [sys.executable, "-m", "benchmarks.gpu.gpu_corpus", "--worker", str(path)]
                + ["--seed", str(1000 * run + p), "--device", device]
                + (["--tiny"] if tiny else []),
                check=True,
                env=dict(os.environ, OMP_NUM_THREADS="1"),
            )
            seconds.append(time.monotonic() - t0)
            with np.load(path) as z:
                datas.append(z["data"])
                calibs.append(z["calib"])
                reps.append(z["reps"])
                floors.append(z["floor"])
                timings.append(z["timing"])
            run_of.append(run)
            path.unlink()
        per_run = max(per_run, time.monotonic() - t_run)
        print(
            f"run {run + 1}: {processes} processes in {time.monotonic() - t_run:.1f} s "
            f"(total {time.monotonic() - started:.0f} s)",
            flush=True,
        )
    tmp.rmdir()
    data = np.stack(datas)
    per_call = data / np.stack(reps)[:, :, None, None, None]
    # What each level really added: median over jobs and rounds of v2 / v0, per kernel.
    realized = np.median(per_call[..., 2] / per_call[..., 0], axis=(0, 3)) - 1.0
    meta = {
        "kernels": KERNELS,
        "levels": LEVELS,
        "rounds": int(data.shape[3]),
        "processes_per_run": processes,
        "device": device,
        "tiny": tiny,
        "method": "cuda_events+busy_stream+l2_flush+late_check"
        if device == "cuda"
        else "perf_counter",
        "timing_keys": TIMING_KEYS,
        "realized_levels": np.round(realized, 4).tolist(),
        **info,
    }
    path = out / "corpus-gpu.npz"
    np.savez_compressed(
        path,
        data=data,
        calib=np.stack(calibs),
        reps=np.stack(reps),
        floor=np.stack(floors),
        timing=np.stack(timings),
        run=np.array(run_of),
        hog=np.zeros(len(datas), dtype=bool),
        load=np.array(loads),
        seconds=np.array(seconds),
        meta=json.dumps(meta),
    )
    print(
        f"corpus saved to {path} ({path.stat().st_size / 1e6:.2f} MB): {len(datas)} processes "
        f"in {len(set(run_of))} runs, {time.monotonic() - started:.0f} s"
    )
    print(f"device: {json.dumps(info)}")
    _summary(device, np.stack(calibs), np.stack(reps), realized, np.stack(timings))
    return path


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--worker", help=argparse.SUPPRESS)
    p.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--out", type=Path, help="folder to write corpus-gpu.npz into (required)")
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    p.add_argument("--tiny", action="store_true", help="small sizes and few rounds (a check)")
    p.add_argument("--processes", type=int, default=3, help="worker processes per run (3)")
    p.add_argument("--runs", type=int, default=40, help="at most this many runs (40)")
    p.add_argument(
        "--budget-s", type=float, default=360.0, help="start no run that would end past this (360)"
    )
    args = p.parse_args(argv)
    if args.worker:
        worker(args.worker, args.seed, args.device, args.tiny)
        return 0
    if args.out is None:
        raise SystemExit("--out is required: the folder to write corpus-gpu.npz into")
    if args.device == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise SystemExit("no CUDA device here; use --device cpu --tiny to check the script")
    if args.processes < 1 or args.runs < 2:
        raise SystemExit("--processes must be at least 1 and --runs at least 2")
    record(
        args.out,
        device=args.device,
        tiny=args.tiny,
        processes=args.processes,
        max_runs=args.runs,
        budget_s=args.budget_s,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
