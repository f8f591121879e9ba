"""How much a corpus's unchanged kernels vary: within a process, between processes and runs.

Run `python -m benchmarks.quality.corpus_spread benchmarks/data/corpus-gpu.npz [OTHER.npz ...]`.
For each
kernel, from the unchanged variant (v0) of every level and round: the time per call (median), the
log standard deviation of the samples within one process (median and largest over processes),
the processes' medians (lowest, highest, and their ratio), and the runs' medians (their ratio).
A corpus recorded quiet and busy by turns (a `hog` per process) gets, per condition, the
variance of a process's log-median about its run's median with each process's shift over the
configurations taken out, and a configuration's own run-to-run variance beyond it (each run's
common shift taken out, less the processes' part of a run's mean), both averaged over the
configurations; and how each kernel's runs (their median process's band mean, as the verdict
model reads a run) move against the run's common shift when the runner turns busy.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from stats import bootstrap


def spread_lines(path: Path) -> list[str]:
    with np.load(path) as z:
        per_call = z["data"] / z["reps"][:, :, None, None, None]
        meta = json.loads(str(z["meta"]))
        run = z["run"] if "run" in z.files else np.arange(per_call.shape[0])
    v0 = per_call[..., 0].reshape(per_call.shape[0], per_call.shape[1], -1)  # (jobs, kernels, n)
    lines = [
        f"{path.name}: {v0.shape[0]} processes in {len(np.unique(run))} runs, "
        f"method {meta.get('method', '?')}",
        "| kernel | us/call | within-process log sd (median, max) | process medians us "
        "(min-max) | max/min | run medians max/min |",
        "|---|---|---|---|---|---|",
    ]
    for k, name in enumerate(meta["kernels"]):
        x = v0[:, k, :]
        sds = np.std(np.log(x), axis=1, ddof=1)
        med = np.median(x, axis=1)
        runs = [np.median(x[run == r]) for r in np.unique(run)]
        lines.append(
            f"| {name} | {np.median(x) / 1e3:.1f} | {np.median(sds):.3f}, {sds.max():.3f} | "
            f"{med.min() / 1e3:.2f}-{med.max() / 1e3:.2f} | {med.max() / med.min():.3f} | "
            f"{max(runs) / min(runs):.3f} |"
        )
    return lines


def condition_lines(path: Path) -> list[str]:
    """Quiet against busy runs: the processes' spread and the configurations' own run shift."""
    with np.load(path) as z:
        if "hog" not in z.files or "run" not in z.files:
            return []
        per_call = z["data"] / z["reps"][:, :, None, None, None]
        run, busy = z["run"], z["hog"].astype(bool)
        kernels = json.loads(str(z["meta"]))["kernels"]
    logs = np.log(np.median(per_call[..., 0], axis=3)).reshape(per_call.shape[0], -1)
    groups = list(per_call[..., 0].reshape(-1, per_call.shape[3]))
    bands = bootstrap.group_locations(groups, bootstrap.LOW, log=True).reshape(logs.shape)
    runs = [np.flatnonzero(run == r) for r in np.unique(run)]
    lines = []
    levels: dict[bool, np.ndarray] = {}
    for name, cond in (("quiet", False), ("busy", True)):
        mine = [r for r in runs if bool(busy[r].all()) == cond]
        if len(mine) < 2:
            continue
        process_var, locations = [], []
        for r in mine:
            dev = logs[r] - np.median(logs[r], axis=0)  # (processes, configurations)
            dev -= np.median(dev, axis=1, keepdims=True)  # each process's shift out
            process_var.append(dev.var(axis=0, ddof=1).mean())
            locations.append(logs[r].mean(axis=0))
        loc = np.array(locations)
        loc -= np.median(loc, axis=1, keepdims=True)  # each run's common shift out
        own = loc.var(axis=0, ddof=1).mean() - np.mean(process_var) / len(mine[0])
        # Each run's location as the model reads it: its median process's band mean
        # (bootstrap.LOW), each run's common shift out.
        band = np.array([np.median(bands[r], axis=0) for r in mine])
        levels[cond] = (band - np.median(band, axis=1, keepdims=True)).mean(axis=0)
        lines.append(
            f"{name} runs ({len(mine)}): process variance {np.mean(process_var):.2e}, "
            f"a configuration's own run variance beyond it {own:.2e}"
        )
    if len(levels) == 2:
        # What a history of one condition cannot show a head of the other: how each kernel
        # moves against the run's common shift when the runner turns busy.
        moved = (levels[True] - levels[False]).reshape(len(kernels), -1).mean(axis=1)
        lines.append(
            "busy against quiet, each run's common shift out, per kernel: "
            + ", ".join(f"{k} {np.expm1(m):+.1%}" for k, m in zip(kernels, moved, strict=True))
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("corpus", type=Path, nargs="+")
    args = p.parse_args(argv)
    for path in args.corpus:
        print("\n".join(spread_lines(path) + condition_lines(path)) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
