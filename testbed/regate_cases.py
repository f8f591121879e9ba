"""Fixed re-gating cases and their outputs, recorded before the re-gating speed work (issue 13).

tests/rnx/test_regate_unchanged.py checks that rnx.verdict.evaluate and stats.compare_many give
today what they gave when tests/data/regate-golden.json was written: the same tiers, reasons,
verdicts and ratios. Rewrite the file only for a change that is meant to move verdicts:
`python -m testbed.regate_cases --write`.
"""

from __future__ import annotations

import argparse
import json
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

import stats
from rnx.config import GateSettings
from rnx.schema import GateReport, ResultsDocument
from rnx.verdict import evaluate
from testbed.factories import DEFAULT_CONFIGS, make_results

GOLDEN = Path(__file__).resolve().parents[1] / "tests" / "data" / "regate-golden.json"

Config = tuple[str, str, int]
DTYPES = ("float32", "float16", "bfloat16")


def many_configs(n: int) -> list[Config]:
    """benchmarks/server/regate_speed.py's configurations: 8 or 48 of them."""
    runtimes = ("pytorch_eager", "torch_compile")
    return [(runtimes[i % 2], DTYPES[(i // 2) % 3], 1 << (i // 6)) for i in range(n)]


def _doc(seed: int, **kw: Any) -> ResultsDocument:
    run_id = uuid.UUID(int=seed + 1)
    return make_results(seed=seed, run_id=run_id, **kw)


def _history(runs: int, **kw: Any) -> list[ResultsDocument]:
    return [_doc(seed, **kw) for seed in range(runs)]


def _pr(seed: int = 99, **kw: Any) -> ResultsDocument:
    return _doc(seed, event="pull_request", pr_number=1, **kw)


def evaluate_cases() -> Iterator[tuple[str, ResultsDocument, list[ResultsDocument]]]:
    """(name, head, baselines): the server's shapes and the model's edge cases."""
    eight = list(DEFAULT_CONFIGS)
    yield "8 configs, 6 runs, unchanged", _pr(), _history(6)
    slow = {"pytorch_eager/float32/bs1": 1.4, "onnxruntime/float16/bs8": 1.08}
    yield "8 configs, 6 runs, two slower", _pr(slowdown=slow), _history(6)
    yield (
        "8 configs, one broken, noisy",
        _pr(broken=("onnxruntime/float32/bs1",), spread=0.05),
        _history(6, spread=0.05),
    )
    wide = many_configs(48)
    slow48 = {"pytorch_eager/float32/bs1": 1.3, "torch_compile/float16/bs4": 0.8}
    yield "48 configs, 6 runs", _pr(configs=wide, slowdown=slow48), _history(6, configs=wide)
    yield "8 configs, 1 run", _pr(slowdown=1.03), _history(1)
    yield "8 configs, 3 runs of 1 process", _pr(processes=1), _history(3, processes=1)
    yield "8 configs, 1 process head", _pr(processes=1), _history(4)
    # A baseline that lacks a configuration, and one where it diverged.
    partial = [_doc(200, configs=eight[:6]), _doc(201, broken=(f"{eight[7][0]}/float16/bs8",))]
    yield "missing and broken in baselines", _pr(), partial + _history(2)
    yield "no baselines", _pr(), []
    yield "few samples", _pr(n=6, processes=2), _history(3, n=6, processes=2)


def compare_cases() -> Iterator[tuple[str, Callable[[], list[stats.Comparison]]]]:
    """stats.compare_many's other forms, on seeded lognormal times."""
    rng = np.random.default_rng(7)

    def side(groups: int, n: int, median: float) -> list[list[float]]:
        return [list(median * np.exp(rng.normal(0, 0.02, n))) for _ in range(groups)]

    pairs = [(side(3, 10, 1e5), side(3, 10, 1e5 * f)) for f in (1.0, 1.05, 1.3, 0.9)]
    flat = [(side(1, 30, 1e5)[0], side(1, 30, 1.1e5)[0]), (side(1, 40, 2e5)[0], side(1, 9, 2e5)[0])]
    paired = [(side(2, 12, 1e5), side(2, 12, 1.02e5)), (side(3, 10, 5e4), side(3, 10, 6e4))]
    labels = [[0, 0, 1], [0, 1, 2], [0, 0, 0], [5, 6, 6]]
    yield "groups", lambda: stats.compare_many(pairs, seed=1)
    yield "flat", lambda: stats.compare_many(flat, seed=2, rope=0.03)
    yield "paired", lambda: stats.compare_many(paired, seed=3, paired=True)
    yield "runs", lambda: stats.compare_many(pairs, seed=4, base_runs=labels)
    yield "one", lambda: [stats.compare(pairs[2][0], pairs[2][1], seed=5, base_runs=[0, 1, 1])]


def report_summary(report: GateReport) -> dict[str, Any]:
    return {
        "tier": report.tier,
        "reasons": report.reasons,
        "baseline_run_ids": [str(r) for r in report.baseline_run_ids],
        # The profile diff and memory (issue 30) came after the recording, and its documents
        # carry no profiles: they must stay empty, and the rest must not move.
        "comparisons": [_recorded_fields(c) for c in report.comparisons],
    }


def _recorded_fields(c: Any) -> dict[str, Any]:
    dumped: dict[str, Any] = c.model_dump(mode="json")
    if dumped.pop("explanation") or dumped.pop("memory") is not None:
        raise ValueError(f"{c.id}: a profile diff or memory change from documents without them")
    return dumped


def comparison_summary(c: stats.Comparison) -> dict[str, Any]:
    return {
        "verdict": c.verdict,
        "reason": c.reason,
        "ratio": c.ratio,
        "low": c.low,
        "high": c.high,
        "p_slower": c.p_slower,
        "p_faster": c.p_faster,
        "p_equivalent": c.p_equivalent,
        "p_block": c.p_exceeds(0.25),
        "resolution": c.resolution,
        "run_shift": c.run_shift,
        "base_median": c.base_median,
        "head_median": c.head_median,
    }


def outputs() -> dict[str, Any]:
    gate = GateSettings()
    out: dict[str, Any] = {"evaluate": {}, "compare": {}}
    for name, head, baselines in evaluate_cases():
        out["evaluate"][name] = report_summary(evaluate(head, baselines, gate))
    for name, run in compare_cases():
        out["compare"][name] = [comparison_summary(c) for c in run()]
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--write", action="store_true", help=f"rewrite {GOLDEN.name}")
    args = p.parse_args(argv)
    text = json.dumps(outputs(), indent=1, sort_keys=True) + "\n"
    if args.write:
        GOLDEN.write_text(text)
    else:
        print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
