"""Accepting a run: it becomes the newest baseline of its base branch, environment and workload
(only of its workload: another workload's baseline never moves)."""

from __future__ import annotations

import re
from typing import Any

from sqlalchemy.engine import Connection

from gate_server.clock import utcnow
from gate_server.db import Database, audit, runs
from gate_server.db.runs import BaselineKey, RunRecord
from gate_server.db.tokens import TokenRecord
from gate_server.domain.alerts.delivery import emit
from gate_server.domain.alerts.events import accepted_slowdown_event, alert_run
from gate_server.domain.auth import may_act_on, refuse_read_only
from gate_server.domain.branches import current_name, hold_names
from gate_server.domain.change_points import enqueue_detection
from gate_server.domain.environments import document_label
from gate_server.domain.runs import check_run_id
from gate_server.errors import Forbidden, InvalidInput, NotFound
from rnx.branches import branch_matches

MAX_REASON_CHARS = 2000
MAX_ACCEPT_BODY = 64 * 1024  # the JSON body of an accept request, in bytes
# NUL cannot be stored in a PostgreSQL text column, and the other C0 controls only hide text.
# C0 and C1 controls (but tab and line breaks), Unicode's line and paragraph separators, and
# the bidirectional marks, embeddings, overrides and isolates that would make a reason read
# differently from what it holds on a page, in an alert or in the audit log.
_UNSTORABLE = re.compile(
    "[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]"
)


def check_accept_scope(database: Database, token: TokenRecord, run_id: str) -> RunRecord:
    """The run, when the token may accept it (a CI token's repository, an acting viewer token's
    workspace) and the run targets one of the token's baseline branches."""
    run_id = check_run_id(run_id)
    refuse_read_only(token, "accept runs")
    with database.read() as conn:
        run = runs.by_run_id(conn, run_id)
        if run is None or not may_act_on(
            token, repository_id=run.repository_id, workspace_id=run.workspace_id
        ):
            raise NotFound(f"no run {run_id} that this token may see", code="run_not_found")
        # The branch it would become a baseline of, by the name that branch has now.
        target = current_name(conn, run.repository_id, run.base_branch or run.branch)
    if not branch_matches(token.branches, target):
        raise Forbidden(
            f"the run would become a baseline for branch "
            f"{target!r}, which is not among this token's baseline branches "
            f"({', '.join(token.branches)})",
            code="branch_out_of_scope",
        )
    return run


def check_reason(reason: str) -> str:
    reason = (reason or "").strip()
    if not reason:
        raise InvalidInput(
            'say why this run is accepted: {"reason": "..."}',
            code="missing_reason",
            details=[{"field": "reason", "problem": "required, non-empty"}],
        )
    bad = sorted({f"U+{ord(c):04X}" for c in reason if _UNSTORABLE.match(c)})
    if bad:
        raise InvalidInput(
            f"the reason holds control, separator or text-direction characters "
            f"({', '.join(bad)}); write it as plain text (tabs and line breaks are fine)",
            code="unstorable_reason",
            details=[{"field": "reason", "problem": "control or text-direction characters"}],
        )
    if len(reason) > MAX_REASON_CHARS:
        raise InvalidInput(
            f"the reason has {len(reason)} characters; at most {MAX_REASON_CHARS}",
            code="reason_too_long",
        )
    return reason


def accept_run(
    database: Database,
    run_id: str,
    *,
    actor: str,
    reason: str,
    via: str,
    token_id: int | None = None,
    on_behalf_of: str | None = None,
) -> dict[str, Any]:
    """Make a run the newest baseline for its base branch, environment and workload. The caller
    has checked that `actor` may do so (a scoped token, or a GitHub user with write access),
    and, in App mode, that the run's workload is the file at its commit
    (gate_server/github/workload_check.py). `on_behalf_of` is who the caller says it acts for,
    when the server cannot verify it: kept in the audit entry's details, never as the actor."""
    run_id = check_run_id(run_id)
    reason = check_reason(reason)
    with database.write() as conn:
        run = runs.by_run_id(conn, run_id)
        if run is None:
            raise NotFound(f"no run {run_id}", code="run_not_found")
        already = run.accepted_at is not None
        if not already:
            # The base branch as it is called now, under the rename lock (see uploads._store).
            hold_names(conn, run.repository_id)
            target = current_name(conn, run.repository_id, run.base_branch or run.branch)
            when = utcnow()
            runs.mark_accepted(
                conn, run_id, branch=target, when=when, accepted_by=actor, reason=reason, via=via
            )
            audit.record(
                conn,
                actor=actor,
                token_id=token_id,
                action="run.accept",
                subject=f"run:{run_id}",
                details={
                    "reason": reason,
                    "via": via,
                    "branch": target,
                    "environment": run.environment_key,
                    "workload": run.workload,
                    **({"on_behalf_of": on_behalf_of} if on_behalf_of else {}),
                },
            )
            run = runs.by_run_id(conn, run_id) or run
            # An accepted run is a new point of its branch's history (the job does nothing
            # when RNX_DETECT_CHANGES is off).
            key = BaselineKey(run.repository_id, target, run.environment_key, run.workload)
            enqueue_detection(conn, key)
            _alert_slowdown(conn, run, actor=actor, reason=reason, via=via)
    return _acceptance(run, already)


def _alert_slowdown(conn: Connection, run: RunRecord, *, actor: str, reason: str, via: str) -> None:
    """An accepted run with a credible slowdown is an alert (written with the accept)."""
    facts = accepted_slowdown_event(
        repository=run.repository,
        answer=run.answer,
        run=alert_run(run, document_label(runs.document(conn, run.run_id), run.environment_key)),
        accepted_by=actor,
        reason=reason,
        via=via,
    )
    if facts is not None:
        emit(conn, facts, workspace_id=run.workspace_id, repository_id=run.repository_id)


def _acceptance(run: RunRecord, already: bool) -> dict[str, Any]:
    if run.accepted_at is None:
        raise RuntimeError(f"run {run.run_id} was accepted but reads as not accepted")
    return {
        "run_id": run.run_id,
        "baseline_branch": run.baseline_branch,
        "environment": run.environment_key,
        "workload": run.workload,
        "accepted_at": run.accepted_at.isoformat(),
        "accepted_by": run.accepted_by,
        "reason": run.accept_reason,
        "via": run.accepted_via,
        "already_accepted": already,
    }
