"""`rnx compare`: the table, JSON output, exit codes 0/1/2 and its one-line errors."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rnx.schema import GateReport
from rnx_cli.main import main as rnx
from testbed.factories import make_results

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


def test_a_ratio_unlike_the_medians_says_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The base's processes run 40% of their calls at 1.0 ms and 60% at 1.2 ms (its median is
    # 1.2 ms, its fast band 1.0 ms); the head runs every call at 4.2 ms. The medians give 3.5x,
    # the estimate 4.2x: the table must say why the two disagree.
    config = [("pytorch_eager", "float32", 1), ("pytorch_eager", "float32", 8)]
    base = make_results(configs=config, spread=0.002, seed=1).model_dump(mode="json")
    head = make_results(configs=config, spread=0.002, seed=2).model_dump(mode="json")
    for b, h in zip(base["configurations"], head["configurations"], strict=True):
        times = b["samples"]["ns"]
        if b["batch_size"] == 1:
            b["samples"]["ns"] = [t * (1.0 if i % 10 < 4 else 1.2) for i, t in enumerate(times)]
        h["samples"]["ns"] = [int(t * 4.2) for t in h["samples"]["ns"]]
        b["samples"]["ns"] = [int(t) for t in b["samples"]["ns"]]
    (tmp_path / "base.json").write_text(json.dumps(base))
    (tmp_path / "head.json").write_text(json.dumps(head))
    assert rnx(["compare", str(tmp_path / "base.json"), str(tmp_path / "head.json")]) == 1
    out = capsys.readouterr().out
    (note,) = [line for line in out.splitlines() if line.startswith("note: the ratio")]
    # Only the configuration whose medians disagree is named, with both numbers.
    assert re.search(r"pytorch_eager/float32/bs1 \(ratio 4\.[12]\d\d×, medians 3\.5\d\d×\)", note)
    assert "bs8" not in note
    assert "fast band" in out and "docs/statistics.md" in out


def test_a_ratio_like_the_medians_has_no_note(capsys: pytest.CaptureFixture[str]) -> None:
    doc = str(DATA / "results-v1-single.json")
    assert rnx(["compare", doc, doc]) == 0
    assert "note: the ratio" not in capsys.readouterr().out


def test_a_paired_ratio_unlike_the_medians_says_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Rounds 0-3 and 7-9 run the head 2x slower than their base; rounds 4-6 (a phase where the
    # machine slowed both alike) have equal times. The per-round ratios say 2x; the pooled
    # medians (1.2 of the base's, 2.0 of the head's) say 1.67x.
    doc = json.loads((DATA / "results-v1-paired.json").read_text())
    phases = {"base_samples": (1.0, 1.2, 1.5), "samples": (2.0, 1.2, 3.0)}
    for c in doc["configurations"]:
        for side, levels in phases.items():
            s = c[side]
            s["ns"] = [
                int(1e5 * levels[0 if r <= 3 else 1 if r <= 6 else 2] * (1 + 0.001 * (i % 5)))
                for i, r in enumerate(s["round"])
            ]
    paired = tmp_path / "paired.json"
    paired.write_text(json.dumps(doc))
    rnx(["compare", str(paired), str(paired)])
    out = capsys.readouterr().out
    assert re.search(r"\(ratio 2\.000×, medians 1\.66\d×\)", out), out
    assert "in paired mode the ratio is the middle" in out and "fast band" not in out


def test_a_pass_that_could_not_see_a_block_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Noisy runs that cannot resolve a 25% slowdown: the table's tier line carries the same
    qualifier as the PR comment (rnx.formatting.format_headline), not a plain PASS."""
    configs = (("pytorch_eager", "float32", 1), ("pytorch_eager", "float32", 8))
    base = make_results(seed=1, configs=configs, spread=0.2, n=12, processes=3)
    head = make_results(branch="feature", pr_number=3, seed=2, configs=configs, spread=0.2, n=12)
    paths = []
    for name, doc in (("base.json", base), ("head.json", head)):
        (tmp_path / name).write_text(doc.model_dump_json())
        paths.append(str(tmp_path / name))
    assert rnx(["compare", *paths]) == 0
    out = capsys.readouterr().out
    assert "tier: PASS — inconclusive: could not resolve changes under " in out
