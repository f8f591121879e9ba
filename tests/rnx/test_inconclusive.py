"""rnx.verdict.inconclusive and the headline it gives: the one rule for a PASS or WARN that
could not have seen a block-sized slowdown."""

from __future__ import annotations

from typing import Any

from rnx.config import GateSettings
from rnx.formatting import format_headline
from rnx.schema import ConfigComparison
from rnx.verdict import evaluate, inconclusive
from testbed.factories import make_results

CONFIGS = (("pytorch_eager", "float32", 1), ("pytorch_eager", "float32", 8))


def _row(cid: str, verdict: str, resolution: float | None) -> ConfigComparison:
    runtime, dtype, bs = cid.split("/")
    return ConfigComparison(
        id=cid,
        runtime=runtime,  # type: ignore[arg-type]
        dtype=dtype,  # type: ignore[arg-type]
        batch_size=int(bs[2:]),
        status="ok",
        verdict=verdict,  # type: ignore[arg-type]
        resolution=resolution,
    )


def test_only_undecided_configurations_wider_than_the_threshold_count() -> None:
    rows = [
        _row("pytorch_eager/float32/bs1", "undecided", 0.366),
        _row("pytorch_eager/float32/bs8", "undecided", 0.229),  # resolves a 25% slowdown
        _row("onnxruntime/float32/bs1", "equivalent", 0.5),  # decided
        _row("onnxruntime/float32/bs8", "undecided", None),  # too few samples: a WARN already
    ]
    found = inconclusive(rows, tier="PASS", block_threshold=0.25)
    assert found is not None
    assert found.configurations == ["pytorch_eager/float32/bs1"]
    assert found.resolution == 0.366 and found.block_threshold == 0.25
    assert inconclusive(rows, tier="WARN", block_threshold=0.25) == found
    assert inconclusive(rows, tier="BLOCK", block_threshold=0.25) is None  # it saw one
    assert inconclusive(rows, tier="PASS", block_threshold=0.40) is None
    assert inconclusive(rows[1:], tier="PASS", block_threshold=0.25) is None


def test_the_headline_rounds_what_it_could_not_resolve_up() -> None:
    assert format_headline("PASS", 0.366) == (
        "PASS — inconclusive: could not resolve changes under 37%; more processes or paired mode"
    )
    assert format_headline("WARN", 0.30).startswith(
        "WARN — inconclusive: could not resolve changes under 30%;"
    )
    assert format_headline("PASS", None) == "PASS"
    assert format_headline("BLOCK", 0.5) == "BLOCK"
    assert format_headline("PASS", float("nan")) == "PASS"


def _pair(**noise: Any) -> tuple[Any, Any]:
    base = make_results(seed=1, configs=CONFIGS, **noise)
    head = make_results(branch="feature", pr_number=3, seed=2, configs=CONFIGS, **noise)
    return base, head


def test_evaluate_carries_it_in_the_report() -> None:
    base, head = _pair(spread=0.2, n=12, processes=3)
    # bs1 resolves about 30%, bs8 about 24%: a 27% threshold only bs1 cannot see.
    report = evaluate(head, [base], GateSettings(block_threshold=0.27))
    assert report.tier == "PASS"
    assert report.inconclusive is not None
    assert report.inconclusive.configurations == ["pytorch_eager/float32/bs1"]
    by_id = {c.id: c for c in report.comparisons}
    assert report.inconclusive.resolution == by_id["pytorch_eager/float32/bs1"].resolution
    # Quiet data resolve a block-sized slowdown everywhere: a plain PASS.
    base, head = _pair()
    quiet = evaluate(head, [base], GateSettings())
    assert quiet.tier == "PASS" and quiet.inconclusive is None
    assert all(c.resolution is not None and c.resolution < 0.25 for c in quiet.comparisons)
