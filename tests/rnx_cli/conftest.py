"""What the rnx_cli tests share: a git checkout of examples/attention.py on a branch."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from testbed.act_harness import git

ROOT = Path(__file__).resolve().parents[2]
ONE_CALL = "        return F.scaled_dot_product_attention(q, k, v)\n"


def slow_down(repo: Path) -> str:
    """Two sdpa calls where there was one: twice the work, a 2x slower kernel. Returns the
    file as it was."""
    target = repo / "kernels" / "attention.py"
    unchanged = target.read_text()
    target.write_text(
        unchanged.replace(ONE_CALL, "        F.scaled_dot_product_attention(q, k, v)\n" + ONE_CALL)
    )
    return unchanged


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """A repository whose main has examples/attention.py, on a branch forked from main."""
    repo = tmp_path / "repo"
    (repo / "kernels").mkdir(parents=True)
    shutil.copy(ROOT / "examples" / "attention.py", repo / "kernels" / "attention.py")
    (repo / "kernalin.yml").write_text("benchmarks:\n  - workload: kernels/attention.py\n")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "attention")
    git(repo, "checkout", "-qb", "agent/try")
    return repo
