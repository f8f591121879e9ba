"""App mode after an upload: the server posts the PR's sticky comment and commit status itself.

Runs as a background task once the upload's answer is sent, so GitHub being slow or down
never delays or fails an upload; what goes wrong is logged.
"""

from __future__ import annotations

import logging
from typing import Any

from starlette.background import BackgroundTask

from gate_server.github import store
from gate_server.github.integration import GitHubIntegration, integration_for
from gate_server.github.pulls import latest_runs, publish
from gate_server.storage import Storage
from rnx_github.client import GitHubError

log = logging.getLogger("gate_server.github")


def after_upload(request: Any, status: int, answer: dict[str, Any]) -> BackgroundTask | None:
    """The background task for a stored upload, or None when App mode is off."""
    from gate_server.services import services

    svc = services(request)
    gh = integration_for(request.app.state, svc.settings.github)
    if gh.app is None or status != 201 or not answer.get("run_id"):
        return None
    return BackgroundTask(publish_for_run, svc.storage, gh, str(answer["run_id"]))


def publish_for_run(storage: Storage, gh: GitHubIntegration, run_id: str) -> list[str]:
    """Post the verdict of the PR that `run_id` belongs to; returns the warnings."""
    assert gh.app is not None
    with storage.read() as conn:
        run = storage.get_run(conn, run_id)
    if run is None or run.pr_number is None:
        return []
    try:
        client = gh.app.client(repository=run.repository)
        with storage.read() as conn:
            records = store.pull_request_runs(storage, conn, run.repository_id, run.pr_number)
        warnings = publish(
            client,
            author=gh.app.bot_login(),
            repository=run.repository,
            pr_number=run.pr_number,
            head_sha=run.sha,
            runs=latest_runs(records, run.sha),
        )
    except GitHubError as e:
        warnings = [f"GitHub App: {e}"]
    for w in warnings:
        log.warning("run %s on %s#%s: %s", run_id, run.repository, run.pr_number, w)
    return warnings
