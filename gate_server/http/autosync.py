"""/api/v1/autosync/links: the workloads linked for auto-sync on a repository's branches
(`rnx link`): list, link, unlink. Linking and unlinking take a token that may act on the
repository and speak for the branch, and are audited."""

from __future__ import annotations

import re
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from gate_server.db import Database, audit, autosync, repositories
from gate_server.db.autosync import Link
from gate_server.db.repositories import Repository
from gate_server.db.tokens import CI, TokenRecord
from gate_server.domain.auth import actor_of, may_act_on, refuse_read_only
from gate_server.http.answers import ApiError
from gate_server.http.endpoints import authenticated, parse_json, read_body, require_json
from gate_server.http.openapi import BODY_ERRORS, endpoint, error, json_body, query
from gate_server.services import services
from gate_server.workloads import InvalidWorkloadPath, workload_identity
from rnx.branches import branch_matches

MAX_BODY = 16 * 1024
RECENT = 20  # the newest auto-sync commits a listing shows
MAX_NAME_CHARS = 300
# One branch by its name (no patterns: a push names one branch); what git allows, narrowed as
# kernalin.yml's branch names are.
BRANCH_NAME = re.compile(r"^[A-Za-z0-9_.+/-]{1,255}$")


def link_view(repository: str, link: Link) -> dict[str, Any]:
    return {
        "repository": repository,
        "branch": link.branch,
        "workload": link.workload,
        "created_by": link.created_by,
        "created_at": link.created_at.isoformat(),
    }


def _text(value: Any, name: str, example: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ApiError(
            422,
            f"missing_{name}",
            f"name the {name}, e.g. {example}",
            [{"field": name, "problem": "required, non-empty string"}],
        )
    if len(value) > MAX_NAME_CHARS or "\x00" in value:
        raise ApiError(422, f"invalid_{name}", f"the {name} is not one a repository can have")
    return value.strip()


def parse_link(data: Any) -> tuple[str, str, str]:
    """(repository, branch, workload) of a link request, each checked with a message that
    names the field and how to write it."""
    if not isinstance(data, dict):
        raise ApiError(422, "invalid_body", 'send {"repository", "branch", "workload"}')
    repository = _text(data.get("repository"), "repository", "acme/kernels")
    branch = _text(data.get("branch"), "branch", "main")
    if not BRANCH_NAME.match(branch):
        raise ApiError(
            422,
            "invalid_branch",
            f"{branch[:80]!r} is not a branch name; give one branch like main (letters, "
            "digits, . _ - + / only; no patterns)",
            [{"field": "branch", "problem": "not a branch name"}],
        )
    try:
        workload = workload_identity(_text(data.get("workload"), "workload", "kernels/attn.py"))
    except InvalidWorkloadPath as e:
        # The rules are the uploads' (a link names what runs store); the words are this API's.
        message = str(e).replace("workload.path", "the workload", 1)
        raise ApiError(422, "invalid_workload_path", message) from None
    return repository, branch, workload


def _repository(conn: Any, token: TokenRecord, name: str) -> Repository:
    """The repository `name` as this token may see it (a CI token's own, a viewer token's
    workspace's); 404 otherwise, so names of others' repositories are not confirmed."""
    found = repositories.named(conn, name, workspace_id=token.workspace_id)
    if token.kind == CI:
        found = [r for r in found if r.id == token.repository_id]
    if not found:
        raise ApiError(
            404, "repository_not_found", f"no repository {name[:100]} this token may see"
        )
    return found[0]


def list_links(
    database: Database, token: TokenRecord, name: str, branch: str | None
) -> dict[str, Any]:
    with database.read() as conn:
        repo = _repository(conn, token, name)
        found = autosync.links(conn, repo.id, branch)
        recent = autosync.commits(conn, repo.id, newest=RECENT)
    return {
        "links": [link_view(repo.name, k) for k in found],
        "recent": [
            {
                "sha": c.sha,
                "branch": c.branch,
                "reason": c.reason,
                "state": c.state,
                "workloads": c.workloads,
                "note": c.note,
            }  # fmt: skip
            for c in recent
            if branch is None or c.branch == branch
        ],
    }


def change_link(database: Database, token: TokenRecord, data: Any, *, remove: bool) -> Any:
    """Link (or unlink) a workload on a branch; audited. Linking twice is not an error."""
    name, branch, workload = parse_link(data)
    with database.write() as conn:
        repo = _repository(conn, token, name)
        if not may_act_on(token, repository_id=repo.id, workspace_id=repo.workspace_id):
            raise ApiError(
                403,
                "cannot_act",
                "this token may not change what the server dispatches for the repository; use "
                "its CI token or a viewer token made with --can-act",
            )
        if not branch_matches(token.branches, branch):
            raise ApiError(
                403,
                "branch_out_of_scope",
                f"this credential may not speak for branch {branch!r} "
                f"({', '.join(token.branches) or 'no baseline branch'})",
            )
        autosync.hold(conn, repo.id)
        actor = actor_of(token)
        if remove:
            done = autosync.remove_link(conn, repo.id, branch, workload)
            if not done:
                raise ApiError(
                    404,
                    "link_not_found",
                    f"{workload} is not linked on {repo.name} {branch}; `rnx link --list "
                    f"--repo {repo.name}` shows the links",
                )
            result: Any = {"removed": {"repository": repo.name, "branch": branch,
                                       "workload": workload}}  # fmt: skip
        else:
            link, done = autosync.add_link(conn, repo.id, branch, workload, actor)
            result = {**link_view(repo.name, link), "created": done}
        if done:
            audit.record(
                conn,
                actor=actor,
                token_id=token.id,
                action="autosync.unlink" if remove else "autosync.link",
                subject=f"repository:{repo.name}",
                details={"branch": branch, "workload": workload},
            )
    return result


async def _body(request: Request) -> Any:
    require_json(request)
    return parse_json(await read_body(request, MAX_BODY))


LINK_BODY = {
    "type": "object",
    "required": ["repository", "branch", "workload"],
    "properties": {
        "repository": {"type": "string"},
        "branch": {"type": "string"},
        "workload": {"type": "string"},
    },
}


@endpoint(
    "get",
    "The workloads linked for auto-sync on a repository's branches",
    bearer=True,
    parameters=[query("repository", "string", required=True), query("branch", "string")],
    responses={
        "200": json_body("AutoSyncLinks", "the live links, oldest first"),
        "404": error("no such repository this token may see"),
        "422": error("no repository named"),
    },
)
async def get_links(request: Request) -> Response:
    svc = services(request)
    token, _ = await authenticated(request)
    name = _text(request.query_params.get("repository"), "repository", "acme/kernels")
    branch = request.query_params.get("branch") or None
    return JSONResponse(await run_in_threadpool(list_links, svc.database, token, name, branch))


@endpoint(
    "post",
    "Link a workload on a branch: every new commit touching it (or what it imports) is "
    "benchmarked (App mode)",
    bearer=True,
    body=LINK_BODY,
    responses={
        "200": json_body("AutoSyncLink", "linked (created: false when it was linked before)"),
        **BODY_ERRORS,
        "403": error("a token that may not act, or not for that branch"),
        "404": error("no such repository this token may see"),
        "422": error("a missing field, a branch pattern, or a path outside the repository"),
    },
)
async def post_link(request: Request) -> Response:
    return await _change_link(request, remove=False)


@endpoint(
    "post",
    "Unlink a workload from a branch",
    bearer=True,
    body=LINK_BODY,
    responses={
        "200": json_body("AutoSyncUnlinked", "unlinked"),
        **BODY_ERRORS,
        "403": error("a token that may not act, or not for that branch"),
        "404": error("no such repository or link"),
        "422": error("a missing field, a branch pattern, or a path outside the repository"),
    },
)
async def post_unlink(request: Request) -> Response:
    return await _change_link(request, remove=True)


async def _change_link(request: Request, *, remove: bool) -> Response:
    svc = services(request)
    token, _ = await authenticated(request)
    refuse_read_only(token, "unlink workloads" if remove else "link workloads")
    data = await _body(request)
    answer = await run_in_threadpool(change_link, svc.database, token, data, remove=remove)
    return JSONResponse(answer)


routes = [
    Route("/api/v1/autosync/links", get_links, methods=["GET"]),
    Route("/api/v1/autosync/links", post_link, methods=["POST"]),
    Route("/api/v1/autosync/links/remove", post_unlink, methods=["POST"]),
]
