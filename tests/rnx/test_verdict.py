"""rnx.verdict.evaluate: documents in, a complete GateReport out."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import numpy as np

from rnx.config import GateSettings
from rnx.schema import (
    EVENTS_METHOD,
    KERNELS_METHOD,
    GateReport,
    ResultsDocument,
    load_results,
    parse_results,
)
from rnx.verdict import evaluate

DATA = Path(__file__).resolve().parent.parent / "data"


def raw(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((DATA / f"results-v1-{name}.json").read_text())
    return data


def scaled(doc: dict[str, Any], factors: dict[str, float], seed: int = 0) -> ResultsDocument:
    """A new run of the same document: fresh noise, each configuration slowed by its factor."""
    rng = np.random.default_rng(seed)
    out = json.loads(json.dumps(doc))
    out["run_id"] = str(uuid.UUID(int=int(rng.integers(1, 2**62))))
    for c in out["configurations"]:
        key = f"{c['runtime']}/{c['dtype']}/bs{c['batch_size']}"
        if c.get("samples"):
            ns = np.array(c["samples"]["ns"], dtype=float)
            noise = np.exp(rng.normal(0, 0.01, ns.size))
            c["samples"]["ns"] = [int(x) for x in ns * noise * factors.get(key, 1.0)]
    return parse_results(out)


def test_single_mode_fills_every_field_and_matches_by_id() -> None:
    base = load_results(str(DATA / "results-v1-single.json"))
    head = scaled(
        raw("single"), {"pytorch_eager/float32/bs8": 1.6, "torch_compile/float32/bs1": 1.1}
    )
    report = evaluate(head, [base], GateSettings())
    assert isinstance(report, GateReport)
    by_id = {c.id: c for c in report.comparisons}
    assert by_id["pytorch_eager/float32/bs8"].verdict == "slower"
    assert by_id["torch_compile/float32/bs1"].verdict == "slower"
    assert by_id["pytorch_eager/float32/bs1"].verdict in ("equivalent", "undecided")
    assert report.tier == "BLOCK"
    assert report.reasons[0].startswith("pytorch_eager/float32/bs8 is ")
    assert report.baseline_run_ids == [base.run_id]
    c = by_id["pytorch_eager/float32/bs8"]
    assert c.base_samples == c.head_samples == 30
    assert c.p_block is not None and c.p_block > 0.99
    assert c.ratio is not None and c.low is not None and c.high is not None
    assert c.low < 1.6 < c.high or abs(c.ratio - 1.6) < 0.05
    assert None not in (c.base_median_ns, c.head_median_ns, c.p_slower, c.p_faster, c.p_equivalent)
    # Report order follows the head document.
    assert [c.id for c in report.comparisons] == [c.id for c in head.configurations]


def test_statuses_broken_skipped_and_no_baseline() -> None:
    base = load_results(str(DATA / "results-v1-single.json"))
    head = load_results(str(DATA / "results-v1-statuses.json"))
    report = evaluate(head, [base], GateSettings())
    verdicts = {c.id: c.verdict for c in report.comparisons}
    assert verdicts == {
        "pytorch_eager/float32/bs1": verdicts["pytorch_eager/float32/bs1"],
        "tensorrt/float32/bs1": "skipped",
        "onnxruntime/float16/bs1": "broken",
        "torch_compile/bfloat16/bs8": "broken",
    }
    assert verdicts["pytorch_eager/float32/bs1"] in ("equivalent", "slower", "undecided")
    assert report.tier == "BLOCK"
    assert any(
        r.startswith("onnxruntime/float16/bs1 is broken in head: diverged:") for r in report.reasons
    )


def test_configuration_missing_from_baseline_warns() -> None:
    base_raw = raw("single")
    base_raw["configurations"] = base_raw["configurations"][:2]
    base = parse_results(base_raw)
    head = scaled(raw("single"), {})
    report = evaluate(head, [base], GateSettings())
    missing = [c for c in report.comparisons if c.verdict == "no-baseline"]
    assert [c.id for c in missing] == ["torch_compile/float32/bs1", "torch_compile/float32/bs8"]
    assert report.tier == "WARN"
    assert "torch_compile/float32/bs1 has no baseline yet" in report.reasons


def test_no_baseline_at_all_warns_and_never_blocks_on_speed() -> None:
    head = scaled(raw("single"), {"pytorch_eager/float32/bs8": 3.0})
    report = evaluate(head, [], GateSettings())
    assert report.tier == "WARN"
    assert report.reasons == ["no baseline in this environment yet"]
    assert {c.verdict for c in report.comparisons} == {"no-baseline"}
    assert report.baseline_run_ids == []


def test_several_baselines_become_groups() -> None:
    runs = [scaled(raw("single"), {}, seed=s) for s in range(3)]
    head = scaled(raw("single"), {"torch_compile/float32/bs8": 1.5}, seed=9)
    report = evaluate(head, runs, GateSettings())
    c = {c.id: c for c in report.comparisons}["torch_compile/float32/bs8"]
    assert c.base_samples == 90 and c.verdict == "slower"
    assert report.tier == "BLOCK"
    assert report.baseline_run_ids == [r.run_id for r in runs]


def test_paired_mode_uses_its_own_base_samples() -> None:
    head = load_results(str(DATA / "results-v1-paired.json"))
    report = evaluate(head, [], GateSettings())
    by_id = {c.id: c for c in report.comparisons}
    assert by_id["pytorch_eager/float32/bs8"].verdict == "slower"  # 12% slower by construction
    assert by_id["pytorch_eager/float32/bs1"].verdict == "equivalent"
    assert by_id["pytorch_eager/float32/bs8"].base_samples == 20
    assert report.tier == "WARN"
    assert report.baseline_run_ids == []
    # A stored baseline does not replace the pairing.
    again = evaluate(head, [load_results(str(DATA / "results-v1-single.json"))], GateSettings())
    assert [c.verdict for c in again.comparisons] == [c.verdict for c in report.comparisons]


def test_paired_rounds_are_matched_not_zipped() -> None:
    doc = raw("paired")
    cfg = doc["configurations"][1]
    order = list(reversed(range(len(cfg["samples"]["ns"]))))
    for key in ("ns", "round", "process"):
        cfg["samples"][key] = [cfg["samples"][key][i] for i in order]
    head = parse_results(doc)
    shuffled = evaluate(head, [], GateSettings())
    original = evaluate(load_results(str(DATA / "results-v1-paired.json")), [], GateSettings())
    assert shuffled.comparisons[1].ratio == original.comparisons[1].ratio


def test_gate_settings_reach_the_statistics() -> None:
    base = load_results(str(DATA / "results-v1-single.json"))
    head = scaled(raw("single"), {"pytorch_eager/float32/bs8": 1.6})
    lax = evaluate(head, [base], GateSettings(**{"block-threshold": 0.9}))
    assert lax.tier == "WARN"
    same_seed = evaluate(head, [base], GateSettings(), seed=3)
    assert same_seed == evaluate(head, [base], GateSettings(), seed=3)


def test_only_skipped_configurations_pass_saying_so() -> None:
    doc = raw("statuses")
    doc["configurations"] = [c for c in doc["configurations"] if c["status"] == "unsupported"]
    report = evaluate(
        parse_results(doc), [load_results(str(DATA / "results-v1-single.json"))], GateSettings()
    )
    assert report.tier == "PASS"
    assert report.reasons == ["nothing to compare: 1 of 1 configurations skipped"]


def timed_with(doc: dict[str, Any], methods: dict[str, str]) -> dict[str, Any]:
    """doc with details.timing_method set per configuration id (default: events)."""
    out = json.loads(json.dumps(doc))
    for c in out["configurations"]:
        key = f"{c['runtime']}/{c['dtype']}/bs{c['batch_size']}"
        c["details"]["timing_method"] = methods.get(key, EVENTS_METHOD)
    return out


def test_a_head_timed_by_kernels_is_never_compared_with_an_events_baseline() -> None:
    kernels = "pytorch_eager/float32/bs8"
    base = parse_results(timed_with(raw("single"), {}))
    # Kernel time reads less than event time; compared, it would pass as a large speed-up.
    head = scaled(timed_with(raw("single"), {kernels: KERNELS_METHOD}), {kernels: 0.4})
    report = evaluate(head, [base], GateSettings())
    row = {c.id: c for c in report.comparisons}[kernels]
    assert row.verdict == "undecided" and row.ratio is None
    assert row.reason is not None and row.reason.startswith(
        f"not compared: the baseline was timed with {EVENTS_METHOD}, this run with {KERNELS_METHOD}"
    )
    assert "harness.gpu-timer" in row.reason
    assert report.tier == "WARN"
    assert any(r.startswith(f"{kernels} is undecided: not compared") for r in report.reasons)
    # The configurations timed alike are compared as before.
    assert {c.verdict for c in report.comparisons if c.id != kernels} <= {
        "equivalent",
        "undecided",
    }
    assert all(c.ratio is not None for c in report.comparisons if c.id != kernels)


def test_baselines_of_the_other_clock_are_left_out_when_one_matches() -> None:
    cid = "torch_compile/float32/bs8"
    alike = scaled(timed_with(raw("single"), {}), {}, seed=1)
    other = scaled(timed_with(raw("single"), {cid: KERNELS_METHOD}), {cid: 0.3}, seed=2)
    head = scaled(timed_with(raw("single"), {}), {}, seed=3)
    report = evaluate(head, [alike, other], GateSettings())
    row = {c.id: c for c in report.comparisons}[cid]
    assert row.base_samples == 30  # the events baseline alone, not the kernels one's 30 more
    assert row.verdict in ("equivalent", "undecided") and row.ratio is not None
    assert 0.9 < row.ratio < 1.1


def test_documents_without_a_timing_method_stay_comparable() -> None:
    base = load_results(str(DATA / "results-v1-single.json"))  # details.timing absent method
    head = scaled(timed_with(raw("single"), {}), {})
    report = evaluate(head, [base], GateSettings())
    assert all(c.ratio is not None for c in report.comparisons)
