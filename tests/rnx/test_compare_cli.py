"""`rnx compare`: the table, JSON output, exit codes 0/1/2 and its one-line errors."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rnx.schema import GateReport
from rnx_cli.main import main as rnx

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"
EXAMPLES = ROOT / "examples" / "results"


def test_bundled_examples_block_with_a_readable_table(capsys: pytest.CaptureFixture[str]) -> None:
    code = rnx(["compare", str(EXAMPLES / "base.json"), str(EXAMPLES / "head.json")])
    out = capsys.readouterr().out
    assert code == 1
    header = out.splitlines()[0]
    for column in ("configuration", "base", "head", "ratio [90% interval]", "P(slower)", "verdict"):
        assert column in header
    assert "tier: BLOCK" in out
    assert "slower" in out and "equivalent" in out
    assert " µs" in out or " ms" in out


def test_same_file_never_blocks(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = json.loads((DATA / "results-v1-single.json").read_text())
    for c in doc["configurations"]:  # tight timings: 0.2% spread, the same in every process
        median = sorted(c["samples"]["ns"])[len(c["samples"]["ns"]) // 2]
        c["samples"]["ns"] = [int(median * (1 + 0.001 * (i * 7 % 5 - 2))) for i in range(30)]
    quiet = tmp_path / "quiet.json"
    quiet.write_text(json.dumps(doc))
    assert rnx(["compare", str(quiet), str(quiet)]) == 0
    out = capsys.readouterr().out
    assert "tier: PASS" in out and "no credible slowdown in 4 configurations" in out
    noisy = str(EXAMPLES / "base.json")  # recorded on a loaded machine: some processes are off
    assert rnx(["compare", noisy, noisy, "--json"]) == 0
    report = GateReport.model_validate_json(capsys.readouterr().out)
    assert report.tier in ("PASS", "WARN")
    assert {c.verdict for c in report.comparisons} <= {"equivalent", "undecided"}


def test_json_output_is_a_gate_report(capsys: pytest.CaptureFixture[str]) -> None:
    code = rnx(["compare", str(EXAMPLES / "base.json"), str(EXAMPLES / "head.json"), "--json"])
    report = GateReport.model_validate_json(capsys.readouterr().out)
    assert code == 1 and report.tier == "BLOCK"
    assert all(
        c.verdict in ("slower", "equivalent", "undecided", "faster") for c in report.comparisons
    )


def test_thresholds_from_flags_and_config(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["compare", str(EXAMPLES / "base.json"), str(EXAMPLES / "head.json"), "--json"]
    assert rnx([*args, "--block-threshold", "900%"]) == 0
    assert GateReport.model_validate_json(capsys.readouterr().out).tier == "WARN"
    config = tmp_path / "kernalin.yml"
    config.write_text("version: 1\ngate:\n  block-threshold: 900%\n")
    assert rnx([*args, "--config", str(config)]) == 0
    capsys.readouterr()
    config.write_text("version: 1\ngate:\n  blok-threshold: 10%\n")
    assert rnx([*args, "--config", str(config)]) == 2
    assert "gate.blok-threshold: unknown key" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (None, "cannot read results file"),
        ("{not json", "is not valid JSON"),
        ('{"schema_version": 99}', "has schema_version 99"),
        ('{"schema_version": 1}', "is not a valid results document"),
    ],
)
def test_bad_file_is_one_error_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str | None, expected: str
) -> None:
    bad = tmp_path / "head.json"
    if content is not None:
        bad.write_text(content)
    assert rnx(["compare", str(EXAMPLES / "base.json"), str(bad)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("rnx compare: error: ") and expected in lines[0]


def test_installed_console_script_exit_codes() -> None:
    exe = shutil.which("rnx", path=str(Path(sys.executable).parent))
    if exe is None:
        pytest.skip("the rnx console script is not installed in this environment")
    ok = subprocess.run(
        [
            exe,
            "compare",
            str(DATA / "results-v1-single.json"),
            str(DATA / "results-v1-single.json"),
        ],
        capture_output=True,
        text=True,
    )
    assert ok.returncode == 0, ok.stderr
    blocked = subprocess.run(
        [exe, "compare", str(EXAMPLES / "base.json"), str(EXAMPLES / "head.json"), "--json"],
        capture_output=True,
        text=True,
    )
    assert blocked.returncode == 1
    assert json.loads(blocked.stdout)["tier"] == "BLOCK"
