"""The pull-request API that the action's accept mode calls (the workflow way to accept).


GET  /api/v1/pulls/{pr_number}/runs?head_sha=SHA   the PR's latest runs (one per workload and
                                                   environment) of the token's repository
POST /api/v1/pulls/{pr_number}/accept              {"reason", "user", "run_ids"}: accept them

The action applies the accept rules itself with the workflow's GITHUB_TOKEN (the server needs
no GitHub credentials for this way); the server checks the token's scope as for any accept
(and, with App credentials, each run's workload at its commit: github/workload_check.py).
The audit actor is the authenticated identity: the GitHub user of an OIDC token (who must be
the `user` sent), else the CI token; the `user` a CI token's caller sends is kept as what it
said (`on_behalf_of`), never as the actor.
"""

from __future__ import annotations

import re
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from gate_server.db import Database, runs
from gate_server.db.tokens import CI, TokenRecord
from gate_server.domain.accepts import MAX_ACCEPT_BODY, accept_run, check_accept_scope, check_reason
from gate_server.domain.uploads import answered
from gate_server.errors import Forbidden, NotFound
from gate_server.github.pulls import PullRun, latest_runs
from gate_server.github.workload_check import check_before_accept
from gate_server.http.answers import ApiError
from gate_server.http.endpoints import authenticated, base_url, parse_json, read_body
from gate_server.http.openapi import ACCEPT_REASON, BODY_ERRORS, endpoint, error, query
from gate_server.numbers import whole_number
from gate_server.services import services
from rnx_github.app_auth import GitHubApp

_LOGIN = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})(?:\[bot\])?$")
_SHA = re.compile(r"^[0-9a-fA-F]{7,64}$")
MAX_RUN_IDS = 100


def _pr_number(request: Request) -> int:
    raw = str(request.path_params["pr_number"])
    number = whole_number(raw, digits=10)
    if number is None or not 0 < number < 2**31:
        raise ApiError(404, "pull_request_not_found", f"{raw[:20]!r} is not a pull request number")
    return number


def _repository_id(token: TokenRecord) -> int:
    """The repository a CI (or OIDC) token acts for; a viewer token has none here."""
    if token.kind != CI or token.repository_id is None:
        raise Forbidden("use the repository's CI token (or its OIDC token)", code="viewer_token")
    return token.repository_id


def _view(run: PullRun) -> dict[str, Any]:
    r = run.record
    return {
        "run_id": r.run_id,
        "workload": run.workload,
        "environment": r.environment_key,
        "sha": r.sha,
        "base_branch": r.base_branch,
        "tier": r.tier,
        "accepted": r.accepted_at is not None,
        "url": r.answer.get("url"),  # made absolute by list_pull_runs
    }


def pull_runs(
    database: Database, repository_id: int, pr_number: int, head_sha: str | None
) -> list[PullRun]:
    with database.read() as conn:
        records = runs.pull_request_runs(conn, repository_id, pr_number)
    return latest_runs(records, head_sha)


@endpoint(
    "get",
    "A pull request's latest runs (one per workload and environment)",
    bearer=True,
    parameters=[query("head_sha", "string", pattern=_SHA.pattern)],
    responses={
        "200": {"description": "the runs"},
        "404": error("the path does not hold a pull request number"),
        "422": error("head_sha is not a commit sha"),
    },
)
async def list_pull_runs(request: Request) -> Response:
    database = services(request).database
    token, _ = await authenticated(request)
    head_sha = request.query_params.get("head_sha") or None
    if head_sha is not None and not _SHA.match(head_sha):
        raise ApiError(422, "bad_head_sha", f"head_sha {head_sha[:80]!r} is not a commit sha")
    found = await run_in_threadpool(
        pull_runs, database, _repository_id(token), _pr_number(request), head_sha
    )
    base = base_url(request)
    return JSONResponse({"runs": [answered(_view(r), base) for r in found]})


def _accept_body(raw: bytes) -> tuple[str, str, list[str]]:
    data: Any = parse_json(raw)
    if not isinstance(data, dict):
        raise ApiError(
            422, "invalid_request", 'send {"reason": ..., "user": ..., "run_ids": [...]}'
        )
    reason, user, run_ids = data.get("reason"), data.get("user"), data.get("run_ids")
    problems = []
    if not isinstance(reason, str) or not reason.strip():
        problems.append({"field": "reason", "problem": "required, non-empty"})
        reason = ""
    if not isinstance(user, str) or not _LOGIN.match(user):
        problems.append({"field": "user", "problem": "the GitHub login who accepted"})
        user = ""
    if (
        not isinstance(run_ids, list)
        or not 0 < len(run_ids) <= MAX_RUN_IDS
        or not all(isinstance(x, str) for x in run_ids)
    ):
        problems.append({"field": "run_ids", "problem": "a list of 1 to 100 run ids"})
        run_ids = []
    if problems:
        raise ApiError(422, "invalid_request", "the accept request is incomplete", problems)
    return check_reason(reason), user, [str(x) for x in run_ids]


def accept_pull_runs(
    database: Database,
    app: GitHubApp | None,
    token: TokenRecord,
    pr_number: int,
    reason: str,
    user: str,
    run_ids: list[str],
) -> list[dict[str, Any]]:
    """Every run is checked (scope, pull request, in App mode its workload) before any is
    accepted."""
    actor, on_behalf_of = accept_actor(token, user)
    checked = []
    for run_id in run_ids:
        run = check_accept_scope(database, token, run_id)
        if run.pr_number != pr_number:
            raise NotFound(
                f"run {run_id} is not a run of pull request #{pr_number}", code="run_not_found"
            )
        checked.append(run)
    for run in checked:
        check_before_accept(app, database, run)
    return [
        accept_run(
            database,
            run_id,
            actor=actor,
            reason=reason,
            via="github-action",
            token_id=token.id,
            on_behalf_of=on_behalf_of,
        )
        for run_id in run_ids
    ]


def accept_actor(token: TokenRecord, user: str) -> tuple[str, str | None]:
    """Who accepts, from the authenticated identity, never from the body: the GitHub user an
    OIDC token was issued for (403 when the body names another), else the CI token itself,
    with the user the workflow names kept as what it said (on_behalf_of)."""
    if token.github_actor is not None:
        if token.github_actor.lower() != user.lower():
            raise Forbidden(
                f"the OIDC token is for GitHub user {token.github_actor!r}, but the request "
                f"names {user!r}; accept as the user whose workflow run it is",
                code="user_mismatch",
            )
        return f"github:{token.github_actor}", None
    return f"token:{token.id}", f"github:{user}"


@endpoint(
    "post",
    "Accept a pull request's runs for a GitHub user ('/kernalin accept')",
    bearer=True,
    body={
        "type": "object",
        "required": ["reason", "user", "run_ids"],
        "properties": {
            "reason": ACCEPT_REASON,
            "user": {"type": "string"},
            "run_ids": {"type": "array", "items": {"type": "string"}},
        },
    },
    responses={
        "200": {"description": "accepted (or already accepted)"},
        **BODY_ERRORS,
        "403": error(
            "a viewer token, a branch out of scope, or (OIDC) another user than the token's"
        ),
        "404": error("a run that is not this pull request's"),
        "409": error("App mode: GitHub says a run's workload is not the file at its commit"),
        "422": error("reason, user or run_ids missing"),
        "502": error("App mode: GitHub could not be asked about a run's workload"),
    },
)
async def accept_pull(request: Request) -> Response:
    svc = services(request)
    token, _ = await authenticated(request)
    pr_number = _pr_number(request)
    reason, user, run_ids = _accept_body(await read_body(request, MAX_ACCEPT_BODY))
    _repository_id(token)  # a viewer token may not accept
    accepted = await run_in_threadpool(
        accept_pull_runs, svc.database, svc.github.app, token, pr_number, reason, user, run_ids
    )
    return JSONResponse({"accepted": accepted})


routes = [
    Route("/api/v1/pulls/{pr_number}/runs", list_pull_runs, methods=["GET"]),
    Route("/api/v1/pulls/{pr_number}/accept", accept_pull, methods=["POST"]),
]
