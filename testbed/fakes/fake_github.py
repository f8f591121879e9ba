"""A small local fake of GitHub's REST API on loopback, answering with recorded real payloads.

Only GitHub itself is faked (it cannot be reached from here). Objects are built from the
payloads GitHub really sends (tests/data/action-*.payload.json), so clients parse real shapes.
Routes are one table (ROUTES) so other tests can add endpoints. Tokens: each has a login and
flags (can write? may write workflow files?), so a fork's read-only token can be played.
"""

from __future__ import annotations

import base64
import copy
import itertools
import json
import socket
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

DATA = Path(__file__).resolve().parents[2] / "tests" / "data"


def recorded(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((DATA / f"action-{name}.payload.json").read_text())
    return data


@dataclass
class Token:
    login: str
    can_write: bool = True
    workflows: bool = False  # the `workflow` scope: may create or change .github/workflows/
    is_app: bool = False  # GITHUB_TOKEN: /user is "not accessible by integration"


@dataclass
class Repo:
    default_branch: str = "main"
    refs: dict[str, str] = field(default_factory=dict)  # branch -> sha
    files: dict[tuple[str, str], str] = field(default_factory=dict)  # (branch, path) -> text
    pulls: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class State:
    tokens: dict[str, Token] = field(default_factory=dict)
    repos: dict[str, Repo] = field(default_factory=dict)
    comments: dict[tuple[str, int], list[dict[str, Any]]] = field(default_factory=dict)
    statuses: dict[tuple[str, str], list[dict[str, Any]]] = field(default_factory=dict)
    log: list[tuple[str, str, int]] = field(default_factory=list)
    ids: Iterator[int] = field(default_factory=lambda: itertools.count(900_000_001))

    def repo(self, name: str) -> Repo:
        return self.repos.setdefault(name, Repo())

    def seed_comments(
        self, repo: str, issue: int, count: int, *, login: str = "Codertocat"
    ) -> None:
        """Other people's comments, so finding ours needs more than one page."""
        for i in range(count):
            self._add_comment(repo, issue, f"comment {i} from someone else", login)

    def _add_comment(self, repo: str, issue: int, body: str, login: str) -> dict[str, Any]:
        c = copy.deepcopy(recorded("issue_comment.created")["comment"])
        cid = next(self.ids)
        now = _now()
        c.update(
            id=cid,
            body=body,
            created_at=now,
            updated_at=now,
            url=f"https://api.github.com/repos/{repo}/issues/comments/{cid}",
            html_url=f"https://github.com/{repo}/pull/{issue}#issuecomment-{cid}",
            issue_url=f"https://api.github.com/repos/{repo}/issues/{issue}",
        )
        c["user"]["login"] = login
        c["user"]["type"] = "Bot" if login.endswith("[bot]") else "User"
        self.comments.setdefault((repo, issue), []).append(c)
        return c

    def comment_bodies(self, repo: str, issue: int, *, login: str | None = None) -> list[str]:
        return [
            c["body"]
            for c in self.comments.get((repo, issue), [])
            if login is None or c["user"]["login"] == login
        ]


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class Fail(Exception):
    def __init__(self, status: int, message: str):
        self.status, self.message = status, message


def _error(status: int, message: str) -> JSONResponse:
    # GitHub's error shape.
    return JSONResponse(
        {"message": message, "documentation_url": "https://docs.github.com/rest"}, status
    )


def _token(state: State, request: Request, *, write: bool = False) -> Token:
    auth = request.headers.get("authorization", "")
    scheme, _, secret = auth.partition(" ")
    token = state.tokens.get(secret.strip()) if scheme.lower() in ("bearer", "token") else None
    if token is None:
        raise Fail(401, "Bad credentials")
    if write and not token.can_write:
        raise Fail(403, "Resource not accessible by integration")
    return token


def _repo_name(request: Request) -> str:
    return f"{request.path_params['owner']}/{request.path_params['repo']}"


# ---- handlers: (state, request) -> (status, json)

Handler = Callable[[State, Request], Awaitable[tuple[int, Any, dict[str, str]]]]


async def get_user(state: State, request: Request) -> tuple[int, Any, dict[str, str]]:
    token = _token(state, request)
    if token.is_app:
        raise Fail(403, "Resource not accessible by integration")
    user = copy.deepcopy(recorded("issue_comment.created")["comment"]["user"])
    user["login"] = token.login
    return 200, user, {}


async def list_comments(state: State, request: Request) -> tuple[int, Any, dict[str, str]]:
    _token(state, request)
    repo, issue = _repo_name(request), int(request.path_params["number"])
    per_page = min(int(request.query_params.get("per_page", 30)), 100)
    page = max(int(request.query_params.get("page", 1)), 1)
    items = state.comments.get((repo, issue), [])
    chunk = items[(page - 1) * per_page : page * per_page]
    headers = {}
    if page * per_page < len(items):
        base = str(request.base_url).rstrip("/")
        nxt = f"{base}{request.url.path}?per_page={per_page}&page={page + 1}"
        headers["Link"] = f'<{nxt}>; rel="next"'
    return 200, chunk, headers


async def create_comment(state: State, request: Request) -> tuple[int, Any, dict[str, str]]:
    token = _token(state, request, write=True)
    body = (await request.json()).get("body")
    if not isinstance(body, str) or not body:
        raise Fail(422, "Validation Failed: body is missing")
    if len(body) > 65536:
        raise Fail(422, "Validation Failed: body is too long (maximum is 65536 characters)")
    repo, issue = _repo_name(request), int(request.path_params["number"])
    return 201, state._add_comment(repo, issue, body, token.login), {}


def _find_comment(state: State, repo: str, cid: int) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    for (r, _), items in state.comments.items():
        for c in items:
            if r == repo and c["id"] == cid:
                return items, c
    raise Fail(404, "Not Found")


async def update_comment(state: State, request: Request) -> tuple[int, Any, dict[str, str]]:
    token = _token(state, request, write=True)
    _, c = _find_comment(state, _repo_name(request), int(request.path_params["comment_id"]))
    if c["user"]["login"] != token.login:
        raise Fail(403, "You cannot edit someone else's comment")
    c["body"] = (await request.json())["body"]
    c["updated_at"] = _now()
    return 200, c, {}


async def delete_comment(state: State, request: Request) -> tuple[int, Any, dict[str, str]]:
    token = _token(state, request, write=True)
    items, c = _find_comment(state, _repo_name(request), int(request.path_params["comment_id"]))
    if c["user"]["login"] != token.login:
        raise Fail(403, "You cannot delete someone else's comment")
    items.remove(c)
    return 204, None, {}


async def create_status(state: State, request: Request) -> tuple[int, Any, dict[str, str]]:
    _token(state, request, write=True)
    data = await request.json()
    if data.get("state") not in ("error", "failure", "pending", "success"):
        raise Fail(422, "Validation Failed: state is not included in the list")
    if len(data.get("description") or "") > 140:
        raise Fail(422, "Validation Failed: description is too long (maximum is 140 characters)")
    repo, sha = _repo_name(request), request.path_params["sha"]
    status = {
        "id": next(state.ids),
        "state": data["state"],
        "description": data.get("description"),
        "target_url": data.get("target_url"),
        "context": data.get("context", "default"),
        "created_at": _now(),
    }
    state.statuses.setdefault((repo, sha), []).append(status)
    return 201, status, {}


async def get_repo(state: State, request: Request) -> tuple[int, Any, dict[str, str]]:
    _token(state, request)
    name = _repo_name(request)
    if name not in state.repos:
        raise Fail(404, "Not Found")
    payload = copy.deepcopy(recorded("pull_request.synchronize")["repository"])
    payload.update(full_name=name, name=name.split("/")[1])
    payload["default_branch"] = state.repos[name].default_branch
    return 200, payload, {}


async def get_ref(state: State, request: Request) -> tuple[int, Any, dict[str, str]]:
    _token(state, request)
    repo = state.repos.get(_repo_name(request))
    branch = request.path_params["branch"]
    if repo is None or branch not in repo.refs:
        raise Fail(404, "Not Found")
    return 200, {"ref": f"refs/heads/{branch}", "object": {"sha": repo.refs[branch]}}, {}


async def create_ref(state: State, request: Request) -> tuple[int, Any, dict[str, str]]:
    _token(state, request, write=True)
    repo = state.repos.get(_repo_name(request))
    data = await request.json()
    ref, sha = data.get("ref", ""), data.get("sha", "")
    if repo is None:
        raise Fail(404, "Not Found")
    if not ref.startswith("refs/heads/"):
        raise Fail(422, "Reference name must start with refs/heads/")
    branch = ref.removeprefix("refs/heads/")
    if branch in repo.refs:
        raise Fail(422, "Reference already exists")
    repo.refs[branch] = sha
    return 201, {"ref": ref, "object": {"sha": sha}}, {}


async def put_contents(state: State, request: Request) -> tuple[int, Any, dict[str, str]]:
    token = _token(state, request, write=True)
    repo = state.repos.get(_repo_name(request))
    if repo is None:
        raise Fail(404, "Not Found")
    path = request.path_params["path"]
    data = await request.json()
    branch = data.get("branch") or repo.default_branch
    if branch not in repo.refs:
        raise Fail(404, f"Branch {branch} not found")
    if path.startswith(".github/workflows/") and not token.workflows:
        # What GitHub answers a token without the workflow scope.
        raise Fail(
            403,
            f"refusing to allow a Personal Access Token to create or update workflow "
            f"`{path}` without `workflow` scope",
        )
    if (branch, path) in repo.files and data.get("sha") is None:
        raise Fail(422, 'Invalid request. "sha" wasn\'t supplied.')
    repo.files[(branch, path)] = base64.b64decode(data["content"]).decode()
    repo.refs[branch] = f"{next(state.ids):040x}"
    return 201, {"content": {"path": path}, "commit": {"sha": repo.refs[branch]}}, {}


async def create_pull(state: State, request: Request) -> tuple[int, Any, dict[str, str]]:
    _token(state, request, write=True)
    name = _repo_name(request)
    repo = state.repos.get(name)
    data = await request.json()
    if repo is None:
        raise Fail(404, "Not Found")
    if data.get("head") not in repo.refs or data.get("base") not in repo.refs:
        raise Fail(422, "Validation Failed: head or base branch does not exist")
    pull = copy.deepcopy(recorded("pull_request.synchronize")["pull_request"])
    number = len(repo.pulls) + 1
    pull.update(
        number=number,
        title=data.get("title"),
        body=data.get("body"),
        html_url=f"https://github.com/{name}/pull/{number}",
    )
    pull["head"]["ref"], pull["base"]["ref"] = data["head"], data["base"]
    repo.pulls.append(pull)
    return 201, pull, {}


ROUTES: list[tuple[str, str, Handler]] = [
    ("GET", "/user", get_user),
    ("GET", "/repos/{owner}/{repo}", get_repo),
    ("GET", "/repos/{owner}/{repo}/issues/{number:int}/comments", list_comments),
    ("POST", "/repos/{owner}/{repo}/issues/{number:int}/comments", create_comment),
    ("PATCH", "/repos/{owner}/{repo}/issues/comments/{comment_id:int}", update_comment),
    ("DELETE", "/repos/{owner}/{repo}/issues/comments/{comment_id:int}", delete_comment),
    ("POST", "/repos/{owner}/{repo}/statuses/{sha}", create_status),
    ("GET", "/repos/{owner}/{repo}/git/ref/heads/{branch:path}", get_ref),
    ("POST", "/repos/{owner}/{repo}/git/refs", create_ref),
    ("PUT", "/repos/{owner}/{repo}/contents/{path:path}", put_contents),
    ("POST", "/repos/{owner}/{repo}/pulls", create_pull),
]


def mount(routes: list[tuple[str, str, Handler]]) -> None:
    """Add another module's endpoints to the fake (each once, however often it is imported)."""
    for route in routes:
        if route not in ROUTES:
            ROUTES.append(route)


def create_app(state: State) -> Starlette:
    def endpoint(handler: Handler) -> Callable[[Request], Awaitable[Response]]:
        async def run(request: Request) -> Response:
            try:
                status, payload, headers = await handler(state, request)
            except Fail as f:
                state.log.append((request.method, request.url.path, f.status))
                return _error(f.status, f.message)
            state.log.append((request.method, request.url.path, status))
            if payload is None:
                return Response(status_code=status, headers=headers)
            return JSONResponse(payload, status, headers=headers)

        return run

    return Starlette(routes=[Route(p, endpoint(h), methods=[m]) for m, p, h in ROUTES])


@contextmanager
def serve(state: State | None = None) -> Iterator[tuple[str, State]]:
    """Run the fake on a free loopback port; yields (api_url, state)."""
    state = state or State()
    # Bound here and handed to uvicorn: a port merely free a moment ago could be taken by
    # another test worker's server before uvicorn bound it.
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = int(sock.getsockname()[1])
    config = uvicorn.Config(
        create_app(state), host="127.0.0.1", port=port, log_level="warning", lifespan="off"
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    # Ends as soon as it has started; a minute is for a loaded machine, not a speed claim.
    deadline = time.monotonic() + 60
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            sock.close()
            raise RuntimeError("the fake GitHub API did not start (or not within 60 s)")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}", state
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()
