"""The dashboard's two actions, for a viewer token made with --can-act: acknowledge a change
point (overview) and accept a run (run page). Each is a CSRF-protected form post that goes
through the same checks and audit entries as the API (gate_server/domain/change_points.py,
gate_server/domain/accepts.py), with the token's name as the actor."""

from __future__ import annotations

from collections.abc import Callable

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from gate_server.db import Database, tokens
from gate_server.db.tokens import TokenRecord
from gate_server.domain.accepts import accept_run, check_accept_scope, check_reason
from gate_server.domain.auth import actor_of
from gate_server.domain.change_points import acknowledge_change_point
from gate_server.errors import Refused
from gate_server.github.workload_check import check_before_accept
from gate_server.http.answers import ApiError, refusal_response
from gate_server.http.change_points import MAX_NOTE_CHARS
from gate_server.http.dashboard.access import Viewer, same_origin
from gate_server.http.dashboard.routes import _error_page, _secure, _small_form, _viewer_or_response
from gate_server.services import services


def _acting_token(database: Database, viewer: Viewer) -> TokenRecord:
    with database.read() as conn:
        token = tokens.by_id(conn, viewer.token_id)
    if token is None or not token.can_act:
        raise ApiError(
            403,
            "viewer_token",
            "this viewer token only reads; ask an admin for one made with "
            "`rnx token create --viewer --can-act --branches ...` and sign in with it",
        )
    return token


async def _act(
    request: Request, field: str, done_at: str, action: Callable[[TokenRecord, str], object]
) -> Response:
    """Check the viewer, the form's origin and CSRF token, then run `action` with the acting
    token and the form's `field`; back to `done_at`, or an error page saying what was wrong."""
    viewer = await _viewer_or_response(request)
    if isinstance(viewer, Response):
        return viewer
    svc = services(request)
    form = await _small_form(request) or {}
    if (
        not viewer.via_session
        or not same_origin(request)
        or not svc.dashboard.signer.csrf_ok(viewer.csrf_binding, form.get("csrf"))
    ):
        return _error_page(
            request,
            viewer,
            403,
            "Refused",
            "The form came from another site or had expired; reload the page and try again.",
        )
    try:
        token = await run_in_threadpool(_acting_token, svc.database, viewer)
        await run_in_threadpool(action, token, form.get(field) or "")
    except ApiError as e:
        return _error_page(request, viewer, e.status, "Not done", e.message)
    except Refused as e:
        status = refusal_response(e).status_code
        return _error_page(request, viewer, status, "Not done", e.message)
    return _secure(RedirectResponse(done_at, status_code=303))


async def acknowledge(request: Request) -> Response:
    database = services(request).database
    raw_id = request.path_params["change_id"]

    def action(token: TokenRecord, note: str) -> None:
        note = note.strip()
        if not note or len(note) > MAX_NOTE_CHARS or "\x00" in note:
            raise ApiError(
                422,
                "invalid_note",
                f"say what is known of the change in 1 to {MAX_NOTE_CHARS} characters",
            )
        acknowledge_change_point(database, token, raw_id, note)

    return await _act(request, "note", "/", action)


async def accept(request: Request) -> Response:
    svc = services(request)
    run_id = request.path_params["run_id"]

    def action(token: TokenRecord, reason: str) -> None:
        run = check_accept_scope(svc.database, token, run_id)
        reason = check_reason(reason)
        check_before_accept(svc.github.app, svc.database, run)
        accept_run(
            svc.database,
            run.run_id,
            actor=actor_of(token),
            reason=reason,
            via="dashboard",
            token_id=token.id,
        )

    return await _act(request, "reason", f"/runs/{run_id}", action)


routes: list[BaseRoute] = [
    Route(
        "/change-points/{change_id}/acknowledge",
        acknowledge,
        methods=["POST"],
        include_in_schema=False,
    ),
    Route("/runs/{run_id}/accept", accept, methods=["POST"], include_in_schema=False),
]
