"""Signing in to the dashboard with GitHub: two routes around GitHub's authorize page.

GET /login/github sends the browser to GitHub with a signed `state` bound to a nonce cookie;
GET /login/github/callback checks that state, has GitHub confirm the code and say who it is,
and signs the person in to a workspace they may read (gate_server/github/oauth.py), as the
token form at /login does: a fresh session cookie, the sign-in audited.
"""

from __future__ import annotations

import time

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from gate_server.dashboard.sessions import OAUTH_COOKIE, OAUTH_MAX_AGE_S, OAuthState, new_nonce
from gate_server.github import oauth
from gate_server.http.dashboard.access import secure_cookies, set_session_cookie
from gate_server.http.dashboard.routes import _error_page, _safe_next, _secure, render
from gate_server.services import Services, services

_NOT_SET_UP = (
    "This server does not sign in with GitHub (RNX_GITHUB_OAUTH_CLIENT_ID is not set). "
    "Sign in with a viewer token at /login."
)


def _callback_url(svc: Services) -> str:
    # Settings refuse OAuth without RNX_PUBLIC_URL: GitHub checks the redirect against it.
    return f"{(svc.settings.public_url or '').rstrip('/')}{oauth.CALLBACK_PATH}"


async def start(request: Request) -> Response:
    svc = services(request)
    client = svc.settings.github_oauth
    if client is None:
        return _error_page(request, None, 404, "Sign-in with GitHub is off", _NOT_SET_UP)
    workspace = request.query_params.get("workspace") or None
    wanted = OAuthState(_safe_next(request.query_params.get("next")), workspace)
    nonce = new_nonce()
    state = svc.dashboard.signer.oauth_state(wanted, nonce, now=time.time())
    url = oauth.authorize_url(svc.settings.github_web_url, client, _callback_url(svc), state)
    response = _secure(RedirectResponse(url, status_code=303))
    # Lax: the callback is a top-level navigation back from GitHub, which must carry it.
    response.set_cookie(
        OAUTH_COOKIE,
        nonce,
        max_age=OAUTH_MAX_AGE_S,
        path="/login/github",
        httponly=True,
        secure=secure_cookies(request),
        samesite="lax",
    )
    return response


def _who(svc: Services, code: str) -> tuple[str, list[oauth.Grant]]:
    client, app = svc.settings.github_oauth, svc.github.app
    if client is None or app is None:
        raise oauth.SignInRefused(_NOT_SET_UP, 404)
    web, callback = svc.settings.github_web_url, _callback_url(svc)
    user_token = oauth.exchange_code(app.http, web, client, code, callback)
    login = oauth.user_login(app.http, svc.settings.github_api_url, user_token)
    return login, oauth.grants(svc.database, app, login)


def _choice(request: Request, login: str, grants: list[oauth.Grant], target: str) -> Response:
    """Several workspaces: the person picks one (each link goes through GitHub once more,
    which answers at once for a user who has just agreed)."""
    return render(
        request, "choose_workspace.html", None, 200, login=login, grants=grants, next=target
    )


async def callback(request: Request) -> Response:
    svc = services(request)
    wanted = svc.dashboard.signer.read_oauth_state(
        request.query_params.get("state"), request.cookies.get(OAUTH_COOKIE), now=time.time()
    )
    if wanted is None:
        return _error_page(
            request,
            None,
            403,
            "Sign-in refused",
            "The sign-in had expired, or was not started from this browser. "
            "Open /login and sign in with GitHub again.",
        )
    try:
        declined = request.query_params.get("error")
        if declined:
            # GitHub's own word for it ("access_denied" when the person clicks Cancel).
            shown = declined if declined.isidentifier() else "an error"
            raise oauth.SignInRefused(f"GitHub did not sign you in ({shown}).")
        login, grants = await run_in_threadpool(_who, svc, request.query_params.get("code", ""))
        if wanted.workspace is None and len(grants) > 1:
            response = _choice(request, login, grants, wanted.next)
        else:
            grant = oauth.choose(grants, wanted.workspace, login)
            token = await run_in_threadpool(oauth.sign_in, svc.database, grant, login)
            _, cookie = svc.dashboard.signer.issue(str(token.id), now=time.time())
            response = _secure(RedirectResponse(wanted.next, status_code=303))
            set_session_cookie(response, cookie, secure=secure_cookies(request))
    except oauth.SignInRefused as e:
        response = _error_page(request, None, e.status, "Sign-in with GitHub refused", e.message)
    # The nonce is spent either way: this state cannot sign anyone in again.
    response.delete_cookie(OAUTH_COOKIE, path="/login/github")
    return response


routes: list[BaseRoute] = [
    Route("/login/github", start, methods=["GET"], include_in_schema=False),
    Route(oauth.CALLBACK_PATH, callback, methods=["GET"], include_in_schema=False),
]
