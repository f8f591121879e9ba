"""Signing in to the dashboard with GitHub: the GitHub App's OAuth web flow, and what the person
may see and do, as GitHub says.

The flow (docs/dashboard.md, "Signing in with GitHub"): the dashboard sends the browser to
GitHub's authorize page with a signed `state`; GitHub sends it back with a one-time `code`,
which the server exchanges (with the App's client secret) for a user token, and asks GitHub
who that is (`GET /user`). The user token is then dropped: it is never stored or logged.

What they may see is decided by the App's installations, never by the user token: a person is
a viewer of a workspace when GitHub says they may read every repository the workspace holds
(the dashboard then shows nothing they could not see on GitHub), and may act (acknowledge change
points, accept runs on the baseline branches the workspace's CI tokens name) when they may
write to every one. The grant is a viewer token row named for the person (tokens.github_login),
whose secret nobody ever sees: only a session uses it, and `rnx token revoke` shuts the person
out for good (a revoked row is never replaced by signing in again).
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from urllib.parse import urlencode

import httpx
from sqlalchemy.engine import Connection

from gate_server.db import Database, audit, repositories, tokens
from gate_server.db.repositories import Repository
from gate_server.db.tokens import VIEWER, TokenRecord
from gate_server.domain.auth import hash_token
from gate_server.settings import OAuthClient
from rnx_github.app_auth import GitHubApp
from rnx_github.client import GitHubClient, GitHubError

CALLBACK_PATH = "/login/github/callback"
READ = ("read", "triage", "write", "maintain", "admin")
WRITE = ("write", "maintain", "admin")
# GitHub's logins: letters, digits and single hyphens, at most 39 characters.
MAX_LOGIN_CHARS = 39


class SignInRefused(Exception):
    """Why a GitHub user is not signed in, in words fit for the sign-in page."""

    def __init__(self, message: str, status: int = 403):
        super().__init__(message)
        self.message = message
        self.status = status


def authorize_url(web_url: str, client: OAuthClient, redirect_uri: str, state: str) -> str:
    """GitHub's page where the person agrees to sign in (a GitHub App asks for no scopes)."""
    query = {
        "client_id": client.client_id,
        "redirect_uri": redirect_uri,
        "state": state,
        "allow_signup": "false",
    }
    return f"{web_url}/login/oauth/authorize?{urlencode(query)}"


def exchange_code(
    http: httpx.Client, web_url: str, client: OAuthClient, code: str, redirect_uri: str
) -> str:
    """The user token for a callback's `code` (single use, minutes long at GitHub)."""
    if not code or len(code) > 512:
        raise SignInRefused("GitHub sent no sign-in code back; start again.", 400)
    try:
        r = http.post(
            f"{web_url}/login/oauth/access_token",
            data={
                "client_id": client.client_id,
                "client_secret": client.client_secret,
                "code": code,
                "redirect_uri": redirect_uri,
            },
            headers={"Accept": "application/json"},
        )
        answer = r.json() if r.status_code == 200 else {}
    except (httpx.HTTPError, ValueError) as e:
        raise SignInRefused(
            f"GitHub could not be asked ({type(e).__name__}); try again.", 502
        ) from None
    token = answer.get("access_token") if isinstance(answer, dict) else None
    if not isinstance(token, str) or not token:
        # GitHub answers 200 with {"error": ...} for a bad, used or expired code.
        error = answer.get("error") if isinstance(answer, dict) else None
        why = f" ({error})" if isinstance(error, str) and error.isidentifier() else ""
        raise SignInRefused(f"GitHub did not confirm the sign-in{why}; start again.", 403)
    return token


def user_login(http: httpx.Client, api_url: str, user_token: str) -> str:
    """Who the user token belongs to (GET /user)."""
    client = GitHubClient(api_url, lambda: user_token, http=http, user_agent="rnx-benchmark")
    try:
        login = client.request("GET", "/user").json().get("login")
    except (GitHubError, ValueError, AttributeError) as e:
        raise SignInRefused(f"GitHub did not say who signed in ({e}); try again.", 502) from None
    if not isinstance(login, str) or not 0 < len(login) <= MAX_LOGIN_CHARS:
        raise SignInRefused("GitHub answered with a user this server cannot read.", 502)
    return login


@dataclass(frozen=True)
class Grant:
    """A workspace the person may see, and whether they may act in it."""

    workspace: str
    workspace_id: int
    can_act: bool


def _permission(app: GitHubApp, repo: Repository, login: str) -> str | None:
    """The person's permission on a repository, as the App's installation reads it; None when
    the App cannot ask (not installed there, or GitHub did not answer)."""
    try:
        return app.client(repository=repo.name).collaborator_permission(repo.name, login)
    except GitHubError:
        return None


def grants(database: Database, app: GitHubApp, login: str) -> list[Grant]:
    """Every workspace GitHub says `login` may read in full (one question per repository)."""
    with database.read() as conn:
        found = repositories.by_workspace(conn)
    out = []
    for workspace, repos in found.items():
        permissions = [_permission(app, r, login) for r in repos]
        if all(p in READ for p in permissions):
            can_act = all(p in WRITE for p in permissions)
            out.append(Grant(workspace, repos[0].workspace_id, can_act))
    return out


def sign_in(database: Database, grant: Grant, login: str) -> TokenRecord:
    """The person's viewer token in the workspace (made on their first sign-in, its acting
    rights brought up to date on every one), the sign-in audited."""
    with database.write() as conn:
        token = tokens.signed_in_viewer(conn, grant.workspace_id, login)
        if token is not None and token.revoked_at is not None:
            raise SignInRefused(
                f"An admin revoked {login}'s access to workspace {grant.workspace} (token "
                f"{token.id}); ask them to let you in again."
            )
        branches = tokens.ci_branches(conn, grant.workspace_id) if grant.can_act else []
        can_act = bool(branches)
        if token is None:
            token_id = tokens.insert_token(
                conn,
                kind=VIEWER,
                workspace_id=grant.workspace_id,
                repository_id=None,
                branches=branches,
                # A secret nobody keeps: the row is usable through a session only.
                token_hash=hash_token(secrets.token_urlsafe(32)),
                prefix="github",
                github_login=login,
                can_act=can_act,
            )
        else:
            token_id = token.id
            tokens.set_acting(conn, token_id, can_act, branches)
        signed = tokens.by_id(conn, token_id)
        if signed is None:
            raise RuntimeError(f"token {token_id} was written but cannot be read")
        _audit(conn, signed, grant)
    return signed


def _audit(conn: Connection, token: TokenRecord, grant: Grant) -> None:
    audit.record(
        conn,
        actor=f"github:{token.github_login}",
        token_id=token.id,
        action="dashboard.login",
        subject=f"token:{token.id}",
        details={"workspace": grant.workspace, "via": "github", "can_act": token.can_act},
    )


def choose(grants_found: list[Grant], wanted: str | None, login: str) -> Grant:
    """The workspace to sign in to: the one asked for, else the only one the person may see."""
    if wanted is not None:
        for grant in grants_found:
            if grant.workspace == wanted:
                return grant
        raise SignInRefused(
            f"GitHub user {login} may not see workspace {wanted}: it takes read access to "
            "every repository in it. Ask an admin for a viewer token if you should."
        )
    if not grants_found:
        raise SignInRefused(
            f"GitHub user {login} may not see any workspace here: it takes read access to "
            "every repository of one (as the GitHub App sees it). Ask an admin for a viewer "
            "token if you should."
        )
    return grants_found[0]
