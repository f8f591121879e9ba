"""TCPD's metrics as we implement them, against values TCPDBench published for the same
predictions (analysis/output/summaries/summary_nile.json and the "zero" method's scores)."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.quality import changepoint_tcpd as tcpd

# Nile: five annotators, three of them at 28 and two with no change point (TCPD).
NILE = {"6": [], "7": [28], "8": [], "12": [28], "13": [28]}


@pytest.mark.parametrize(
    ("predicted", "f1", "cover"),
    [
        ([], 0.8235294117647058, 0.75808),  # precision 1, recall 0.7
        ([27], 1.0, 0.8800821917808218),  # within the margin of 28
        ([46], 0.5833333333333333, 0.6422608695652174),  # precision 0.5, recall 0.7
    ],
)
def test_f1_and_cover_reproduce_tcpdbench_on_nile(
    predicted: list[int], f1: float, cover: float
) -> None:
    assert tcpd.f1(NILE, predicted) == pytest.approx(f1, abs=1e-12)
    assert tcpd.cover(NILE, predicted, 100) == pytest.approx(cover, abs=1e-12)


def test_no_change_scores_as_tcpdbench_published_on_every_series() -> None:
    assert tcpd.check_metrics(tcpd.load()) < 1e-12


def test_a_predicted_point_counts_for_one_annotated_point_only() -> None:
    # Two annotated points 2 apart and one prediction between them: one hit, not two.
    annotations = {"a": [50, 52]}
    assert tcpd.f1(annotations, [51]) == pytest.approx(2 * 1.0 * (2 / 3) / (1 + 2 / 3))


def test_the_kept_series_are_univariate_and_annotated_within_their_length() -> None:
    series = tcpd.load()
    assert len(series) == 31
    for name, entry in series.items():
        n = len(entry["values"])
        points = [p for t in entry["annotations"].values() for p in t]
        assert all(0 <= p < n for p in points), name


def test_named_series_alone_are_scored(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    # `--series`: the table holds the named series and their means, nothing else.
    tcpd.run(references=False, venvs=tmp_path, only=["centralia", "nile"])
    lines = capsys.readouterr().out.splitlines()
    rows = [line.split("|")[1].strip() for line in lines if line.startswith("|")]
    assert [r for r in rows if r and not r.startswith(("series", "---"))] == [
        "centralia*",
        "nile*",
        "**mean, all** (2)",
        "**mean, piecewise constant** (2)",
    ]


def test_an_unknown_series_name_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="no such TCPD series: nil"):
        tcpd.run(references=False, venvs=tmp_path, only=["nil"])
