"""Unchanged runs of one workload on a GPU, gated against each other: what an unchanged pull
request sees there.

Run on a GPU machine from the repository root: `python3 -m benchmarks.gpu.gpu_aa_runs [--runs 3]
[--workload examples/attention.py] [--batch-sizes 1,8] [--processes N] [--budget-s S] [--out
DIR]`. Each run is `rnx bench` in a process of its own with the product's defaults (processes,
samples, time budget) unless --processes says otherwise, on pytorch_eager and torch_compile in
float32, float16 and bfloat16 at the batch sizes given (12 configurations by default).
Then every ordered pair (baseline = one run, head = another) is gated by rnx.verdict.evaluate
with the default gate settings, as the server gates a pull request against one baseline run,
and each run against all the others as its baseline history. Issue 13 saw every such pair WARN
on an H200 (ratios 0.996-1.013, intervals of about +-2.5% against the 2% margin).
"""

from __future__ import annotations

import argparse
import itertools
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from rnx.config import GateSettings
from rnx.schema import ResultsDocument
from rnx.verdict import evaluate


def bench(workload: Path, out: Path, args: argparse.Namespace) -> ResultsDocument:
    extra = ["--processes", str(args.processes)] if args.processes else []
    done = subprocess.run(
        [sys.executable, "-m", "rnx_cli", "bench", str(workload), "--out", str(out)]
        + ["--runtimes", "pytorch_eager,torch_compile", "--dtypes", args.dtypes]
        + ["--batch-sizes", args.batch_sizes, "--device", args.device, "--quiet", *extra],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise SystemExit(f"rnx bench failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    return ResultsDocument.model_validate_json(out.read_text())


def describe(head: ResultsDocument, base: list[ResultsDocument], label: str) -> tuple[str, str]:
    """(the tier, a line saying it with the ratios, interval widths and verdicts)."""
    report = evaluate(head, base, GateSettings())
    ratios = [c.ratio for c in report.comparisons if c.ratio is not None]
    widths = sorted(
        (c.high - c.low) / 2 for c in report.comparisons if c.high is not None and c.low is not None
    )
    verdicts = dict(Counter(c.verdict for c in report.comparisons))
    return report.tier, (
        f"{label}: {report.tier}; ratios {min(ratios):.3f}-{max(ratios):.3f}, median 90% "
        f"half-width {widths[len(widths) // 2]:.3f}; verdicts {verdicts}"
        + "".join(f"\n    {r}" for r in report.reasons if "inconclusive" not in r)
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--workload", type=Path, default=Path("examples/attention.py"))
    p.add_argument("--out", type=Path, default=None, help="keep the results documents here")
    p.add_argument("--device", default="cuda", help="cuda (cpu only to check this script)")
    p.add_argument("--dtypes", default="float32,float16,bfloat16")
    p.add_argument("--batch-sizes", default="1,8")
    p.add_argument("--processes", type=int, help="worker processes a run (default: rnx bench's)")
    p.add_argument("--budget-s", type=float, help="start no run after this many seconds")
    p.add_argument(
        "--results",
        type=Path,
        help="gate the run*.json an earlier --out kept, measuring nothing (any machine)",
    )
    args = p.parse_args(argv)
    if args.results:
        docs = [
            ResultsDocument.model_validate_json(f.read_text())
            for f in sorted(args.results.glob("run*.json"))
        ]
    else:
        docs = measure(args)
    print(f"environment {docs[0].environment.key}")
    gate_pairs(docs)
    return 0


def measure(args: argparse.Namespace) -> list[ResultsDocument]:
    out = args.out or Path(tempfile.mkdtemp(prefix="gpu-aa-"))
    out.mkdir(parents=True, exist_ok=True)
    docs = []
    started = time.monotonic()
    for r in range(args.runs):
        t0 = time.monotonic()
        if args.budget_s and docs and t0 - started + (t0 - started) / len(docs) > args.budget_s:
            print(f"run {r}: not started, the next run would end past --budget-s", flush=True)
            break
        docs.append(bench(args.workload, out / f"run{r}.json", args))
        print(
            f"run {r}: {len(docs[-1].configurations)} configurations in "
            f"{time.monotonic() - t0:.0f} s",
            flush=True,
        )
    return docs


def gate_pairs(docs: list[ResultsDocument]) -> None:
    runs = range(len(docs))
    gates = [([docs[i]], j, f"baseline run {i}") for i, j in itertools.permutations(runs, 2)]
    gates += [([docs[i] for i in runs if i != j], j, f"the {len(docs) - 1} others") for j in runs]
    tiers = []
    for base, j, against in gates:
        tier, line = describe(docs[j], base, f"head run {j} against {against}")
        tiers.append(tier)
        print(line)
    print(
        f"PASS {tiers.count('PASS')} of {len(tiers)} gates; WARN {tiers.count('WARN')}, "
        f"BLOCK {tiers.count('BLOCK')}"
    )


if __name__ == "__main__":
    sys.exit(main())
