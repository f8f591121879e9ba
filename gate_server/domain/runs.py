"""Reading a stored run as the API shows it (GET /api/v1/runs/{run_id})."""

from __future__ import annotations

import json
import uuid
from typing import Any

from gate_server.db import Database, runs
from gate_server.db.runs import RunRecord
from gate_server.db.tokens import CI, TokenRecord
from gate_server.errors import NotFound


def check_run_id(run_id: str) -> str:
    """A run id in its canonical form; 404 when it is not a UUID (no run can have it)."""
    try:
        return str(uuid.UUID(run_id))
    except ValueError:
        raise NotFound(f"{run_id[:60]!r} is not a run id (a UUID)", code="run_not_found") from None


def may_see(token: TokenRecord, run: RunRecord) -> bool:
    """A CI token sees its repository's runs; any other token its workspace's."""
    if token.kind == CI:
        return run.repository_id == token.repository_id
    return run.workspace_id == token.workspace_id


def get_run(
    database: Database, token: TokenRecord, run_id: str, *, with_document: bool
) -> dict[str, Any]:
    run_id = check_run_id(run_id)
    with database.read() as conn:
        run = runs.by_run_id(conn, run_id)
        document = runs.document(conn, run_id) if run and with_document else None
    if run is None or not may_see(token, run):
        raise NotFound(f"no run {run_id} that this token may see", code="run_not_found")
    view = run_view(run)
    if document is not None:
        view["document"] = json.loads(document)
    return view


def run_view(run: RunRecord) -> dict[str, Any]:
    answer = run.answer
    return {
        "run_id": run.run_id,
        "repository": run.repository,
        "sha": run.sha,
        "branch": run.branch,
        "base_branch": run.base_branch,
        "event": run.event,
        "pr_number": run.pr_number,
        "environment": run.environment_key,
        "workload": run.workload,
        "tier": run.tier,
        "reasons": answer["reasons"],
        "comparisons": answer["comparisons"],
        # Absent from answers stored before the gate said when a PASS could not see a
        # block-sized slowdown: those read as None.
        "inconclusive": answer.get("inconclusive"),
        "baseline": answer["baseline"],
        "url": answer["url"],
        "receipt": answer["receipt"],
        "received_at": run.received_at.isoformat(),
        "is_baseline": run.baseline_branch is not None,
        "baseline_branch": run.baseline_branch,
        "accepted": None
        if run.accepted_at is None
        else {
            "at": run.accepted_at.isoformat(),
            "by": run.accepted_by,
            "reason": run.accept_reason,
            "via": run.accepted_via,
        },
    }
