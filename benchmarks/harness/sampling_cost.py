"""What a worker process and a sample cost in the real harness: `rnx bench` timed side by side.

Run `python -m benchmarks.harness.sampling_cost` (about 3 minutes on 2 busy cores). Each variant
(processes x samples per configuration) is a fresh `rnx bench` of one workload (`--device`:
cpu, cuda), as in CI: the wall time includes the interpreter, the fork server's torch import
(on a GPU, each spawned worker's), the builds, each process's warm-up, the timing rounds and
the exit. The variants alternate, `--repeat`
times, so load on the machine hits them alike; then a least-squares fit
    wall = fixed + per_process x processes + per_sample x samples x configurations
and, less noisy, the harness's own split of each run (its `done in ...` line: the timing
phase against the samples, the phases each process repeats against the processes) give the
costs benchmarks/quality/time_to_decision.py models a run's wall time with.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
VARIANTS = ((3, 30), (3, 15), (3, 9), (5, 15), (6, 30), (2, 20), (9, 27))


# The harness's own phases (its `done in` line) that each worker process repeats.
PER_PROCESS_PHASES = ("building and checking", "building later", "warm-up", "closing workers")


@dataclass(frozen=True)
class Run:
    processes: int
    samples: int  # per configuration
    wall: float
    phases: dict[str, float]  # the harness's split, seconds
    split: str  # its `done in` line


def bench_once(workload: Path, processes: int, samples: int, selection: list[str]) -> Run:
    """One fresh `rnx bench`."""
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
    found = re.search(r"done in [^\n]*", done.stderr)
    split = found.group(0) if found else "-"
    phases = {k: float(v) for k, v in re.findall(r"([a-z][a-z -]*?) ([\d.]+)s", split)}
    return Run(processes, samples, wall, phases, split)


def fit(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """Least squares: the coefficients, their standard errors and the residuals' standard
    deviation (the machine's noise)."""
    coef, *_ = np.linalg.lstsq(x, y, rcond=None)
    dof = max(len(y) - x.shape[1], 1)
    sigma2 = float(np.sum((y - x @ coef) ** 2)) / dof
    se = np.sqrt(np.diag(sigma2 * np.linalg.inv(x.T @ x)))
    return coef, se, sigma2**0.5


def _pm(value: float, se: float, scale: float = 1.0, unit: str = "s") -> str:
    return f"{scale * value:.3f}{unit} (+-{scale * se:.3f})"


def costs(runs: list[Run], configurations: int) -> str:
    """The fits, and the costs time_to_decision.py's model takes from them."""
    ones = np.ones(len(runs))
    procs = np.array([r.processes for r in runs], dtype=float)
    work = np.array([r.samples * configurations for r in runs], dtype=float)
    wall = np.array([r.wall for r in runs])
    c, se, sd = fit(np.column_stack([ones, procs, work]), wall)
    lines = [
        f"wall = {_pm(c[0], se[0])} + {_pm(c[1], se[1])} x processes + "
        f"{_pm(c[2], se[2], 1000, 'ms')} x samples x configurations (residual sd {sd:.2f}s)"
    ]
    timing = np.array([r.phases.get("timing", np.nan) for r in runs])
    t, t_se, t_sd = fit(np.column_stack([ones, work]), timing)
    lines.append(
        f"harness's timing phase = {_pm(t[0], t_se[0])} + {_pm(t[1], t_se[1], 1000, 'ms')} x "
        f"samples x configurations (residual sd {t_sd:.2f}s)"
    )
    repeated = np.array([sum(r.phases.get(k, np.nan) for k in PER_PROCESS_PHASES) for r in runs])
    b, b_se, b_sd = fit(np.column_stack([ones, procs]), repeated)
    lines.append(
        f"harness's per-process phases ({', '.join(PER_PROCESS_PHASES)}) = {_pm(b[0], b_se[0])} "
        f"+ {_pm(b[1], b_se[1])} x processes (residual sd {b_sd:.2f}s)"
    )
    fixed = float(np.mean(wall - b[1] * procs - t[1] * work))
    lines.append(
        f"model (time_to_decision.py): --fixed-s {fixed:.2f} --process-s {b[1]:.3f} "
        f"--sample-s {t[1]:.5f} (the phases' slopes; fixed: the mean wall time the slopes "
        "leave unexplained)"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.harness.sampling_cost", description=__doc__
    )
    p.add_argument("--workload", type=Path, default=ROOT / "examples" / "softmax.py")
    p.add_argument("--runtimes", default="pytorch_eager")
    p.add_argument("--dtypes", default="float32,float64,bfloat16,float16")
    p.add_argument("--batch-sizes", default="1,2,3,4,6,8,12,16,24,32,48,64")
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
    runs: list[Run] = []
    for rep in range(args.repeat):
        for processes, samples in VARIANTS:
            run = bench_once(args.workload, processes, samples, selection)
            runs.append(run)
            print(
                f"repeat {rep + 1}: {processes} x {samples // processes} ({samples} samples) "
                f"{run.wall:.2f}s: {run.split}",
                flush=True,
            )
    means = []
    for pr, sa in VARIANTS:
        walls = [r.wall for r in runs if (r.processes, r.samples) == (pr, sa)]
        means.append(f"{pr} x {sa // pr} {np.mean(walls):.2f}s")
    print("\nmean wall per variant, side by side: " + "; ".join(means))
    print(f"fits over {len(runs)} runs (+- one standard error):")
    print(costs(runs, configurations))
    print(f"load average {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
