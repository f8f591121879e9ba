"""Work and speed of light in the results document: optional (old documents parse), validated,
carried into the gate report, shown by `rnx compare`, and never part of a verdict."""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

import pytest

from bench_runner.peaks import lookup
from rnx.config import GateSettings
from rnx.schema import InvalidDocument, parse_results
from rnx.verdict import evaluate
from rnx_cli.main import main as rnx

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "results"
DATA = ROOT / "tests" / "data"


def _sol(score: float, **over: Any) -> dict[str, Any]:
    sol = {
        "score": score,
        "bound": "memory",
        "roofline_s": score * 1e-5,
        "measured_s": 1e-5,
        "peak_bandwidth": 4.8e12,
        "peak_source": "table",
        "peak_part": "H200 SXM",
        "beyond_roofline": score > 1.05,
    }
    return sol | over


def _with_scores(path: Path, scores: list[float]) -> dict[str, Any]:
    raw = json.loads(path.read_text())
    for c, score in zip(raw["configurations"], scores, strict=False):
        c["work"] = {"flops": 0, "bytes": 48_000_000, "bytes_source": "counted"}
        c["speed_of_light"] = _sol(score)
    return raw


def test_documents_without_work_parse_and_with_it_round_trip() -> None:
    for path in sorted(DATA.glob("results-v1-*.json")):
        doc = parse_results(path.read_bytes())
        assert all(c.work is None and c.speed_of_light is None for c in doc.configurations)
    raw = _with_scores(DATA / "results-v1-single.json", [0.5, 1.2])
    doc = parse_results(raw)
    assert doc.configurations[0].speed_of_light is not None
    assert doc.configurations[1].speed_of_light.beyond_roofline  # type: ignore[union-attr]
    assert parse_results(doc.to_json()) == doc


@pytest.mark.parametrize(
    ("field", "bad", "problem"),
    [
        ("score", -0.5, "greater than or equal to 0"),
        ("bound", "cache", "'compute' or 'memory'"),
        ("peak_source", "guessed", "'table' or 'measured'"),
        ("measured_s", 0, "greater than 0"),
    ],
)
def test_a_bad_speed_of_light_is_refused_naming_the_field(
    field: str, bad: object, problem: str
) -> None:
    raw = _with_scores(DATA / "results-v1-single.json", [0.5])
    raw["configurations"][0]["speed_of_light"][field] = bad
    with pytest.raises(InvalidDocument, match=problem) as err:
        parse_results(raw)
    assert f"configurations.0.speed_of_light.{field}" in str(err.value)


def test_scores_never_change_a_verdict() -> None:
    base = parse_results(EXAMPLES.joinpath("base.json").read_bytes())
    head_plain = parse_results(EXAMPLES.joinpath("head.json").read_bytes())
    # The slower head scores far higher, one configuration beyond the roofline: no matter.
    head_scored = parse_results(_with_scores(EXAMPLES / "head.json", [0.9, 3.0, 0.99, 0.1]))
    base_scored = parse_results(_with_scores(EXAMPLES / "base.json", [0.1, 0.1, 0.1, 0.1]))
    plain = evaluate(head_plain, [base], GateSettings())
    scored = evaluate(head_scored, [base_scored], GateSettings())
    assert scored.tier == plain.tier == "BLOCK"
    assert scored.reasons == plain.reasons
    for a, b in zip(plain.comparisons, scored.comparisons, strict=True):
        assert a.model_dump(exclude={"speed_of_light", "base_speed_of_light"}) == b.model_dump(
            exclude={"speed_of_light", "base_speed_of_light"}
        )
    first = scored.comparisons[0]
    assert first.speed_of_light is not None and first.speed_of_light.score == 0.9
    assert first.base_speed_of_light is not None and first.base_speed_of_light.score == 0.1


def test_rnx_compare_shows_base_and_head_scores_and_their_peaks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base, head = tmp_path / "base.json", tmp_path / "head.json"
    base.write_text(json.dumps(_with_scores(EXAMPLES / "base.json", [0.42, 0.3])))
    head.write_text(json.dumps(_with_scores(EXAMPLES / "head.json", [0.45, 1.5])))
    assert rnx(["compare", str(base), str(head)]) == 1  # the examples BLOCK, scores or not
    lines = capsys.readouterr().out.splitlines()
    assert "SOL base -> head" in lines[0]
    assert "0.42 memory -> 0.45 memory" in lines[2]
    assert "0.30 memory -> 1.50 memory!" in lines[3]
    assert "– -> –" in lines[4]  # a configuration without scores
    notes = [line for line in lines if line.startswith("note:")]
    # (A note on a ratio that differs from its medians' may come first: rnx compare's own.)
    assert "a measurement or counting problem" in notes[-3]
    assert notes[-2:] == [
        "note: base peaks: H200 SXM (peaks table: dense datasheet figures)",
        "note: head peaks: H200 SXM (peaks table: dense datasheet figures)",
    ]


def test_the_h200_document_scores_its_matmul_against_the_table() -> None:
    """The document `rnx bench` wrote on the lead's H200 (docs/results.md, "Speed of light on
    the H200"): the score is the arithmetic of its work, the table's H200 row and its samples."""
    doc = parse_results((DATA / "h200-roofline-results.json").read_bytes())
    part = lookup(doc.environment.hardware["gpus"][0]["name"])
    assert part is not None and part.part == "H200 SXM"
    ok, failed = doc.configurations
    assert ok.work is not None and ok.samples is not None and ok.speed_of_light is not None
    assert ok.work.flops == 2 * 8192**3 and ok.work.bytes == 3 * 2 * 8192**2
    sol = ok.speed_of_light
    assert (sol.peak_source, sol.peak_part, sol.bound) == ("table", "H200 SXM", "compute")
    assert sol.measured_s == pytest.approx(statistics.median(ok.samples.ns) / 1e9)
    roofline_s = max(ok.work.flops / part.flops["fp16"], ok.work.bytes / part.bandwidth)
    assert sol.score == pytest.approx(roofline_s / sol.measured_s)
    assert round(sol.score, 2) == 0.76 and not sol.beyond_roofline
    # The float32 configuration failed (the hidden-work rule): counted, but not scored.
    assert failed.status == "error" and failed.work is not None and failed.speed_of_light is None
