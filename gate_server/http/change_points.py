"""/api/v1/change-points: the change points found in a repository's baseline history, and
acknowledging one (gate_server/domain/change_points.py finds them)."""

from __future__ import annotations

from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from gate_server.db.change_points import STATUSES
from gate_server.domain.auth import refuse_read_only
from gate_server.domain.change_points import acknowledge_change_point, list_change_points
from gate_server.http.answers import ApiError
from gate_server.http.endpoints import authenticated, parse_json, read_body, require_json
from gate_server.http.openapi import BODY_ERRORS, NOT_BLANK, endpoint, error, json_body, query
from gate_server.services import services

MAX_NOTE_CHARS = 2000
MAX_NOTE_BODY = 64 * 1024
FILTERS = ("branch", "environment", "workload")
MAX_PARAM_CHARS = 1000  # the longest stored value a filter can match (a workload's path)


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
