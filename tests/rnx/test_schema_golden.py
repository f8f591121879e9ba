"""The golden results documents parse, round-trip, and guard the schema's compatibility."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from rnx.schema import InvalidDocument, load_results, parse_results

DATA = Path(__file__).resolve().parent.parent / "data"
GOLDEN = sorted(DATA.glob("results-v1-*.json"))


def test_there_are_golden_documents_for_each_mode_and_status() -> None:
    docs = [load_results(str(p)) for p in GOLDEN]
    assert {d.settings.mode for d in docs} == {"single", "paired"}
    assert {c.status for d in docs for c in d.configurations} == {
        "ok",
        "unsupported",
        "diverged",
        "error",
    }


@pytest.mark.parametrize("path", GOLDEN, ids=lambda p: p.name)
def test_golden_document_round_trips(path: Path) -> None:
    raw = json.loads(path.read_text())
    doc = parse_results(path.read_bytes(), source=path.name)
    again = parse_results(doc.to_json(), source="round trip")
    assert again == doc
    # Nothing the file says is lost: every configuration's samples survive unchanged.
    for cfg, original in zip(doc.configurations, raw["configurations"], strict=True):
        assert cfg.id == f"{original['runtime']}/{original['dtype']}/bs{original['batch_size']}"
        if "samples" in original:
            assert cfg.samples is not None and cfg.samples.ns == original["samples"]["ns"]


def golden_dict() -> dict:
    return json.loads((DATA / "results-v1-single.json").read_text())


def test_unknown_version_is_refused_naming_it() -> None:
    raw = golden_dict() | {"schema_version": 7}
    with pytest.raises(InvalidDocument, match="schema_version 7"):
        parse_results(raw, source="future.json")


@pytest.mark.parametrize(
    ("bad", "problem"),
    [(-5, "greater than 0"), (12.5, "valid integer"), ("NaN", "valid integer")],
)
def test_bad_samples_are_refused(bad: object, problem: str) -> None:
    raw = golden_dict()
    raw["configurations"][0]["samples"]["ns"][3] = bad
    with pytest.raises(InvalidDocument, match=problem) as err:
        parse_results(raw, source="bad.json")
    assert "configurations.0.samples.ns.3" in str(err.value)


def test_nan_literal_is_refused() -> None:
    text = (DATA / "results-v1-single.json").read_text().replace('"ns": [', '"ns": [NaN, ', 1)
    with pytest.raises(InvalidDocument, match="NaN is not allowed"):
        parse_results(text, source="nan.json")


def test_unreadable_file_is_a_clear_domain_error(tmp_path: Path) -> None:
    with pytest.raises(InvalidDocument, match="cannot read results file"):
        load_results(str(tmp_path / "missing.json"))


@pytest.mark.parametrize("path", GOLDEN, ids=lambda p: p.name)
def test_configurations_by_id_follow_copies(path: Path) -> None:
    """by_id is kept with a parsed document; a copy with other configurations indexes its own,
    and a deep copy's index holds its own copies."""
    doc = load_results(str(path))
    assert doc.by_id == {c.id: c for c in doc.configurations}
    assert doc.by_id is doc.by_id
    fewer = doc.model_copy(update={"configurations": doc.configurations[:1]})
    assert list(fewer.by_id) == [doc.configurations[0].id]
    deep = doc.model_copy(deep=True)
    assert all(deep.by_id[c.id] is c for c in deep.configurations)
    assert deep == doc == load_results(str(path))  # the kept index is no field


def test_process_arrays_are_the_process_times_kept_read_only_and_follow_copies() -> None:
    from rnx.schema import Samples

    samples = Samples(ns=[5, 1, 7, 2, 9], round=[0, 0, 1, 1, 2], process=[1, 0, 1, 0, 1])
    arrays = samples.process_arrays
    assert [a.tolist() for a in arrays] == [[1.0, 2.0], [5.0, 7.0, 9.0]]
    assert [a.dtype for a in arrays] == [np.float64] * 2
    assert samples.process_arrays is arrays  # worked out once
    with pytest.raises(ValueError):
        arrays[0][0] = 3.0  # shared by every upload re-gated against this document
    other = samples.model_copy(update={"ns": [1, 1, 1, 1, 1]})
    assert [a.tolist() for a in other.process_arrays] == [[1.0, 1.0], [1.0, 1.0, 1.0]]
