"""How much a corpus's unchanged kernels vary: within a process, between processes and runs.

Run `python -m benchmarks.quality.corpus_spread benchmarks/data/corpus-gpu.npz [OTHER.npz ...]`.
For each
kernel, from the unchanged variant (v0) of every level and round: the time per call (median), the
log standard deviation of the samples within one process (median and largest over processes),
the processes' medians (lowest, highest, and their ratio), and the runs' medians (their ratio).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np


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


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("corpus", type=Path, nargs="+")
    args = p.parse_args(argv)
    for path in args.corpus:
        print("\n".join(spread_lines(path)) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
