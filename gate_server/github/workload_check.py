"""App mode, before any accept: is each run's workload the file it names, at the run's commit?

The workload path comes from the uploaded document, which the uploader controls; the accept
rules (CODEOWNERS) judge the commenter by that path. So where the server can ask GitHub (App
mode), it does before accepting (rnx_github.accept_rules.workload_problem) and refuses the
accept otherwise. Without App credentials, or for a repository the App is not installed on,
nothing is asked (docs/accept.md says what holds then).
"""

from __future__ import annotations

import json
from typing import Any

from gate_server.db import Database, runs
from gate_server.db.runs import RunRecord
from gate_server.errors import Conflict, UpstreamFailed
from rnx_github.accept_rules import ContentsReader, workload_problem
from rnx_github.app_auth import GitHubApp
from rnx_github.client import GitHubError


def measured_sha256(document: bytes) -> str | None:
    """The workload.sha256 of a stored document (validated on upload), None if unreadable."""
    try:
        found: Any = json.loads(document)["workload"]["sha256"]
    except (ValueError, UnicodeDecodeError, RecursionError, KeyError, TypeError):
        return None
    return found if isinstance(found, str) else None


def run_problem(github: ContentsReader, run: RunRecord, document: bytes) -> str | None:
    """Why `run`'s workload is not the file at its commit (None: it is). GitHubError when
    GitHub cannot say."""
    return workload_problem(
        github,
        repository=run.repository,
        sha=run.sha,
        path=run.workload,
        sha256=measured_sha256(document),
    )


def check_before_accept(app: GitHubApp | None, database: Database, run: RunRecord) -> None:
    """For the token APIs (POST /api/v1/runs/{id}/accept, /api/v1/pulls/{n}/accept): 409 when
    GitHub says the run's workload is not the file at its commit, 502 when GitHub cannot be
    asked; nothing is asked without App mode or where the App is not installed."""
    if app is None:
        return
    try:
        client = app.client(repository=run.repository)
    except GitHubError as e:
        if e.status == 404:  # the App is not installed on this repository: it cannot ask
            return
        raise _unavailable(e) from None
    with database.read() as conn:
        document = runs.document(conn, run.run_id) or b""
    try:
        problem = run_problem(client, run, document)
    except GitHubError as e:
        raise _unavailable(e) from None
    if problem is not None:
        raise Conflict(f"run {run.run_id} was not accepted: {problem}", code="workload_mismatch")


def _unavailable(e: GitHubError) -> UpstreamFailed:
    return UpstreamFailed(
        f"GitHub could not confirm the run's workload ({e}); nothing was accepted, try again",
        code="github_unavailable",
    )
