"""`rnx compare-hardware`: the table, --price, --csv and its errors, through the dispatcher."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest

from rnx.formatting import format_money, format_rate
from rnx.hardware import CSV_COLUMNS
from rnx_cli.main import main
from testbed.factories import h200_score
from tests.rnx.test_hardware import run


@pytest.fixture
def runs(tmp_path: Path) -> list[str]:
    paths = []
    for env, seed, slowdown in (("cpu", 1, 1.0), ("h200", 2, 0.05)):
        path = tmp_path / f"{env}.json"
        path.write_text(run(env, seed=seed, slowdown=slowdown).to_json())
        paths.append(str(path))
    return paths


def test_table_with_prices_and_verdicts(runs: list[str], capsys: pytest.CaptureFixture) -> None:
    assert main(["compare-hardware", *runs, "--price", "cpu=0.10", "--price", "h200=3.50"]) == 0
    out = capsys.readouterr().out
    assert "workload kernels/attention.py; baseline cpu" in out
    lines = [line for line in out.splitlines() if line.lstrip().startswith("h200")]
    assert len(lines) == 2 and all("faster (20" in line for line in lines)
    assert "cost/1M items" in out and "software (* where the environments differ)" in out


def test_csv_to_a_file_and_to_stdout(
    runs: list[str], tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    target = tmp_path / "out.csv"
    assert main(["compare-hardware", *runs, "--csv", str(target)]) == 0
    rows = list(csv.DictReader(io.StringIO(target.read_text())))
    assert tuple(rows[0]) == CSV_COLUMNS and len(rows) == 4
    capsys.readouterr()
    assert main(["compare-hardware", *runs, "--csv", "-"]) == 0
    assert capsys.readouterr().out == target.read_text()


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--price", "h200"], "write ENV=PRICE"),
        (["--price", "h200=cheap"], "write ENV=PRICE"),
        (["--price", "h200=-1"], "write ENV=PRICE"),
        (["--price", "a100=2"], "a price names no environment of these runs: a100"),
        (["--price", "h200=1", "--price", "h200=2"], "names 'h200' twice"),
    ],
)
def test_bad_prices_are_one_line(
    runs: list[str], extra: list[str], message: str, capsys: pytest.CaptureFixture
) -> None:
    assert main(["compare-hardware", *runs, *extra]) == 2
    err = capsys.readouterr().err
    assert err.startswith("rnx compare-hardware: error: ") and message in err
    assert len(err.strip().splitlines()) == 1


def test_too_few_runs_and_unreadable_files(
    runs: list[str], tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    assert main(["compare-hardware", runs[0]]) == 2
    assert "give 2 to 6 results files, got 1" in capsys.readouterr().err
    assert main(["compare-hardware", runs[0], str(tmp_path / "nope.json")]) == 2
    assert "cannot read results file" in capsys.readouterr().err
    assert main(["compare-hardware", runs[0], runs[0]]) == 2
    assert "same environment" in capsys.readouterr().err


def test_real_cpu_run_against_itself_renamed(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """The recorded CPU run (tests/data/hardware) reads, and a copy under another environment
    is no credible difference from it in every configuration."""
    from rnx.schema import load_results

    real = Path(__file__).parents[1] / "data" / "hardware" / "cpu-gelu_linear.json"
    doc = load_results(str(real))
    env = doc.environment.model_copy(update={"key": "env-copy", "name": "copy"})
    copy = tmp_path / "copy.json"
    copy.write_text(doc.model_copy(update={"environment": env}).to_json())
    assert main(["compare-hardware", str(real), str(copy), "--csv", "-"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert {r["verdict"] for r in rows if r["environment"] == "copy"} == {"no credible difference"}


def test_number_formats() -> None:
    assert format_rate(81_300.0) == "81.3k" and format_rate(2.45e6) == "2.45M"
    assert format_rate(12.0) == "12" and format_rate(None) == "–"
    assert format_money(0.0123) == "0.0123" and format_money(4.561) == "4.56"
    assert format_money(0.00001234) == "0.0000123" and format_money(12345.0) == "12345"


def test_the_sol_column_appears_only_with_scores(
    runs: list[str], tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    from rnx.schema import load_results

    assert main(["compare-hardware", *runs]) == 0
    assert "SOL" not in capsys.readouterr().out
    doc = load_results(runs[1])
    sol = h200_score(0.375, "compute", peak_flops=9.9e14)
    configs = [c.model_copy(update={"speed_of_light": sol}) for c in doc.configurations]
    scored = tmp_path / "scored.json"
    scored.write_text(doc.model_copy(update={"configurations": configs}).to_json())
    assert main(["compare-hardware", runs[0], str(scored)]) == 0
    out = capsys.readouterr().out
    assert "SOL" in out and out.count("0.38") == 2
