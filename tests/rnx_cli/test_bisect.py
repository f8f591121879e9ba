"""`rnx bisect` on a real git repository made here: a 2x slowdown planted in one of seven
commits, a commit whose workload does not import stepped around, the culprit named; and the
halving rule on its own, with measurements given."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rnx_cli.bisect import Measured, bisect, classify
from rnx_cli.main import main as rnx
from testbed.act_harness import git
from tests.rnx_cli.conftest import ROOT, slow_down


def _commit(repo: Path, message: str) -> None:
    git(repo, "commit", "-qam", message, "--allow-empty")


def _rnx_bisect(repo: Path, *args: str, timeout: int) -> subprocess.CompletedProcess[str]:
    """`rnx bisect ARGS` of kernels/attention.py in `repo`, in a subprocess, with few samples."""
    workload = ["--workload", "kernels/attention.py", "--samples", "12", "--processes", "2"]
    return subprocess.run(
        [sys.executable, "-m", "rnx_cli", "bisect", *args, *workload],
        cwd=repo,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture
def history(checkout: Path) -> Path:
    """main: attention, then 7 commits; the 3rd breaks the workload's import, the 4th fixes
    it, the 5th ("fuse the projections") makes it 2x slower."""
    workload = checkout / "kernels" / "attention.py"
    _commit(checkout, "docs: say what the kernel computes")
    _commit(checkout, "ci: cache the wheels")
    working = workload.read_text()
    workload.write_text('raise RuntimeError("half-done refactor")\n' + working)
    _commit(checkout, "refactor: move the masks (broken)")
    workload.write_text(working)
    _commit(checkout, "refactor: finish moving the masks")
    slow_down(checkout)
    git(checkout, "-c", "user.name=Pat Culprit", "commit", "-qam", "fuse the projections")
    _commit(checkout, "docs: changelog")
    _commit(checkout, "tests: more shapes")
    return checkout


def test_the_planted_2x_slowdown_is_found_and_the_broken_commit_skipped(history: Path) -> None:
    done = _rnx_bisect(history, "HEAD~7", "HEAD", "--json", timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    lines = done.stdout.splitlines()
    outcome = json.loads(lines[-1])
    culprit = subprocess.run(
        ["git", "rev-parse", "HEAD~2"], cwd=history, capture_output=True, text=True
    ).stdout.strip()
    assert outcome["culprit"]["sha"] == culprit
    assert outcome["culprit"]["subject"] == "fuse the projections"
    assert outcome["culprit"]["author"].startswith("Pat Culprit")
    # The planted 2x at the ends: about 2x, and credibly beyond the 25% block threshold (the
    # interval's width is the shared runner's: under load its low end fell to 1.26).
    assert outcome["ends"]["ratio"] > 1.5
    assert outcome["ends"]["low"] > 1.25
    verdicts = [s["verdict"] for s in outcome["steps"]]
    assert verdicts == ["skipped", "good", "bad"]
    assert "half-done refactor" in outcome["steps"][0]["why"]
    assert any("skipped" in line for line in lines) and "-> bad" in done.stdout
    listed = subprocess.run(["git", "worktree", "list"], cwd=history, capture_output=True)
    assert len(listed.stdout.splitlines()) == 1  # every worktree removed


def test_an_unchanged_range_names_no_culprit(checkout: Path) -> None:
    _commit(checkout, "docs only")
    _commit(checkout, "more docs")
    done = _rnx_bisect(checkout, "HEAD~2", "HEAD", timeout=300)
    assert done.returncode == 1, done.stderr[-2000:]
    assert "nothing to find" in done.stdout


def test_wrong_ranges_are_one_line_and_exit_2(
    checkout: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # In this process (`rnx` is main(argv) -> exit code): each range is refused before
    # anything is measured, so a process of its own would only add its start to the test.
    _commit(checkout, "one more")
    monkeypatch.chdir(checkout)
    for args, message in (
        (["HEAD", "HEAD~1"], "HEAD is not an ancestor of HEAD~1"),
        (["HEAD", "HEAD"], "the same commit: nothing to bisect"),
        (["nope", "HEAD"], "git rev-parse --verify nope^{commit}"),
    ):
        code = rnx(["bisect", *args, "--workload", "k.py"])
        err = capsys.readouterr().err
        assert code == 2 and message in err, err
        assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err


def _at(ratio: float, width: float = 0.02) -> Measured:
    return Measured(ratio, ratio * (1 - width), ratio * (1 + width))


def test_a_commit_is_placed_only_when_its_intervals_clear_the_midpoint() -> None:
    assert classify(_at(1.0), _at(1 / 1.1), 1.1) == "good"
    assert classify(_at(1.1), _at(1.0), 1.1) == "bad"
    assert classify(_at(1.05, 0.05), _at(0.95, 0.05), 1.1) is None  # both straddle
    assert classify(_at(1.0), _at(1.0), 1.1) is None  # the two ends disagree


def test_halving_steps_around_skips_and_stops_when_undecided() -> None:
    commits = [f"c{i}" for i in range(9)]  # c0 good, c8 bad, c5 the culprit
    tried: list[tuple[str, str, int]] = []

    def measure(head: str, base: str, n: int) -> Measured | str:
        tried.append((head, base, n))
        if head == "c4":
            return "the workload did not run"
        slow = int(head[1:]) >= 5
        against_bad = base == "c8"
        return _at((1.0 if slow else 0.5) if against_bad else (2.0 if slow else 1.0))

    lo, hi, steps, why = bisect(commits, measure, ends_ratio=2.0, processes=2, retries=1)
    assert (lo, hi) == (3, 5)  # c4 skipped: the first bad is c4 or c5
    assert why == "every commit left in the range was skipped"
    assert [(s.sha, s.verdict) for s in steps][0] == ("c4", "skipped")

    def unsure(head: str, base: str, n: int) -> Measured:
        tried.append((head, base, n))
        return _at(1.4 if base == "c0" else 1 / 1.4, 0.2)

    tried.clear()
    lo, hi, steps, why = bisect(commits, unsure, ends_ratio=2.0, processes=2, retries=1)
    assert (lo, hi) == (0, 8) and "neither credibly closer" in why
    assert [n for _, _, n in tried] == [2, 2, 4, 4]  # measured again with twice the processes
