"""Who is looking: a viewer token (bearer header or signed session cookie), or nobody."""

from __future__ import annotations

import time
from dataclasses import dataclass

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from gate_server.dashboard.sessions import PRELOGIN_COOKIE, SESSION_COOKIE, SESSION_MAX_AGE_S
from gate_server.dashboard.state import DashboardState
from gate_server.db import Database, audit, tokens
from gate_server.db.tokens import VIEWER
from gate_server.domain.auth import actor_of, authenticate
from gate_server.errors import Refused
from gate_server.numbers import whole_number
from gate_server.services import services

# Pages hold a workspace's data: never cached, never framed, no script at all, nothing
# loaded from elsewhere. SVG presentation attributes are not styles, so no 'unsafe-inline'.
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'self'; img-src 'self' data:; form-action 'self'; "
        "frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}


@dataclass(frozen=True)
class Viewer:
    token_id: int
    workspace_id: int
    workspace: str
    via_session: bool
    csrf_binding: str  # the session's nonce; bearer requests post no forms
    can_act: bool = False  # may acknowledge change points and accept runs (--can-act)
    actor: str = ""  # as the audit log names it: "token:8 (alice)"


class NotAViewer(Exception):
    """A token that is known but may not open the dashboard (a CI token), or a bad one."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status
        self.message = message


def secure_cookies(request: Request) -> bool:
    """Secure cookies over https, or whenever the server's public URL is https (behind a
    TLS-terminating proxy the request itself arrives as http)."""
    public = services(request).settings.public_url or ""
    return request.url.scheme == "https" or public.startswith("https://")


def _from_bearer(database: Database, authorization: str) -> Viewer:
    try:
        token, _ = authenticate(database, authorization)
    except Refused as e:
        raise NotAViewer(401, e.message) from None
    if token.kind != VIEWER:
        raise NotAViewer(
            403,
            "A CI token cannot open the dashboard. Sign in with a viewer token "
            "(rnx token create --workspace W --viewer).",
        )
    return Viewer(
        token.id, token.workspace_id, token.workspace, False, "", token.can_act, actor_of(token)
    )


def _from_session(database: Database, state: DashboardState, cookie: str | None) -> Viewer | None:
    session = state.signer.read(cookie, now=time.time())
    if session is None:
        return None
    token_id = whole_number(session.token_id)
    if token_id is None:
        return None
    with database.read() as conn:
        token = tokens.by_id(conn, token_id)
    # Checked on every request, so revoking the viewer token ends its sessions at once.
    if token is None or token.kind != VIEWER or token.revoked_at is not None:
        return None
    return Viewer(
        token.id,
        token.workspace_id,
        token.workspace,
        True,
        session.nonce,
        token.can_act,
        actor_of(token),
    )


async def current_viewer(request: Request) -> Viewer | None:
    """The signed-in viewer; None for an anonymous visitor; NotAViewer for a refused token."""
    svc = services(request)
    authorization = request.headers.get("authorization")
    if authorization:
        return await run_in_threadpool(_from_bearer, svc.database, authorization)
    return await run_in_threadpool(
        _from_session, svc.database, svc.dashboard, request.cookies.get(SESSION_COOKIE)
    )


def login_viewer(database: Database, secret: str) -> Viewer:
    """A pasted token as a viewer, or NotAViewer with a message fit for the login form."""
    secret = secret.strip()
    if not secret:
        raise NotAViewer(400, "Paste a viewer token.")
    return _from_bearer(database, f"Bearer {secret}")


def record_login(database: Database, viewer: Viewer) -> None:
    with database.write() as conn:
        audit.record(
            conn,
            actor=viewer.actor,
            token_id=viewer.token_id,
            action="dashboard.login",
            subject=f"token:{viewer.token_id}",
            details={"workspace": viewer.workspace},
        )


def set_session_cookie(response: Response, value: str, *, secure: bool) -> None:
    response.set_cookie(
        SESSION_COOKIE,
        value,
        max_age=SESSION_MAX_AGE_S,
        path="/",
        httponly=True,
        secure=secure,
        # Lax, not Strict: a link to a run page from a pull request (another site) must
        # open signed in. Forms are protected by their CSRF token, not by SameSite alone.
        samesite="lax",
    )


def set_prelogin_cookie(response: Response, nonce: str, *, secure: bool) -> None:
    response.set_cookie(
        PRELOGIN_COOKIE,
        nonce,
        max_age=3600,
        path="/login",
        httponly=True,
        secure=secure,
        samesite="strict",
    )


def same_origin(request: Request) -> bool:
    """A form post must come from our own pages: browsers send Origin on every POST."""
    origin = request.headers.get("origin")
    if origin is None or origin == "null":
        # Only very old browsers omit it; the CSRF token still has to match.
        return origin is None
    own = f"{request.url.scheme}://{request.url.netloc}"
    public = services(request).settings.public_url
    return origin in (own, public)
