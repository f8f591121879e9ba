"""Does pinning a slot's worker processes to the same CPUs make paired mode's pairs agree?

Runs `rnx bench --base` on two identical copies of a small kernel (so the true ratio is 1),
alternating runs with the harness's CPU pinning on and off (RNX_PIN_CPUS=0), and prints, per
run, each slot's head/base median ratio and the largest |log ratio| over the slots: the offset
between a slot's two processes that per-round ratios cannot cancel.

    .venv/bin/python -m experiments.paired_pinning [--runs 7] [--processes 4] [--samples 40]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
KERNEL = ROOT / "tests" / "data" / "action-kernel.py"


def slot_ratios(results: Path) -> list[float]:
    cfg = json.loads(results.read_text())["configurations"][0]
    head, base = cfg["samples"], cfg["base_samples"]
    ratios = []
    for p in sorted(set(head["process"])):
        h = [t for t, q in zip(head["ns"], head["process"], strict=True) if q == p]
        b = [t for t, q in zip(base["ns"], base["process"], strict=True) if q == p]
        ratios.append(float(np.median(h) / np.median(b)))
    return ratios


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=7, help="runs per setting (7)")
    ap.add_argument("--processes", type=int, default=4)
    ap.add_argument("--samples", type=int, default=40)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="rnx-pinning-"))
    try:
        for name in ("head.py", "base.py"):
            shutil.copy(KERNEL, work / name)
        spread: dict[str, list[float]] = {"pinned": [], "unpinned": []}
        print(f"load average at start {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
        for run in range(args.runs):
            for setting in ("unpinned", "pinned"):
                out = work / f"{setting}-{run}.json"
                env = dict(os.environ, RNX_PIN_CPUS="0" if setting == "unpinned" else "1")
                subprocess.run(
                    [sys.executable, "-m", "rnx_cli", "bench", str(work / "head.py")]
                    + ["--base", str(work / "base.py"), "--runtimes", "pytorch_eager"]
                    + ["--batch-sizes", "8", "--samples", str(args.samples)]
                    + ["--processes", str(args.processes), "--out", str(out)],
                    check=True,
                    env=env,
                    cwd=ROOT,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
                ratios = slot_ratios(out)
                worst = max(abs(np.log(r)) for r in ratios)
                spread[setting].append(worst)
                shown = ", ".join(f"{r:.3f}" for r in ratios)
                print(
                    f"run {run + 1} {setting:8s} slot head/base {shown}; largest |log| {worst:.3f}"
                )
        for setting, values in spread.items():
            print(
                f"{setting:8s}: largest |log head/base| over slots, median "
                f"{statistics.median(values):.3f}, max {max(values):.3f} ({len(values)} runs)"
            )
        ratio = statistics.median(spread["unpinned"]) / statistics.median(spread["pinned"])
        print(f"unpinned / pinned, median of the largest slot offset: {ratio:.2f}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
