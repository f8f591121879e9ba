"""`rnx check` as a developer runs it: the working tree against the merge-base with main,
in paired mode; the verdict printed, the exit code CI would give."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from rnx_cli.main import main as rnx
from tests.rnx_cli.conftest import ROOT, slow_down


def rnx_check(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rnx_cli", "check", "--samples", "16", "--processes", "2", *args],
        cwd=repo,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_a_2x_slower_working_tree_blocks_with_exit_1_and_its_reason(checkout: Path) -> None:
    slow_down(checkout)
    done = rnx_check(checkout)
    assert done.returncode == 1, done.stderr[-2000:]
    assert "kernels/attention.py: BLOCK" in done.stdout
    assert "beyond the 25% block threshold" in done.stdout
    assert "rnx check: BLOCK (gate.mode enforce: exit 1, as CI would)" in done.stdout
    listed = subprocess.run(["git", "worktree", "list"], cwd=checkout, capture_output=True)
    assert len(listed.stdout.splitlines()) == 1  # the merge-base's worktree is gone


def test_what_cannot_be_checked_is_one_line_and_exit_2(
    checkout: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    # In this process (`rnx` is main(argv) -> exit code): each is refused before measuring,
    # so a process of its own would only add its start to the test.
    def rnx_check_here(where: Path, *args: str) -> tuple[int, str]:
        monkeypatch.chdir(where)
        code = rnx(["check", "--samples", "16", "--processes", "2", *args])
        return code, capsys.readouterr().err

    for args, message in (
        (["--base", "no-such-branch"], "no merge-base of HEAD and 'no-such-branch'"),
        (["../outside.py"], "../outside.py: not a file inside the repository"),
        (["kernels/missing.py"], "kernels/missing.py: not a file inside the repository"),
    ):
        code, err = rnx_check_here(checkout, *args)
        assert code == 2, err[-2000:]
        assert message in err and "Traceback" not in err
        assert len(err.strip().splitlines()) == 1, err  # one line
    plain = tmp_path / "not-git"
    plain.mkdir()
    code, err = rnx_check_here(plain)
    assert code == 2 and "git rev-parse --show-toplevel" in err
