"""App mode after an upload: the server posts the PR's sticky comment and commit status itself.

Runs as a background task once the upload's answer is sent, so GitHub being slow or down
never delays or fails an upload; what goes wrong is logged.
"""

from __future__ import annotations

import logging

from starlette.background import BackgroundTask

from gate_server.db import Database, runs
from gate_server.github.pulls import latest_runs, publish
from gate_server.http.answers import Answer
from gate_server.services import Services
from rnx_github.app_auth import GitHubApp
from rnx_github.client import GitHubClient, GitHubError

log = logging.getLogger("gate_server.github")


def after_upload(svc: Services, answer: Answer) -> BackgroundTask | None:
    """The background task for a stored upload, or None when App mode is off."""
    app = svc.github.app
    run_id = answer.body.get("run_id")
    if app is None or answer.status != 201 or not run_id:
        return None
    return BackgroundTask(publish_for_run, svc.database, app, str(run_id))


def publish_for_run(database: Database, app: GitHubApp, run_id: str) -> list[str]:
    """Post the verdict of the PR that `run_id` belongs to; returns the warnings."""
    with database.read() as conn:
        run = runs.by_run_id(conn, run_id)
    if run is None or run.pr_number is None:
        return []
    try:
        client = app.client(repository=run.repository)
        warnings = publish_pull_request(
            database,
            client,
            app,
            repository=run.repository,
            repository_id=run.repository_id,
            pr_number=run.pr_number,
            head_sha=run.sha,
        )
    except GitHubError as e:
        warnings = [f"GitHub App: {e}"]
    for w in warnings:
        log.warning("run %s on %s#%s: %s", run_id, run.repository, run.pr_number, w)
    return warnings


def publish_pull_request(
    database: Database,
    client: GitHubClient,
    app: GitHubApp,
    *,
    repository: str,
    repository_id: int,
    pr_number: int,
    head_sha: str,
) -> list[str]:
    """Write the pull request's sticky comment and commit status from the runs stored for its
    head commit, as the App; returns the warnings."""
    with database.read() as conn:
        records = runs.pull_request_runs(conn, repository_id, pr_number)
    return publish(
        client,
        author=app.bot_login(),
        repository=repository,
        pr_number=pr_number,
        head_sha=head_sha,
        runs=latest_runs(records, head_sha),
    )
