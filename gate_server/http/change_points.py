"""/api/v1/change-points: the change points found in a repository's baseline history, and
acknowledging one (gate_server/domain/change_points.py finds them)."""

from __future__ import annotations

from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from gate_server.db import Database, audit, change_points, repositories
from gate_server.db.change_points import STATUSES
from gate_server.db.tokens import CI, TokenRecord
from gate_server.domain.auth import actor_of, may_act_on, refuse_read_only
from gate_server.domain.branches import current_name
from gate_server.domain.change_points import change_point_view
from gate_server.http.answers import ApiError
from gate_server.http.endpoints import authenticated, parse_json, read_body, require_json
from gate_server.http.openapi import BODY_ERRORS, NOT_BLANK, endpoint, error, json_body, query
from gate_server.numbers import whole_number
from gate_server.services import services
from rnx.branches import branch_matches

MAX_NOTE_CHARS = 2000
MAX_NOTE_BODY = 64 * 1024
LISTED = 500  # the newest change points answered
FILTERS = ("branch", "environment", "workload")
MAX_PARAM_CHARS = 1000  # the longest stored value a filter can match (a workload's path)


def _repository_id(database: Database, token: TokenRecord, name: str) -> int:
    """The repository `name` as this token may read it: a CI token's own, or one of a viewer
    token's workspace."""
    if token.kind == CI:
        if token.repository_id is None or (token.repository or "").lower() != name.lower():
            raise ApiError(
                403,
                "repository_out_of_scope",
                f"this token acts for {token.repository}, not {name}; use that repository's "
                "CI token or a viewer token of its workspace",
            )
        return token.repository_id
    with database.read() as conn:
        found = repositories.named(conn, name, workspace_id=token.workspace_id)
    if not found:
        raise ApiError(
            404, "repository_not_found", f"no repository {name} in this token's workspace"
        )
    return found[0].id


def _text(request: Request, name: str) -> str | None:
    """A query parameter, 422 when longer than MAX_PARAM_CHARS characters (a NUL character never
    gets here: gate_server/asgi.py answers 400 for it)."""
    value = request.query_params.get(name)
    if value is not None and len(value) > MAX_PARAM_CHARS:
        raise ApiError(
            422,
            "invalid_parameter",
            f"{name} must be at most {MAX_PARAM_CHARS} characters",
            [{"field": name, "problem": "too long"}],
        )
    return value


def _filters(request: Request) -> dict[str, str | None]:
    params = {n: _text(request, n) for n in (*FILTERS, "status")}
    status = params["status"]
    if status is not None and status not in STATUSES:
        raise ApiError(
            422,
            "invalid_status",
            f"status must be one of {', '.join(STATUSES)}, not {status[:40]!r}",
            [{"field": "status", "problem": f"one of {', '.join(STATUSES)}"}],
        )
    return {
        "branch": params["branch"],
        "environment_key": params["environment"],
        "workload": params["workload"],
        "status": status,
    }


def list_change_points(
    database: Database, token: TokenRecord, name: str, filters: dict[str, str | None]
) -> dict[str, Any]:
    repository_id = _repository_id(database, token, name)
    with database.read() as conn:
        found = change_points.listed(conn, repository_id, limit=LISTED, **filters)
    return {"change_points": [change_point_view(cp) for cp in found]}


@endpoint(
    "get",
    "The change points found in a repository's baseline history, newest first (at most 500)",
    bearer=True,
    parameters=[
        {
            "name": "repository",
            "in": "query",
            "required": True,
            "schema": {"type": "string", "pattern": NOT_BLANK, "maxLength": MAX_PARAM_CHARS},
            "description": "OWNER/NAME",
        },
        *(query(name, "string", max_length=MAX_PARAM_CHARS) for name in FILTERS),
        {
            "name": "status",
            "in": "query",
            "required": False,
            "schema": {"enum": list(STATUSES)},
        },
    ],
    responses={
        "200": json_body("ChangePoints", "the change points"),
        "404": error("no such repository in the viewer token's workspace"),
        "422": error("no repository given, an unknown status, or a parameter too long"),
    },
)
async def read_change_points(request: Request) -> Response:
    database = services(request).database
    token, _ = await authenticated(request)
    name = (_text(request, "repository") or "").strip()
    if not name:
        raise ApiError(
            422,
            "missing_repository",
            "name the repository: /api/v1/change-points?repository=OWNER/NAME",
            [{"field": "repository", "problem": "required"}],
        )
    filters = _filters(request)
    answer = await run_in_threadpool(list_change_points, database, token, name, filters)
    return JSONResponse(answer)


def _note(body: bytes) -> str:
    data: Any = parse_json(body)
    note = data.get("note") if isinstance(data, dict) else None
    if not isinstance(note, str) or not note.strip():
        raise ApiError(
            422,
            "missing_note",
            'say what is known of the change: {"note": "..."}',
            [{"field": "note", "problem": "required, non-empty string"}],
        )
    if len(note) > MAX_NOTE_CHARS:
        raise ApiError(
            422, "note_too_long", f"the note has {len(note)} characters; at most {MAX_NOTE_CHARS}"
        )
    if "\x00" in note:
        raise ApiError(
            422,
            "invalid_note",
            "the note holds a NUL character; send plain text",
            [{"field": "note", "problem": "holds a NUL character"}],
        )
    return note.strip()


def acknowledge_change_point(
    database: Database, token: TokenRecord, raw_id: str, note: str
) -> dict[str, Any]:
    """Record the note on a change point of the token's repository; audited."""
    change_id = whole_number(raw_id)
    with database.write() as conn:
        found = None if change_id is None else change_points.by_id(conn, change_id)
        repo = None if found is None else repositories.by_id(conn, found.repository_id)
        if (
            found is None
            or repo is None
            or not may_act_on(token, repository_id=repo.id, workspace_id=repo.workspace_id)
        ):
            raise ApiError(
                404, "change_point_not_found", f"no change point {raw_id[:40]!r} this token may see"
            )
        # Silencing a regression on a branch takes a credential for that branch: not an OIDC
        # token of pull-request code or of another branch, nor a CI token of other branches.
        branch = current_name(conn, found.repository_id, found.branch)
        if not branch_matches(token.branches, branch):
            raise ApiError(
                403,
                "branch_out_of_scope",
                f"the change point is on branch {branch!r}, which this credential may not "
                f"speak for ({', '.join(token.branches) or 'no baseline branch'}); use a CI "
                f"or acting viewer token for that branch, or an OIDC token of a push to it",
            )
        actor = actor_of(token)
        change_points.acknowledge(conn, found.id, note=note, actor=actor)
        audit.record(
            conn,
            actor=actor,
            token_id=token.id,
            action="change_point.acknowledge",
            subject=f"change_point:{found.id}",
            details={
                "note": note,
                "repository": found.repository,
                "branch": found.branch,
                "configuration": found.configuration,
            },
        )
        updated = change_points.by_id(conn, found.id) or found
    return change_point_view(updated)


@endpoint(
    "post",
    "Acknowledge a change point with a note (it stays listed, as acknowledged)",
    bearer=True,
    body={
        "type": "object",
        "required": ["note"],
        "properties": {"note": {"type": "string", "minLength": 1}},
    },
    responses={
        "200": json_body("ChangePoint", "acknowledged"),
        **BODY_ERRORS,
        "404": error("no such change point of this token's repository"),
        "415": error("the body is not application/json"),
        "422": error("no note given"),
    },
)
async def acknowledge(request: Request) -> Response:
    svc = services(request)
    token, _ = await authenticated(request)
    refuse_read_only(token, "acknowledge change points")
    require_json(request)
    note = _note(await read_body(request, MAX_NOTE_BODY))
    answer = await run_in_threadpool(
        acknowledge_change_point, svc.database, token, request.path_params["change_id"], note
    )
    return JSONResponse(answer)


routes = [
    Route("/api/v1/change-points", read_change_points, methods=["GET"]),
    Route("/api/v1/change-points/{change_id}/acknowledge", acknowledge, methods=["POST"]),
]
