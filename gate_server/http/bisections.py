"""/api/v1/change-points/{id}/bisection: a change point's bisection as people read it (the
culprit, its pull request and author, each step's evidence), and cancelling it."""

from __future__ import annotations

from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from gate_server.db import Database, audit, bisections, change_points, repositories
from gate_server.db.bisections import BisectionRecord, StepRecord
from gate_server.db.change_points import ChangePointRecord
from gate_server.db.tokens import CI, TokenRecord
from gate_server.domain.auth import actor_of, may_act_on, refuse_read_only
from gate_server.domain.branches import current_name
from gate_server.errors import Conflict, Forbidden, NotFound
from gate_server.http.endpoints import authenticated
from gate_server.http.openapi import endpoint, error, json_body
from gate_server.numbers import whole_number
from gate_server.services import services
from rnx.branches import branch_matches


def bisection_view(
    cp: ChangePointRecord, b: BisectionRecord | None, steps: list[StepRecord]
) -> dict[str, Any]:
    """What the API, the CLI and the dashboard show of a change point's bisection."""
    if b is None:
        return {"change_point_id": cp.id, "state": "none", "steps": []}
    github = f"https://github.com/{cp.repository}"
    return {
        "change_point_id": cp.id,
        "id": b.id,
        "state": b.state,
        "commits": len(b.commits),
        "culprit": None
        if b.culprit_sha is None
        else {
            "sha": b.culprit_sha,
            "author": b.culprit_author,
            "pull_request": b.culprit_pr,
            "url": f"{github}/commit/{b.culprit_sha}",
            "pull_request_url": None if b.culprit_pr is None else f"{github}/pull/{b.culprit_pr}",
        },
        "range": {"after": b.low_sha or cp.before_sha, "to": b.high_sha or cp.after_sha},
        "reason": b.reason,
        "steps": [
            {
                "sha": s.sha,
                "attempt": s.attempt,
                "state": s.state,
                "side": s.side,
                "run_id": s.run_id,
                "evidence": s.evidence,
            }
            for s in steps
        ],
    }


def _found(conn: Any, token: TokenRecord, raw_id: str, *, act: bool) -> ChangePointRecord:
    """The change point if this token may see it (act: may act on it); else 404."""
    change_id = whole_number(raw_id)
    cp = None if change_id is None else change_points.by_id(conn, change_id)
    repo = None if cp is None else repositories.by_id(conn, cp.repository_id)
    if cp is None or repo is None:
        visible = False
    elif act:
        visible = may_act_on(token, repository_id=repo.id, workspace_id=repo.workspace_id)
    elif token.kind == CI:
        visible = token.repository_id == repo.id
    else:
        visible = token.workspace_id == repo.workspace_id
    if not visible or cp is None:
        raise NotFound(
            f"no change point {raw_id[:40]!r} this token may see", code="change_point_not_found"
        )
    return cp


def read_bisection(database: Database, token: TokenRecord, raw_id: str) -> dict[str, Any]:
    with database.read() as conn:
        cp = _found(conn, token, raw_id, act=False)
        b = bisections.of_change_point(conn, cp.id)
        steps = [] if b is None else bisections.steps(conn, b.id)
    return bisection_view(cp, b, steps)


def cancel_bisection(database: Database, token: TokenRecord, raw_id: str) -> dict[str, Any]:
    """Cancel a running bisection (no further dispatch; runs in flight are ignored); audited."""
    with database.write() as conn:
        cp = _found(conn, token, raw_id, act=True)
        if not branch_matches(token.branches, current_name(conn, cp.repository_id, cp.branch)):
            raise Forbidden(
                f"the change point is on branch {cp.branch!r}, which this credential may not "
                "speak for; use a CI or acting viewer token for that branch",
                code="branch_out_of_scope",
            )
        b = bisections.of_change_point(conn, cp.id)
        if b is None or b.state != bisections.RUNNING:
            state = "none" if b is None else b.state
            raise Conflict(
                f"change point {cp.id}'s bisection is not running ({state})", code="not_running"
            )
        bisections.hold(conn, b.id)
        actor = actor_of(token)
        reason = f"cancelled by {actor}"
        bisections.finish(conn, b.id, bisections.CANCELLED, reason=reason)
        audit.record(
            conn,
            actor=actor,
            token_id=token.id,
            action="bisection.cancel",
            subject=f"change_point:{cp.id}",
            details={"repository": cp.repository, "bisection": b.id},
        )
        b = bisections.get(conn, b.id)
        steps = [] if b is None else bisections.steps(conn, b.id)
    return bisection_view(cp, b, steps)


@endpoint(
    "get",
    "A change point's bisection: its state, the culprit commit with its pull request and "
    "author, and each step's evidence against both ends",
    bearer=True,
    responses={
        "200": json_body("Bisection", "the bisection (state none: there is none)"),
        "404": error("no such change point this token may see"),
    },
)
async def get_bisection(request: Request) -> Response:
    database = services(request).database
    token, _ = await authenticated(request)
    raw = request.path_params["change_id"]
    return JSONResponse(await run_in_threadpool(read_bisection, database, token, raw))


@endpoint(
    "post",
    "Cancel a change point's running bisection",
    bearer=True,
    responses={
        "200": json_body("Bisection", "cancelled"),
        "403": error("a credential for another branch, or one that may not act"),
        "404": error("no such change point this token may see"),
        "409": error("its bisection is not running"),
    },
)
async def cancel(request: Request) -> Response:
    database = services(request).database
    token, _ = await authenticated(request)
    refuse_read_only(token, "cancel bisections")
    raw = request.path_params["change_id"]
    return JSONResponse(await run_in_threadpool(cancel_bisection, database, token, raw))


routes = [
    Route("/api/v1/change-points/{change_id}/bisection", get_bisection, methods=["GET"]),
    Route("/api/v1/change-points/{change_id}/bisection/cancel", cancel, methods=["POST"]),
]
