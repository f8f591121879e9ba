"""Record the cross-load corpus: whole runs on a quiet CPU and whole runs on a busy one.

Run `python -m benchmarks.quality.cross_load_corpus` (about 10 minutes; writes
benchmarks/data/corpus-crossload.npz). A run is what one CI job gives: --processes worker
processes of benchmarks/quality/verdict_quality.py, one after the other, all under the same
condition. `--shards N` records with N recorders side by side, recorder i on CPU i with its own
hog, and joins their runs into one file (benchmarks/data/corpus-crossload-9proc.npz: `--runs 16
--processes 9 --shards 8` on the lent machine's 16 cores, under 5 minutes).
Runs alternate between two conditions, so a slow drift in the rest of the machine's load falls
on both alike:

- quiet: the worker pinned to CPU 0 (--cpu), nothing of ours beside it;
- busy: the same, with a CPU and memory hog (matrix products and large copies) pinned to the same
  CPU for the whole run, as when another job shares a runner's core.

"Quiet" is relative: this machine is shared, so the 1-minute load average is recorded with every
process. benchmarks/quality/verdict_quality.py then compares baselines recorded quiet with a head
recorded busy, and the reverse.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from benchmarks.quality.verdict_quality import KERNELS, LEVELS, ROUNDS

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_OUT = ROOT / "benchmarks" / "data" / "corpus-crossload.npz"
HOG = (
    "import numpy as np\n"
    "a = np.random.rand(600, 600); big = np.random.rand(1_000_000)\n"
    "while True:\n"
    "    a @ a\n"
    "    big.copy()\n"
)


def _pinned(cmd: list[str], cpu: int) -> list[str]:
    return (["taskset", "-c", str(cpu)] if shutil.which("taskset") else []) + cmd


def record(out: Path, *, runs: int, processes: int, cpu: int = 0, first_run: int = 0) -> None:
    """runs per condition, on CPU `cpu`; runs are numbered from first_run (a shard's)."""
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    tmp = ROOT / "artifacts" / "cross-load"
    tmp.mkdir(parents=True, exist_ok=True)
    datas, calibs, reps, busy, run_of, loads = [], [], [], [], [], []
    started = time.monotonic()
    for run in range(first_run, first_run + 2 * runs):
        is_busy = run % 2 == 1
        hog = (
            subprocess.Popen(_pinned([sys.executable, "-c", HOG], cpu), env=env)
            if is_busy
            else None
        )
        try:
            for p in range(processes):
                path = tmp / f"job{run}-{p}.npz"
                loads.append(os.getloadavg()[0])
                subprocess.run(
                    _pinned(
                        [sys.executable, "-m", "benchmarks.quality.verdict_quality", "--worker"],
                        cpu,
                    )
                    + [str(path), "--seed", str(1000 * run + p)],
                    check=True,
                    env=env,
                )
                with np.load(path) as z:
                    datas.append(z["data"])
                    calibs.append(z["calib"])
                    reps.append(z["reps"])
                busy.append(is_busy)
                run_of.append(run)
                path.unlink()
        finally:
            if hog is not None:
                hog.kill()
                hog.wait()
        print(
            f"run {run + 1 - first_run}/{2 * runs} on CPU {cpu} "
            f"({'busy' if is_busy else 'quiet'}) done "
            f"({time.monotonic() - started:.0f} s, load {loads[-1]:.1f})",
            flush=True,
        )
    _save(
        out,
        processes,
        data=np.stack(datas),
        calib=np.stack(calibs),
        reps=np.stack(reps),
        hog=np.array(busy),
        run=np.array(run_of),
        load=np.array(loads),
    )


def record_sharded(out: Path, *, runs: int, processes: int, shards: int) -> None:
    """The same corpus from `shards` recorders side by side, each on a CPU of its own with its
    own hog (runs per condition split between them), then joined into one file."""
    per = -(-runs // shards)
    parts, procs = [], []
    for i in range(shards):
        part = out.with_name(f"{out.stem}.part{i}.npz")
        cmd = [sys.executable, "-m", "benchmarks.quality.cross_load_corpus", "--out", str(part)]
        cmd += ["--runs", str(per), "--processes", str(processes), "--cpu", str(i)]
        cmd += ["--first-run", str(2 * per * i)]
        procs.append(subprocess.Popen(cmd))
        parts.append(part)
    if any([p.wait() for p in procs]):  # a list: every shard is waited for
        raise SystemExit("a shard failed: see its output above")
    loaded = [dict(np.load(p)) for p in parts]
    _save(out, processes, **{k: np.concatenate([z[k] for z in loaded]) for k in _ARRAYS})
    for p in parts:
        p.unlink()


_ARRAYS = ("data", "calib", "reps", "hog", "run", "load")


def _save(out: Path, processes: int, **arrays: np.ndarray) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(
        out,
        **arrays,
        meta=json.dumps(
            {
                "kernels": KERNELS,
                "levels": LEVELS,
                "rounds": ROUNDS,
                "processes_per_run": processes,
                "conditions": "hog = the run was busy: a CPU and memory hog pinned to the "
                "worker's CPU for the whole run; otherwise quiet (worker pinned, nothing beside)",
            }
        ),
    )
    print(f"corpus saved to {out} ({out.stat().st_size / 1e6:.1f} MB)")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=DEFAULT_OUT, help="where to save the corpus")
    p.add_argument("--runs", type=int, default=16, help="runs per condition (16)")
    p.add_argument("--processes", type=int, default=3, help="worker processes per run (3)")
    p.add_argument("--shards", type=int, default=1, help="recorders side by side, one CPU each (1)")
    p.add_argument("--cpu", type=int, default=0, help="the CPU one recorder uses (0)")
    p.add_argument("--first-run", type=int, default=0, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.runs < 1 or args.processes < 1 or args.shards < 1:
        raise SystemExit("--runs, --processes and --shards must be at least 1")
    if args.shards > 1:
        record_sharded(args.out, runs=args.runs, processes=args.processes, shards=args.shards)
    else:
        record(
            args.out,
            runs=args.runs,
            processes=args.processes,
            cpu=args.cpu,
            first_run=args.first_run,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
