"""What a worker process and a sample cost in the real harness: `rnx bench` timed side by side.

Run `python -m benchmarks.sampling_cost` (about 3 minutes on 2 busy cores). Each variant
(processes x samples per configuration) is a fresh `rnx bench` of one workload (`--device`:
cpu, cuda), as in CI: the wall time includes the interpreter, the fork server's torch import
(on a GPU, each spawned worker's), the builds, each process's warm-up, the timing rounds and
the exit. The variants alternate, `--repeat`
times, so load on the machine hits them alike; then a least-squares fit
    wall = fixed + per_process x processes + per_sample x samples x configurations
gives the costs benchmarks/time_to_decision.py models a run's wall time with (`--process-s`,
`--sample-s`). The harness's own split of each run (its `done in ...` line) is printed too.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
VARIANTS = ((3, 30), (3, 15), (3, 9), (5, 15), (6, 30), (2, 20), (9, 27))


def bench_once(workload: Path, processes: int, samples: int, selection: list[str]) -> tuple:
    """(wall seconds, the harness's `done in` line) of one fresh `rnx bench`."""
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "rnx_cli", "bench", str(workload), *selection]
        cmd += ["--processes", str(processes), "--samples", str(samples)]
        cmd += ["--out", str(Path(tmp) / "results.json")]
        # Each run its own empty inductor cache, so no run reuses another's work.
        env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(Path(tmp) / "inductor")}
        started = time.monotonic()
        done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
        wall = time.monotonic() - started
    if done.returncode != 0:
        raise SystemExit(f"rnx bench failed ({done.returncode}):\n{done.stderr[-2000:]}")
    split = re.search(r"done in [^\n]*", done.stderr)
    return wall, split.group(0) if split else "-"


def fit(rows: list[tuple[int, int, float]], configurations: int) -> np.ndarray:
    """[fixed, per process, per sample and configuration] seconds, least squares."""
    x = np.array([[1.0, p, s * configurations] for p, s, _ in rows])
    y = np.array([w for _, _, w in rows])
    coef, *_ = np.linalg.lstsq(x, y, rcond=None)
    return coef


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.sampling_cost", description=__doc__)
    p.add_argument("--workload", type=Path, default=ROOT / "examples" / "softmax.py")
    p.add_argument("--runtimes", default="pytorch_eager")
    p.add_argument("--dtypes", default="float32,float64,bfloat16,float16")
    p.add_argument("--batch-sizes", default="1,2,4,8,16,32")
    p.add_argument("--device", default="cpu")
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args(argv)
    selection = ["--runtimes", args.runtimes, "--dtypes", args.dtypes]
    selection += ["--batch-sizes", args.batch_sizes, "--device", args.device]
    configurations = (
        len(args.runtimes.split(","))
        * len(args.dtypes.split(","))
        * len(args.batch_sizes.split(","))
    )
    print(
        f"rnx bench {args.workload.relative_to(ROOT)} {' '.join(selection)}: {configurations} "
        f"configurations, {args.repeat} repeats, load average {os.getloadavg()[0]:.2f}"
    )
    rows: list[tuple[int, int, float]] = []
    for rep in range(args.repeat):
        for processes, samples in VARIANTS:
            wall, split = bench_once(args.workload, processes, samples, selection)
            rows.append((processes, samples, wall))
            print(
                f"repeat {rep + 1}: {processes} x {samples // processes} ({samples} samples) "
                f"{wall:.2f}s: {split}",
                flush=True,
            )
    fixed, per_process, per_sample = fit(rows, configurations)
    residual = np.std(
        [w - (fixed + per_process * p_ + per_sample * s * configurations) for p_, s, w in rows]
    )
    print(
        f"\nfit over {len(rows)} runs: wall = {fixed:.2f}s + {per_process:.3f}s x processes + "
        f"{1000 * per_sample:.3f}ms x samples x configurations (residual sd {residual:.2f}s); "
        f"load average {os.getloadavg()[0]:.2f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
