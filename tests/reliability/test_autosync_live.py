"""Auto-sync end to end with a real App-mode server on loopback (`python -m gate_server serve`),
SQLite and PostgreSQL: `rnx link` links a workload through the API (and refuses bad input with
the fix), a signed `push` webhook over HTTP makes the server dispatch the workflow at the
touching commit, and a kill -9 while GitHub holds that dispatch unanswered neither loses the
commit nor dispatches it twice after a restart, nor after the push is delivered again."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from gate_server.db import open_database, outbox
from rnx_cli.main import main as rnx
from testbed.act_harness import REPO_ROOT
from testbed.fakes.github_commits import commit_files, commits
from testbed.fakes.github_endpoints import add_kernalin_workflow, app_key, serve_with_app
from testbed.gate_helpers import (
    LiveServer,
    app_mode_env,
    create_token,
    start_server,
    webhook_headers,
)
from tests.github.payloads import make_push

pytestmark = [pytest.mark.timeout(300)]

REPO = "acme/kernels"
SECRET = "live-webhook-secret"
WORKLOAD = "kernels/attn.py"


def _wait(what: Callable[[], bool], timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while not what():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def _settled(database_url: str) -> bool:
    """No outbox job waits (each auto-sync job has run to its end)."""
    database = open_database(database_url)
    try:
        with database.read() as conn:
            return outbox.pending_count(conn) == 0
    finally:
        database.close()


def _deliver(server: LiveServer, payload: dict[str, object], delivery: str) -> httpx.Response:
    data = json.dumps(payload).encode()
    return httpx.post(
        f"{server.url}/api/v1/github/webhook",
        content=data,
        headers=webhook_headers(SECRET, data, "push", delivery),
        timeout=60,
    )


def test_rnx_link_and_a_push_dispatch_once_across_a_kill_9(
    database_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    token = create_token(database_url)
    viewer = create_token(database_url, viewer=True)
    with serve_with_app({REPO: 77}) as (url, state):
        add_kernalin_workflow(state, REPO)
        base, touching, other = f"{1:040x}", f"{2:040x}", f"{3:040x}"
        commit_files(state, REPO, base, {WORKLOAD: "import torch\n", "README.md": "x\n"})
        commit_files(state, REPO, touching, {WORKLOAD: "import torch\n# faster\n"})
        commit_files(state, REPO, other, {"README.md": "y\n"})
        env = {
            "PYTHONPATH": str(REPO_ROOT),  # this checkout's server
            "RNX_OUTBOX_POLL_MS": "20",
            "RNX_OUTBOX_LEASE_S": "2",
            **app_mode_env(app_key(), url),
            "RNX_GITHUB_WEBHOOK_SECRET": SECRET,
            "RNX_AUTOSYNC_WAIT_S": "0",
            "RNX_AUTOSYNC_EVERY": "0",
        }
        server = start_server(database_url, tmp_path, env=env)
        try:
            monkeypatch.setenv("KERNALIN_URL", server.url)
            monkeypatch.setenv("KERNALIN_TOKEN", viewer.secret)
            # Bad input: refused before asking the server, and by the server, with the fix.
            assert rnx(["link", WORKLOAD, "--branch", "main/*", "--repo", REPO]) == 2
            assert "give one branch like main" in capsys.readouterr().err
            assert rnx(["link", "../x.py", "--branch", "main", "--repo", REPO]) == 2
            assert "relative to the repository root" in capsys.readouterr().err
            assert rnx(["link", WORKLOAD, "--repo", REPO]) == 2
            assert "--branch is required" in capsys.readouterr().err
            assert rnx(["link", WORKLOAD, "--branch", "main", "--repo", REPO]) == 2
            assert "--can-act" in capsys.readouterr().err  # a read-only viewer token
            monkeypatch.setenv("KERNALIN_TOKEN", token.secret)
            assert rnx(["link", WORKLOAD, "--branch", "main", "--repo", REPO]) == 0
            assert f"linked {WORKLOAD} on {REPO} main" in capsys.readouterr().out
            assert rnx(["link", "--list", "--repo", REPO]) == 0
            assert WORKLOAD in capsys.readouterr().out
            # The push: GitHub takes the dispatch and never answers; the server is killed.
            commits(state).hold.set()
            payload = make_push(
                REPO,
                4242,
                base,
                [(sha, commits(state).changed[(REPO, sha)]) for sha in (touching, other)],
            )
            assert _deliver(server, payload, "d-1").status_code == 200
            sent = commits(state).dispatches
            _wait(lambda: len(sent) == 1)
            server.process.kill()
            server.process.wait(timeout=10)
            commits(state).hold.clear()
            server = start_server(database_url, tmp_path, env=env)
            monkeypatch.setenv("KERNALIN_URL", server.url)
            assert _deliver(server, payload, "d-1").status_code == 200  # GitHub redelivers
            assert _deliver(server, payload, "d-2").status_code == 200  # or sends it again
            # The killed process's job stays pending until its lease has passed and the
            # restarted server has run it again, as it runs every job of the deliveries.
            _wait(lambda: _settled(database_url))
            assert [d["inputs"] for d in sent] == [{"commit": touching}]
            assert sent[0]["ref"] == "main" and sent[0]["workflow"] == "kernalin.yml"
            assert rnx(["link", "--list", "--repo", REPO]) == 0
            assert f"{touching[:12]}  main              touched   dispatching" in (
                capsys.readouterr().out
            )  # killed before GitHub answered: waited for, never sent again
            # Unlinked: a new touching commit is not dispatched.
            assert rnx(["link", WORKLOAD, "--unlink", "--branch", "main", "--repo", REPO]) == 0
            assert "unlinked" in capsys.readouterr().out
            later = f"{4:040x}"
            commit_files(state, REPO, later, {WORKLOAD: "import torch\n# later\n"})
            changed = [(later, commits(state).changed[(REPO, later)])]
            assert _deliver(server, make_push(REPO, 4242, other, changed), "d-3").status_code == 200
            _wait(lambda: _settled(database_url))
            assert len(sent) == 1
        finally:
            server.stop()
