"""The results schema's `native` configurations: new documents carry them, old ones still read."""

from __future__ import annotations

import json
from pathlib import Path

from rnx.config import GateSettings
from rnx.schema import config_id, parse_results
from rnx.verdict import evaluate

DATA = Path(__file__).parents[1] / "data"


def _native(doc: dict, factor: float = 1.0) -> dict:
    out = json.loads(json.dumps(doc))
    for c in out["configurations"]:
        c["batch_size"] = None
        if c.get("samples"):
            c["samples"]["ns"] = [int(v * factor) for v in c["samples"]["ns"]]
    # one configuration per runtime x dtype at the workload's own shapes
    seen, kept = set(), []
    for c in out["configurations"]:
        key = (c["runtime"], c["dtype"])
        if key not in seen:
            seen.add(key)
            kept.append(c)
    out["configurations"] = kept
    return out


def test_config_ids():
    assert config_id("pytorch_eager", "float16", 8) == "pytorch_eager/float16/bs8"
    assert config_id("pytorch_eager", "float16", None) == "pytorch_eager/float16/native"


def test_golden_documents_still_validate_and_a_native_one_does_too():
    raw = json.loads((DATA / "results-v1-single.json").read_text())
    assert all(c.batch_size is not None for c in parse_results(raw).configurations)
    native = parse_results(_native(raw))
    assert native.configurations and all(c.id.endswith("/native") for c in native.configurations)
    assert native.configurations[0].batch_size is None


def test_native_configurations_are_compared_by_their_id():
    raw = json.loads((DATA / "results-v1-single.json").read_text())
    base = parse_results(_native(raw))
    head = parse_results(
        {**_native(raw, factor=1.6), "run_id": "6c0f4f6e-0000-4000-8000-000000000001"}
    )
    report = evaluate(head, [base], GateSettings())
    ok = [c for c in report.comparisons if c.status == "ok"]
    assert ok and all(c.id.endswith("/native") and c.batch_size is None for c in ok)
    assert report.tier == "BLOCK"  # 1.6x slower at the workload's own shapes
