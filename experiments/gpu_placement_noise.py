"""What sets a kernel's process-level offset: its tensors' placement, the flush buffer, the stream?

Run on a GPU machine from the repository root: `python3 -m experiments.gpu_placement_noise
--out DIR --processes 8 --sets 8 --rounds 20 --budget-s 230 [--vary placement|flush|stream]`
(writes DIR/placement-noise.npz; a process takes 9-13 s on an H200, and --budget-s starts no
process that would end past it; on an H200 on 2026-12-01 the offset followed the stream, not
the placement nor the flush buffer: docs/verdict-quality.md). On a machine without a GPU,
`python3 -m experiments.gpu_placement_noise --device cpu --tiny --out DIR` runs the same script
on small CPU tensors, to check it. And
`python3 -m experiments.gpu_placement_noise --corpus benchmarks/data/corpus-gpu.npz` prints what
a recorded corpus already says: each process's offset per kernel, how the kernels' offsets go
together, and how they follow the spin, the launch time and the process's own halves.

The GPU corpus's launch-bound kernels (`layer_norm(gelu(x @ w))`, x 8x256, w 256x256) vary 0.8-1.2%
within a process but their process medians 1.5-2% (benchmarks/quality/corpus_spread.py). The
hypothesis
tested: the offset comes from where the inputs and outputs land in memory, fixed within a
process. Each of --processes fresh worker processes (one after the other) builds, per kernel,
--sets input sets at different places (random-size padding tensors, kept alive, between them;
the matrix product's and gelu's outputs preallocated per set with out=, layer_norm's from the
caching allocator), then times every set of every kernel in random order, round after round,
with the harness's own CudaTimer as benchmarks/gpu/gpu_corpus.py calls it. One timer per kernel is
shared by its sets, so sets differ in placement alone, not in spin. A long matrix product is
the control. Per process it also records the CUDA kernels one call of each set launches (names,
torch.profiler), each kernel's spin and host launch time, and the spin's cycles per ns (the SM
clock) at the start and the end.

Printed per kernel: the within-process log sd of the samples; the spread of process medians
(sd of log medians, max/min) when each process times only set 0 (today's harness) and when its
value is the mean of its sets' log medians (rotation), with the sqrt(sets) prediction; the
spread of set medians within a process (median over processes) against what sampling noise
alone gives; whether the kernel names differ between processes; and how the process values
follow the spin and the clock. Needs numpy, torch and bench_runner's timing module, not pydantic.
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

KERNELS = (
    "launch_bound/float32",
    "launch_bound/float16",
    "launch_bound/bfloat16",
    "matmul/float16",
)
LAUNCH_TARGET_NS = 100_000  # calls per sample: as gpu_corpus, about 100 us of kernel a sample


# ---------------------------------------------------------------- one worker process


def _pad(torch: Any, device: str, rng: np.random.Generator, tiny: bool) -> list[Any]:
    """Random-size allocations that move the next tensors: a few small ones (the small pool's
    2 MiB segments) and one large one (a new segment), all kept alive by the caller."""
    # Up to 2.5 MiB of small blocks: the corpus's small tensors (all three dtypes') share one
    # 2 MiB small-pool segment, so sets must spread over several segments to differ.
    small = [int(rng.integers(1, 1024)) * 512 for _ in range(int(rng.integers(0, 6)))]
    large = int(rng.integers(1, 4 if tiny else 64)) * 2**20 + int(rng.integers(0, 2048)) * 512
    return [torch.empty(n, dtype=torch.uint8, device=device) for n in [*small, large]]


def _launch_bound_set(
    torch: Any, device: str, dtype: Any, width: int
) -> tuple[Callable[[], object], int]:
    x = torch.randn(8, width, device=device, dtype=dtype)
    w = torch.randn(width, width, device=device, dtype=dtype) / width**0.5
    h = torch.empty(8, width, device=device, dtype=dtype)
    g = torch.empty(8, width, device=device, dtype=dtype)
    norm = (width,)
    functional, nn = torch.nn.functional, torch._C._nn

    def call() -> object:
        # the corpus's layer, with its first two outputs in this set's own buffers
        torch.matmul(x, w, out=h)
        nn.gelu(h, out=g)
        return functional.layer_norm(g, norm)

    return call, w.data_ptr()


def _matmul_set(torch: Any, device: str, n: int) -> tuple[Callable[[], object], int]:
    a = torch.randn(n, n, device=device, dtype=torch.float16)
    b = torch.randn(n, n, device=device, dtype=torch.float16)
    c = torch.empty(n, n, device=device, dtype=torch.float16)
    return (lambda: torch.matmul(a, b, out=c)), a.data_ptr()


def build_sets(
    torch: Any, device: str, sets: int, rng: np.random.Generator, tiny: bool
) -> tuple[list[list[Callable[[], object]]], list[Any], np.ndarray]:
    """fns[kernel][set], the padding that must stay alive, and each set's first input's address.
    Sets of all kernels are built in random order, so no kernel's set 0 always lands first."""
    # 4096: about 200 us in float16 on an H200, like the corpus's matrix product (>= 150 us)
    width, n = (64, 64) if tiny else (256, 4096)
    fns: list[list[Callable[[], object] | None]] = [[None] * sets for _ in KERNELS]
    keep: list[Any] = []
    ptrs = np.zeros((len(KERNELS), sets), dtype=np.int64)
    order = [(k, s) for k in range(len(KERNELS)) for s in range(sets)]
    for i in rng.permutation(len(order)):
        k, s = order[i]
        keep.extend(_pad(torch, device, rng, tiny))
        kind, dt = KERNELS[k].split("/")
        if kind == "launch_bound":
            fns[k][s], ptrs[k, s] = _launch_bound_set(torch, device, getattr(torch, dt), width)
        else:
            fns[k][s], ptrs[k, s] = _matmul_set(torch, device, n)
    return [[f for f in row if f is not None] for row in fns], keep, ptrs


def kernel_names(torch: Any, fns: list[list[Callable[[], object]]], device: str) -> list[list[str]]:
    """Per kernel and set: the kernels one call launches, in order (torch.profiler; on the CPU,
    the operators, which checks this code). A profiler that fails costs the names, not the run."""
    from torch.profiler import ProfilerActivity, profile

    cuda = device == "cuda"
    activity, kind = (
        (ProfilerActivity.CUDA, torch.autograd.DeviceType.CUDA)
        if cuda
        else (ProfilerActivity.CPU, torch.autograd.DeviceType.CPU)
    )
    names: list[list[str]] = []
    for row in fns:
        per_set = []
        for fn in row:
            try:
                if cuda:
                    torch.cuda.synchronize()
                with profile(activities=[activity]) as prof:
                    fn()
                    if cuda:
                        torch.cuda.synchronize()
                launched = [e.name for e in prof.events() if e.device_type == kind]
                per_set.append(" | ".join(launched))
            except Exception as exc:  # noqa: BLE001 - the names are a side reading
                per_set.append(f"profiler failed: {type(exc).__name__}: {exc}"[:200])
        names.append(per_set)
    return names


def process_wide_sets(
    torch: Any, vary: str, fns: list[list[Callable[[], object]]], rng: np.random.Generator
) -> tuple[list[list[Callable[[], object]]], list[Any], list[Any]]:
    """For --vary flush or stream: every set of a kernel calls set 0's inputs, and differs in
    the timer's L2 flush buffer (its own allocation, padding between) or in the CUDA stream it
    runs on. Returns the kernels' sets, the flush buffers (or []) and the streams (or [])."""
    sets = len(fns[0])
    shared = [[row[0]] * sets for row in fns]
    if vary == "stream":
        return shared, [], [torch.cuda.Stream() for _ in range(sets)]
    props = torch.cuda.get_device_properties(0)
    l2 = int(getattr(props, "L2_cache_size", 0) or 64 * 2**20)
    words = 2 * l2 // 4  # as CudaTimer's: twice the L2, int32
    # each buffer with the padding before it, kept alive together
    flushes = [
        (_pad(torch, "cuda", rng, False), torch.empty(words, dtype=torch.int32, device="cuda"))
        for _ in range(sets)
    ]
    return shared, flushes, []


def worker(out: str, seed: int, device: str, tiny: bool, sets: int, rounds: int, vary: str) -> None:
    import contextlib

    import torch

    torch.manual_seed(seed)
    torch.set_num_threads(1)
    rng = np.random.default_rng(seed)
    fns, keep, ptrs = build_sets(torch, device, sets, rng, tiny)
    flushes: list[Any] = []
    streams: list[Any] = []
    if vary != "placement":
        fns, flushes, streams = process_wide_sets(torch, vary, fns, rng)
        # the addresses the summary groups sets by: the flush buffers', or the one input set's
        ptrs[:] = [b.data_ptr() for _, b in flushes] if flushes else ptrs[:, :1]

    def on_set(s: int) -> Any:
        """Where set s runs: its own stream (--vary stream), its own flush buffer (flush)."""
        if flushes:
            for t in timers:
                t.flush_buffer = flushes[s][1]
        return torch.cuda.stream(streams[s]) if streams else contextlib.nullcontext()

    n_k = len(KERNELS)
    timers: list[Any] = []
    clock = np.zeros(2)  # spin cycles per ns (the SM clock, GHz) at start and end
    if device == "cuda":
        from bench_runner.telemetry import GpuTelemetry
        from bench_runner.timing import CudaTimer

        base = CudaTimer(torch.device("cuda"), GpuTelemetry(reason="not recorded"))
        clock[0] = base.cycles_per_ns
        timers = [base.for_configuration() for _ in KERNELS]
    else:
        from bench_runner.timing import CpuTimer

        timers = [CpuTimer() for _ in KERNELS]
    loops = np.ones(n_k, dtype=np.int64)
    for k in range(n_k):
        for fn in fns[k]:
            for _ in range(5):
                fn()
        # The spin settles (it only grows) before the measured rounds: 15 samples over the sets.
        once = [timers[k].sample(fns[k][i % sets], 1) for i in range(15)]
        per_call = max(float(np.median(once)), 1.0)
        target = 30_000 if tiny else LAUNCH_TARGET_NS
        loops[k] = max(1, min(20, int(target // per_call)))
        for i in range(2 * sets):
            with on_set(i % sets):
                timers[k].sample(fns[k][i % sets], int(loops[k]))
    spin_before = np.array([getattr(t, "spin_ns", 0.0) for t in timers])
    data = np.zeros((n_k, sets, rounds))  # ns per call
    pairs = [(k, s) for k in range(n_k) for s in range(sets)]
    for r in range(rounds):
        for i in rng.permutation(len(pairs)):
            k, s = pairs[i]
            with on_set(s):
                data[k, s, r] = timers[k].sample(fns[k][s], int(loops[k]))
    reports = [t.report() if hasattr(t, "report") else {} for t in timers]
    timing = np.array(
        [
            [
                spin_before[k],
                r.get("spin_ns", 0),
                r.get("launch_overhead_ns", 0),
                r.get("late_samples_retaken", 0),
                r.get("late_samples_kept", 0),
            ]
            for k, r in enumerate(reports)
        ],
        dtype=np.float64,
    )
    if device == "cuda":
        clock[1] = base._calibrate_spin()
    names = kernel_names(torch, fns, device)
    del keep
    np.savez(
        out,
        data=data,
        loops=loops,
        timing=timing,
        clock=clock,
        ptrs=ptrs,
        names=json.dumps(names),
    )


# ---------------------------------------------------------------- the parent: processes, summary


def _sd(x: np.ndarray) -> float:
    return float(np.std(x, ddof=1)) if x.size > 1 else 0.0


def summary_lines(
    data: np.ndarray,
    timing: np.ndarray,
    clock: np.ndarray,
    ptrs: np.ndarray,
    names: list[list[list[str]]],
) -> list[str]:
    """data (processes, kernels, sets, rounds) in ns per call; everything on the log scale."""
    n_p, _, n_s, n_r = data.shape
    logs = np.log(data)
    set_med = np.median(logs, axis=3)  # (p, k, s)
    lines = [
        f"{n_p} processes x {n_s} sets x {n_r} rounds; log sd in % (x100)",
        "| kernel | us/call | within-process sd | set 0 only: process sd, max/min | "
        "rotation over sets: process sd, max/min | sd/sqrt(sets) | set medians within a process: "
        "sd, max/min | sampling noise of a set median |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for k, name in enumerate(KERNELS):
        within = np.median(np.std(logs[:, k], axis=2, ddof=1))
        today = set_med[:, k, 0]
        rotation = set_med[:, k].mean(axis=1)
        sets_sd = np.median(np.std(set_med[:, k], axis=1, ddof=1))
        sets_ratio = np.median(np.exp(set_med[:, k].max(axis=1) - set_med[:, k].min(axis=1)))
        # The median of n samples wanders about 1.25 sd / sqrt(n) (normal samples).
        noise = 1.2533 * within / np.sqrt(n_r)
        lines.append(
            f"| {name} | {np.exp(np.median(logs[:, k])) / 1e3:.1f} | {100 * within:.2f} | "
            f"{100 * _sd(today):.2f}, {np.exp(np.ptp(today)):.3f} | "
            f"{100 * _sd(rotation):.2f}, {np.exp(np.ptp(rotation)):.3f} | "
            f"{100 * _sd(today) / np.sqrt(n_s):.2f} | {100 * sets_sd:.2f}, {sets_ratio:.3f} | "
            f"{100 * noise:.2f} |"
        )
    lines.append("")
    lines.append(
        "per process: rotation value vs all processes (%), spin us before/after the rounds, "
        "launch us; SM clock GHz start/end"
    )
    for p in range(n_p):
        rot = set_med[p].mean(axis=1) - np.median(set_med.mean(axis=2), axis=0)
        cells = ", ".join(
            f"{name.replace('launch_bound/', 'lb/')} {100 * rot[k]:+.2f}% "
            f"(spin {timing[p, k, 0] / 1e3:.0f}/{timing[p, k, 1] / 1e3:.0f}, "
            f"launch {timing[p, k, 2] / 1e3:.0f})"
            for k, name in enumerate(KERNELS)
        )
        lines.append(f"  p{p}: {cells}; clock {clock[p, 0]:.3f}/{clock[p, 1]:.3f}")
        # Two states would show as two groups here; the 2 MiB segment says which sets share one.
        seg = ptrs[p, 1] >> 21
        sets = ", ".join(
            f"{100 * (m - np.median(set_med[p, 1])):+.1f}@{g - seg.min()}"
            for m, g in zip(set_med[p, 1], seg, strict=True)
        )
        lines.append(f"      lb/float16 sets (% vs the process's median @ 2 MiB segment): {sets}")
    lines.append("")
    for k, name in enumerate(KERNELS):
        rotation = set_med[:, k].mean(axis=1)
        corr = []
        for label, x in (("spin", timing[:, k, 1]), ("launch", timing[:, k, 2])):
            if _sd(x) > 0 and _sd(rotation) > 0:
                corr.append(f"{label} r={np.corrcoef(x, rotation)[0, 1]:+.2f}")
        if _sd(clock[:, 0]) > 0 and _sd(rotation) > 0:
            corr.append(f"clock r={np.corrcoef(clock[:, 0], rotation)[0, 1]:+.2f}")
        # The same sets in the same order in every process: only placement differs between sets.
        distinct = sorted({n for per_p in names for n in per_p[k]})
        per_process = [len(set(per_p[k])) for per_p in names]
        lines.append(
            f"{name}: correlation of process value with {', '.join(corr) or '-'}; "
            f"{len(distinct)} distinct kernel sequence(s) over all processes and sets "
            f"(at most {max(per_process)} within one process)"
        )
        for seq in distinct:
            used = sum(seq in per_p[k] for per_p in names)
            lines.append(f"    in {used}/{n_p} processes: {seq[:300]}")
    return lines


def corpus_offset_lines(path: Path) -> list[str]:
    """What a recorded GPU corpus (benchmarks/gpu/gpu_corpus.py) already says about the process
    offsets: each process's median of the plain kernel (v0, all levels and rounds) against the
    median process, per kernel; how the kernels' offsets go together over processes; and how
    they follow the timer's spin and the host's launch time, and the process's own halves."""
    with np.load(path) as z:
        per_call = z["data"] / z["reps"][:, :, None, None, None]
        timing, run_of = z["timing"], z["run"]
        kernels = json.loads(str(z["meta"]))["kernels"]
        keys = json.loads(str(z["meta"]))["timing_keys"]
    logs = np.log(per_call[..., 0])  # (processes, kernels, levels, rounds)
    n_p, n_k, _, n_r = logs.shape
    med = np.median(logs.reshape(n_p, n_k, -1), axis=2)
    off = med - np.median(med, axis=0)
    short = [k.replace("launch_bound/", "lb/").replace("matmul/", "mm/") for k in kernels]
    lines = [
        f"{path.name}: {n_p} processes; process offset = log median vs the median process, in %",
        "| process (run.index) | " + " | ".join(short) + " | spin us (lb) | launch us (lb) |",
        "|---" * (n_k + 3) + "|",
    ]
    spin, launch = keys.index("spin_ns"), keys.index("launch_overhead_ns")
    for p in range(n_p):
        lines.append(
            f"| {run_of[p]}.{p - int(np.argmax(run_of == run_of[p]))} | "
            + " | ".join(f"{100 * x:+.2f}" for x in off[p])
            + f" | {'/'.join(f'{t / 1e3:.0f}' for t in timing[p, :3, spin])}"
            + f" | {'/'.join(f'{t / 1e3:.0f}' for t in timing[p, :3, launch])} |"
        )
    corr = np.corrcoef(off.T)
    lines.append("correlation of the process offsets between kernels:")
    for k in range(n_k):
        lines.append(f"  {short[k]:>12}: " + " ".join(f"{c:+.2f}" for c in corr[k]))
    half = n_r // 2
    for k in range(n_k):
        first = np.median(logs[:, k, :, :half].reshape(n_p, -1), axis=1)
        second = np.median(logs[:, k, :, half:].reshape(n_p, -1), axis=1)
        r_spin = np.corrcoef(timing[:, k, spin], off[:, k])[0, 1]
        r_launch = np.corrcoef(timing[:, k, launch], off[:, k])[0, 1]
        lines.append(
            f"{short[k]}: offset vs spin r={r_spin:+.2f}, vs launch r={r_launch:+.2f}; "
            f"first vs second half of the rounds r={np.corrcoef(first, second)[0, 1]:+.2f}"
        )
    # Two states or a continuum? Split the launch-bound kernels' mean offset at the widest gap.
    launch_bound = [k for k, name in enumerate(kernels) if name.startswith("launch_bound/")]
    mean = off[:, launch_bound].mean(axis=1)
    ordered = np.sort(mean)
    cut = ordered[int(np.argmax(np.diff(ordered)))]
    slow, fast = mean[mean > cut], mean[mean <= cut]
    if slow.size > 1 and fast.size > 1:
        lines.append(
            f"launch-bound mean offset: sd {100 * _sd(mean):.2f}%; widest gap splits it into "
            f"{fast.size} processes at {100 * fast.mean():+.2f}% (sd {100 * _sd(fast):.2f}%) and "
            f"{slow.size} at {100 * slow.mean():+.2f}% (sd {100 * _sd(slow):.2f}%)"
        )
    return lines


def run(
    out: Path,
    *,
    device: str,
    tiny: bool,
    processes: int,
    sets: int,
    rounds: int,
    budget_s: float,
    vary: str,
) -> None:
    out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    datas, timings, clocks, ptrs, names = [], [], [], [], []
    longest = 0.0
    for p in range(processes):
        if p >= 3 and time.monotonic() - started + 1.2 * longest > budget_s:
            print(
                f"stopping after {p} processes: the next would end past --budget-s {budget_s:.0f}"
            )
            break
        path = out / f"placement-job{p}.npz"
        t0 = time.monotonic()
        subprocess.run(
            [sys.executable, "-m", "experiments.gpu_placement_noise", "--worker", str(path)]
            + ["--seed", str(7919 * (p + 1)), "--device", device]
            + ["--sets", str(sets), "--rounds", str(rounds), "--vary", vary]
            + (["--tiny"] if tiny else []),
            check=True,
            env=dict(os.environ, OMP_NUM_THREADS="1"),
        )
        with np.load(path) as z:
            datas.append(z["data"])
            timings.append(z["timing"])
            clocks.append(z["clock"])
            ptrs.append(z["ptrs"])
            names.append(json.loads(str(z["names"])))
        path.unlink()
        longest = max(longest, time.monotonic() - t0)
        print(f"process {p + 1}/{processes}: {time.monotonic() - t0:.1f} s", flush=True)
    data, timing, clock = np.stack(datas), np.stack(timings), np.stack(clocks)
    np.savez_compressed(
        out / "placement-noise.npz",
        data=data,
        timing=timing,
        clock=clock,
        ptrs=np.stack(ptrs),
        names=json.dumps(names),
        meta=json.dumps({"kernels": KERNELS, "device": device, "tiny": tiny, "vary": vary}),
    )
    print(f"{len(datas)} processes in {time.monotonic() - started:.0f} s; sets vary in {vary}")
    print("\n".join(summary_lines(data, timing, clock, np.stack(ptrs), names)))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--worker", help=argparse.SUPPRESS)
    p.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--out", type=Path, help="folder to write placement-noise.npz into (required)")
    p.add_argument(
        "--corpus", type=Path, help="only print the process offsets of a recorded GPU corpus"
    )
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    p.add_argument("--tiny", action="store_true", help="small sizes (a check of the script)")
    p.add_argument("--processes", type=int, default=8, help="fresh worker processes (8)")
    p.add_argument("--sets", type=int, default=8, help="input sets per kernel (8)")
    p.add_argument("--rounds", type=int, default=20, help="samples of each set (20)")
    p.add_argument(
        "--vary",
        choices=("placement", "flush", "stream"),
        default="placement",
        help="what sets differ in: their inputs' placement (default), the timer's L2 flush "
        "buffer, or the CUDA stream (the last two on one set of inputs, CUDA only)",
    )
    p.add_argument(
        "--budget-s", type=float, default=240.0, help="start no process that would end past this"
    )
    args = p.parse_args(argv)
    if args.worker:
        worker(args.worker, args.seed, args.device, args.tiny, args.sets, args.rounds, args.vary)
        return 0
    if args.corpus:
        print("\n".join(corpus_offset_lines(args.corpus)))
        return 0
    if args.out is None:
        raise SystemExit("--out is required: the folder to write placement-noise.npz into")
    if args.device == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise SystemExit("no CUDA device here; use --device cpu --tiny to check the script")
    if args.vary != "placement" and args.device != "cuda":
        raise SystemExit("--vary flush and stream are CUDA's: use --vary placement on the CPU")
    if args.processes < 2 or args.sets < 2 or args.rounds < 3:
        raise SystemExit("--processes and --sets must be at least 2, --rounds at least 3")
    run(
        args.out,
        device=args.device,
        tiny=args.tiny,
        processes=args.processes,
        sets=args.sets,
        rounds=args.rounds,
        budget_s=args.budget_s,
        vary=args.vary,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
