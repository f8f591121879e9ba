"""Page data built from stored documents: history series, distributions, environment diffs."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from typing import Any

from gate_server.dashboard.views import (
    HistoryRun,
    build_history,
    changed_fields,
    distributions,
    environment_rows,
    short_reasons,
    summarize_document,
)
from testbed.factories import body, make_results

CONFIGS = (("pytorch_eager", "float32", 1), ("onnxruntime", "float32", 8))


def document(**kw: Any) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(body(make_results(configs=CONFIGS, n=16, **kw)))
    return doc


def history_run(i: int, doc: dict[str, Any], **kw: Any) -> HistoryRun:
    fields: dict[str, Any] = dict(
        run_id=f"run-{i}",
        sha=f"{i:040x}",
        created_at=datetime(2026, 11, 1, tzinfo=timezone.utc) + timedelta(hours=i),
        environment=doc["environment"]["key"],
        tier="PASS",
        is_baseline=True,
        accepted_reason=None,
        ratios={"pytorch_eager/float32/bs1": 1.01},
        summary=summarize_document(json.dumps(doc).encode()),
    )
    fields.update(kw)
    return HistoryRun(**fields)


def test_summaries_hold_each_configuration_median_and_its_interval() -> None:
    doc = document(median_ns=2e6, broken=("onnxruntime/float32/bs8",))
    summary = summarize_document(json.dumps(doc).encode())
    assert set(summary.medians) == {"pytorch_eager/float32/bs1"}  # broken: nothing to draw
    med, low, high = summary.medians["pytorch_eager/float32/bs1"]
    samples = sorted(doc["configurations"][0]["samples"]["ns"])
    assert low <= med <= high and samples[0] <= low and high <= samples[-1]
    assert summary.environment == {"name": "test runner"}


def test_history_has_one_point_per_run_and_lists_the_events() -> None:
    docs = [document(seed=i) for i in range(4)]
    moved = document(seed=9, environment="gpu-b")
    runs = [history_run(i, d) for i, d in enumerate(docs)]
    runs.append(history_run(4, moved, tier="BLOCK", is_baseline=False))
    runs.append(history_run(5, moved, accepted_reason="new tiling"))
    charts, events = build_history(runs)
    assert [c.config_id for c in charts] == ["pytorch_eager/float32/bs1", "onnxruntime/float32/bs8"]
    assert [len(c.points) for c in charts] == [6, 6]
    assert charts[0].points[0].ratio == 1.01 and charts[1].points[0].ratio is None
    kinds = [e["kind"] for e in events]  # newest first
    assert kinds == ["accepted", "block", "environment"]


def test_a_details_change_in_one_environment_is_an_event_and_a_point_note() -> None:
    old, new = document(seed=1), document(seed=2)
    new["environment"]["software"] = {"torch": "2.6.0"}
    charts, events = build_history([history_run(0, old), history_run(1, new)])
    assert [e["kind"] for e in events] == ["environment-details"]
    assert charts[0].points[1].environment_note == (
        "environment details changed: software.torch: – → 2.6.0"
    )


def test_paired_runs_show_their_own_base_samples() -> None:
    head = document(seed=1)
    head["configurations"][0]["base_samples"] = {
        "ns": [5, 6, 7],
        "round": [0, 1, 2],
        "process": [0, 0, 0],
    }
    stored_baseline = document(seed=2)
    shown = {d["id"]: d for d in distributions(head, [stored_baseline])}
    assert shown["pytorch_eager/float32/bs1"]["base_n"] == 3  # the job's own base side
    unpaired = {d["id"]: d for d in distributions(document(seed=3), [stored_baseline] * 2)}
    assert unpaired["pytorch_eager/float32/bs1"]["base_n"] == 32  # two baseline runs pooled


def test_environment_rows_mark_what_differs_from_the_baseline() -> None:
    head = {"key": "gpu", "software": {"torch": "2.6", "cuda": "12.4"}}
    base = {"key": "gpu", "software": {"torch": "2.5", "cuda": "12.4"}, "runner": {"os": "x"}}
    rows = {r["key"]: r for r in environment_rows(head, base)}
    assert rows["software.torch"]["differs"] and not rows["software.cuda"]["differs"]
    assert rows["runner.os"] == {"key": "runner.os", "head": None, "base": "x", "differs": True}
    assert not any(r["differs"] for r in environment_rows(head, None))


def test_changed_fields_and_short_reasons_stay_short() -> None:
    before = {f"k{i}": "a" for i in range(6)}
    after = {f"k{i}": "b" for i in range(6)}
    assert changed_fields(before, after)[-1] == "and 2 more"
    assert short_reasons([]) == ""
    assert short_reasons(["a is 40% slower (90% interval 1.3-1.5)", "b", "c"]) == (
        "a is 40% slower; and 2 more"
    )
