"""More of GitHub's REST API for tests/fakes/fake_github.py: accept rules and App mode.

What "/kernalin accept" and GitHub App mode use. Importing this module mounts the routes into
the fake's ROUTES table.

- the GitHub App: GET /app, GET /repos/{o}/{r}/installation, POST
  /app/installations/{id}/access_tokens (app JWTs are verified with the App's public key)
- the accept rules: collaborator permission, file contents (CODEOWNERS), team membership
- pull requests (GET /repos/{o}/{r}/pulls/{n}) and comment reactions
- branches (GET /repos/{o}/{r}/branches/{branch}): 200, 301 for a renamed branch, 404

Answers are shaped like GitHub's (recorded payloads where GitHub sends objects)."""

from __future__ import annotations

import base64
import copy
import secrets
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any
from urllib.parse import quote

import jwt
from starlette.requests import Request

from tests.support.fakes import fake_github
from tests.support.fakes.fake_github import (
    Fail,
    Handler,
    State,
    Token,
    _repo_name,
    _token,
    recorded,
)


@dataclass
class FakeApp:
    app_id: str
    public_key_pem: str
    slug: str = "rnx-gate"
    installations: dict[str, int] = field(default_factory=dict)  # repo -> installation id
    token_lifetime_s: int = 3600
    issued: list[tuple[int, str]] = field(default_factory=list)  # (installation, token)


@dataclass
class Extras:
    permissions: dict[tuple[str, str], str] = field(default_factory=dict)  # (repo, login)
    teams: dict[str, set[str]] = field(default_factory=dict)  # "org/slug" -> logins
    app: FakeApp | None = None
    reactions: list[tuple[str, int, str, str]] = field(default_factory=list)
    moved_branches: dict[tuple[str, str], str] = field(default_factory=dict)  # (repo, old) -> new


def extras(state: State) -> Extras:
    found = state.__dict__.get("github_extras")
    if found is None:
        found = state.__dict__["github_extras"] = Extras()
    assert isinstance(found, Extras)
    return found


def add_pull(
    state: State, repo: str, number: int, *, base: str = "main", head_sha: str
) -> dict[str, Any]:
    """A pull request as GitHub returns it (the recorded payload), with our numbers."""
    pull = copy.deepcopy(recorded("pull_request.synchronize")["pull_request"])
    pull.update(number=number, html_url=f"https://github.com/{repo}/pull/{number}")
    pull["base"]["ref"] = base
    pull["head"]["sha"] = head_sha
    state.repo(repo).pulls.append(pull)
    return pull


def rename_branch(state: State, repo: str, old: str, new: str) -> list[int]:
    """What renaming a branch on GitHub does: the ref moves, the old name redirects to the new
    one, the default branch follows, and every open PR based on it is retargeted. Returns the
    retargeted PRs' numbers (GitHub sends each a pull_request "edited" event)."""
    r = state.repo(repo)
    r.refs[new] = r.refs.pop(old)
    extras(state).moved_branches[(repo, old)] = new
    if r.default_branch == old:
        r.default_branch = new
    retargeted = []
    for pull in r.pulls:
        if pull["base"]["ref"] == old and pull["state"] == "open":
            pull["base"]["ref"] = new
            retargeted.append(int(pull["number"]))
    return retargeted


def _app_jwt(state: State, request: Request) -> FakeApp:
    app = extras(state).app
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    if app is None or scheme.lower() != "bearer":
        raise Fail(401, "A JSON web token could not be decoded")
    try:
        claims = jwt.decode(token, app.public_key_pem, algorithms=["RS256"])
    except jwt.PyJWTError as e:
        raise Fail(401, f"A JSON web token could not be decoded: {e}") from None
    if str(claims.get("iss")) != app.app_id:
        raise Fail(401, "'Issuer' claim ('iss') must be an Integer")
    if claims["exp"] - claims["iat"] > 600:
        raise Fail(401, "'Expiration time' claim ('exp') is too far in the future")
    return app


async def get_app(state: State, request: Request) -> tuple[int, Any, dict[str, str]]:
    app = _app_jwt(state, request)
    return 200, {"id": int(app.app_id), "slug": app.slug, "name": "rnx gate"}, {}


async def get_installation(state: State, request: Request) -> tuple[int, Any, dict[str, str]]:
    app = _app_jwt(state, request)
    repo = _repo_name(request)
    if repo not in app.installations:
        raise Fail(404, "Not Found")
    return 200, {"id": app.installations[repo], "app_id": int(app.app_id)}, {}


async def create_installation_token(
    state: State, request: Request
) -> tuple[int, Any, dict[str, str]]:
    app = _app_jwt(state, request)
    installation = int(request.path_params["installation_id"])
    if installation not in app.installations.values():
        raise Fail(404, "Not Found")
    token = "ghs_" + secrets.token_urlsafe(24)
    state.tokens[token] = Token(login=f"{app.slug}[bot]", is_app=True)
    app.issued.append((installation, token))
    expires = datetime.now(timezone.utc) + timedelta(seconds=app.token_lifetime_s)
    return (
        201,
        {"token": token, "expires_at": expires.strftime("%Y-%m-%dT%H:%M:%SZ"), "permissions": {}},
        {},
    )


async def get_permission(state: State, request: Request) -> tuple[int, Any, dict[str, str]]:
    _token(state, request)
    repo, login = _repo_name(request), request.path_params["username"]
    permission = extras(state).permissions.get((repo, login), "none")
    user = copy.deepcopy(recorded("issue_comment.created")["comment"]["user"])
    user["login"] = login
    role = {"admin": "admin", "maintain": "maintain", "write": "write"}.get(permission, "read")
    return 200, {"permission": permission, "role_name": role, "user": user}, {}


async def get_contents(state: State, request: Request) -> tuple[int, Any, dict[str, str]]:
    _token(state, request)
    repo = state.repos.get(_repo_name(request))
    path = request.path_params["path"]
    ref = request.query_params.get("ref") or (repo.default_branch if repo else "main")
    if repo is None or (ref, path) not in repo.files:
        raise Fail(404, "Not Found")
    text = repo.files[(ref, path)]
    return (
        200,
        {
            "type": "file",
            "encoding": "base64",
            "name": path.rsplit("/", 1)[-1],
            "path": path,
            "size": len(text.encode()),
            "content": base64.encodebytes(text.encode()).decode(),
        },
        {},
    )


async def get_membership(state: State, request: Request) -> tuple[int, Any, dict[str, str]]:
    _token(state, request)
    team = f"{request.path_params['org']}/{request.path_params['team_slug']}"
    if request.path_params["username"] not in extras(state).teams.get(team, set()):
        raise Fail(404, "Not Found")
    return 200, {"state": "active", "role": "member"}, {}


async def get_pull(state: State, request: Request) -> tuple[int, Any, dict[str, str]]:
    _token(state, request)
    repo = state.repos.get(_repo_name(request))
    number = int(request.path_params["number"])
    for pull in repo.pulls if repo else []:
        if pull["number"] == number:
            return 200, pull, {}
    raise Fail(404, "Not Found")


async def get_branch(state: State, request: Request) -> tuple[int, Any, dict[str, str]]:
    """GitHub's "Get a branch": the branch (200), a redirect for a renamed branch's old name
    (301, Location naming the new one), or 404. Like GitHub, a missing `master` also redirects
    to the default branch (github/rest-api-description#7096), renamed or not."""
    _token(state, request)
    name, branch = _repo_name(request), request.path_params["branch"]
    repo = state.repos.get(name)
    if repo is None:
        raise Fail(404, "Not Found")
    api = str(request.base_url).rstrip("/") + f"/repos/{name}/branches/"
    if branch in repo.refs:
        sha = repo.refs[branch]
        return (
            200,
            {
                "name": branch,
                "commit": {
                    "sha": sha,
                    "url": str(request.base_url).rstrip("/") + f"/repos/{name}/commits/{sha}",
                },
                "_links": {
                    "self": api + quote(branch, safe=""),
                    "html": f"https://github.com/{name}/tree/{branch}",
                },
                "protected": False,
                "protection": {
                    "enabled": False,
                    "required_status_checks": {
                        "enforcement_level": "off",
                        "contexts": [],
                        "checks": [],
                    },
                },
                "protection_url": api + quote(branch, safe="") + "/protection",
            },
            {},
        )
    moved = extras(state).moved_branches.get((name, branch))
    if moved is None and branch == "master":
        moved = repo.default_branch
    if moved is None:
        raise Fail(404, "Branch not found")
    location = api + quote(moved, safe="")
    return (
        301,
        {
            "message": "Moved Permanently",
            "url": location,
            "documentation_url": "https://docs.github.com/rest/guides/best-practices-for-using-the-rest-api#follow-redirects",
        },
        {"Location": location},
    )


async def create_reaction(state: State, request: Request) -> tuple[int, Any, dict[str, str]]:
    token = _token(state, request, write=True)
    content = (await request.json()).get("content")
    if content not in ("+1", "-1", "laugh", "confused", "heart", "hooray", "rocket", "eyes"):
        raise Fail(422, "Validation Failed: content is not included in the list")
    cid = int(request.path_params["comment_id"])
    extras(state).reactions.append((_repo_name(request), cid, content, token.login))
    return 201, {"id": next(state.ids), "content": content}, {}


ROUTES: list[tuple[str, str, Handler]] = [
    ("GET", "/app", get_app),
    ("GET", "/repos/{owner}/{repo}/installation", get_installation),
    ("POST", "/app/installations/{installation_id:int}/access_tokens", create_installation_token),
    ("GET", "/repos/{owner}/{repo}/collaborators/{username}/permission", get_permission),
    ("GET", "/repos/{owner}/{repo}/contents/{path:path}", get_contents),
    ("GET", "/orgs/{org}/teams/{team_slug}/memberships/{username}", get_membership),
    ("GET", "/repos/{owner}/{repo}/pulls/{number:int}", get_pull),
    ("GET", "/repos/{owner}/{repo}/branches/{branch:path}", get_branch),
    ("POST", "/repos/{owner}/{repo}/issues/comments/{comment_id:int}/reactions", create_reaction),
]

for _route in ROUTES:
    if _route not in fake_github.ROUTES:
        fake_github.ROUTES.append(_route)
