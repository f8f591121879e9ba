"""Paired mode: the base commit in a git worktree (fetched into a shallow clone), and a verdict
from base and head measured in one job, without any server."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from action.gate import main
from action.paired import base_worktree
from rnx.errors import UserError

DATA = Path(__file__).resolve().parents[1] / "data"
GIT_ENV = {
    **os.environ,
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.com",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.com",
}


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=repo, env=GIT_ENV, check=True, capture_output=True, text=True
    ).stdout.strip()


def _origin_with_two_commits(tmp_path: Path, head_kernel: str) -> tuple[Path, str, str]:
    origin = tmp_path / "origin"
    (origin / "kernels").mkdir(parents=True)
    git(origin, "init", "-q", "-b", "main")
    shutil.copy2(DATA / "action-kernel.py", origin / "kernels" / "k.py")
    git(origin, "add", "-A")
    git(origin, "commit", "-q", "-m", "base")
    base = git(origin, "rev-parse", "HEAD")
    shutil.copy2(DATA / head_kernel, origin / "kernels" / "k.py")
    git(origin, "commit", "-qam", "head")
    return origin, base, git(origin, "rev-parse", "HEAD")


def test_worktree_of_the_base_commit_in_a_shallow_clone(tmp_path: Path) -> None:
    origin, base, head = _origin_with_two_commits(tmp_path, "action-kernel-slow.py")
    clone = tmp_path / "clone"
    # What actions/checkout does by default: one commit deep, the base commit is missing.
    subprocess.run(["git", "clone", "-q", "--depth=1", origin.as_uri(), str(clone)], check=True)
    with base_worktree(clone, base) as path:
        assert (path / "kernels" / "k.py").read_text() == (DATA / "action-kernel.py").read_text()
        assert git(path, "rev-parse", "HEAD") == base
    assert not path.exists()
    assert git(clone, "worktree", "list").count("\n") == 0  # removed again
    with pytest.raises(UserError, match="fetch-depth: 0"), base_worktree(clone, "f" * 40):
        pass


@pytest.mark.slow
def test_paired_gate_without_a_server_blocks_a_2x_slower_head(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    origin, base, head = _origin_with_two_commits(tmp_path, "action-kernel-slow.py")
    (origin / "kernalin.yml").write_text(
        "version: 1\ngate: {compare: paired}\n"
        "harness: {samples: 16, processes: 1, warmup: 1}\n"
        "benchmarks:\n  - {workload: kernels/k.py, batch-sizes: [8]}\n"
    )
    git(origin, "add", "-A")
    git(origin, "commit", "-qm", "config")
    head = git(origin, "rev-parse", "HEAD")
    monkeypatch.chdir(origin)
    monkeypatch.setenv("RNX_THREADS", "1")
    summary = tmp_path / "summary.md"
    env = {"GITHUB_STEP_SUMMARY": str(summary), "PATH": os.environ["PATH"]}
    argv = [
        "--repository",
        "acme/kernels",
        "--branch",
        "slow",
        "--sha",
        head,
        "--pr",
        "4",
        "--base-branch",
        "main",
        "--base-sha",
        base,
    ]
    assert main(argv, env=env) == 1
    text = summary.read_text()
    assert "compare: paired" in text and "| slower |" in text, text
    assert "rnx-benchmark: BLOCK" in text
