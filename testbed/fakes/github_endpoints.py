"""More of GitHub's REST API for tests/fakes/fake_github.py: accept rules and App mode.

What "/kernalin accept" and GitHub App mode use. Importing this module mounts the routes into
the fake's ROUTES table.

- the GitHub App: GET /app, GET /repos/{o}/{r}/installation, POST
  /app/installations/{id}/access_tokens (app JWTs are verified with the App's public key)
- the accept rules: collaborator permission, file contents (CODEOWNERS, and whether an
  accepted run's workload is the file at its commit), team membership
- pull requests (GET /repos/{o}/{r}/pulls/{n}) and comment reactions
- branches (GET /repos/{o}/{r}/branches/{branch}): 200, 301 for a renamed branch, 404
- signing in with GitHub (the web flow, served from the same host as the API here):
  GET /login/oauth/authorize answers as GitHub does once the person agrees (a redirect to
  redirect_uri with a one-time code and the state), POST /login/oauth/access_token exchanges
  the code for a user token (GitHub answers 200 with {"error": ...} for a bad one)

Answers are shaped like GitHub's (recorded payloads where GitHub sends objects)."""

from __future__ import annotations

import base64
import copy
import functools
import hashlib
import json
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any
from urllib.parse import parse_qs, quote, urlencode

import jwt
from starlette.requests import Request

from testbed.fakes import fake_github
from testbed.fakes.fake_github import (
    DATA,
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
    oauth_client: tuple[str, str] | None = None  # (client id, client secret) of the App
    oauth_user: str | None = None  # who agrees on the authorize page (None: they decline)
    oauth_codes: dict[str, tuple[str, str]] = field(default_factory=dict)  # code -> (login, uri)
    oauth_exchanges: list[str] = field(default_factory=list)  # the codes exchanged, in order


def private_pem(key: Any) -> str:
    """An RSA private key as the PEM text RNX_GITHUB_APP_PRIVATE_KEY holds."""
    from cryptography.hazmat.primitives import serialization

    return str(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ).decode()
    )


def install_app(
    state: State, key: Any, installations: dict[str, int], *, app_id: str = "314"
) -> FakeApp:
    """GitHub App `app_id` with `key`'s public half, installed on `installations` (repo -> id)."""
    from cryptography.hazmat.primitives import serialization

    public = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    app = FakeApp(app_id, public.decode(), installations=dict(installations))
    extras(state).app = app
    return app


@functools.cache
def app_key() -> Any:
    """The RSA key of the fake's GitHub App, made once per process (making one takes a while)."""
    from cryptography.hazmat.primitives.asymmetric import rsa

    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@contextmanager
def serve_with_app(
    installations: dict[str, int], *, app_id: str = "314"
) -> Iterator[tuple[str, State]]:
    """The GitHub fake on loopback, GitHub App `app_id` (app_key()) installed on `installations`:
    its URL and state."""
    with fake_github.serve() as (url, state):
        install_app(state, app_key(), installations, app_id=app_id)
        yield url, state


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


REST = DATA / "github-rest"
MAX_CONTENT_BYTES = 1024 * 1024  # GitHub sends a file's bytes up to 1 MB, none above


def rest_answer(name: str) -> dict[str, Any]:
    """A recorded answer of GitHub's REST API (tests/data/github-rest/README.md)."""
    data: dict[str, Any] = json.loads((REST / f"{name}.json").read_text())
    return data


def add_file(state: State, repo: str, ref: str, path: str, text: str) -> str:
    """A file at `path` in commit (or branch) `ref`; returns the SHA-256 of its bytes, what a
    results document of that workload carries as workload.sha256."""
    state.repo(repo).files[(ref, path)] = text
    return hashlib.sha256(text.encode()).hexdigest()


def add_kernalin_workflow(state: State, repo: str, action_ref: str = "a/b@v1") -> None:
    """The workflow `rnx init` writes, on `repo`'s main: what bisection and auto-sync dispatch."""
    from action.init import WORKFLOW

    workflow = WORKFLOW.format(branch="main", schedule="", action_note="", action_ref=action_ref)
    state.repo(repo).files[("main", ".github/workflows/kernalin.yml")] = workflow


def _entry(api: str, repo: str, ref: str, path: str, raw: bytes) -> dict[str, Any]:
    """The recorded file answer with this file's name, path, blob id, size and links."""
    blob = hashlib.sha1(b"blob %d\0" % len(raw) + raw).hexdigest()
    item = rest_answer("contents.file")
    self_url = f"{api}/repos/{repo}/contents/{quote(path)}?ref={quote(ref, safe='')}"
    git_url = f"{api}/repos/{repo}/git/blobs/{blob}"
    html_url = f"https://github.com/{repo}/blob/{quote(ref, safe='')}/{quote(path)}"
    item.update(
        name=path.rsplit("/", 1)[-1],
        path=path,
        sha=blob,
        size=len(raw),
        url=self_url,
        git_url=git_url,
        html_url=html_url,
        download_url=f"https://raw.githubusercontent.com/{repo}/{ref}/{quote(path)}",
        _links={"git": git_url, "self": self_url, "html": html_url},
    )
    return item


async def get_contents(state: State, request: Request) -> tuple[int, Any, dict[str, str]]:
    """GitHub's "Get repository content": a file (base64 in lines of 60, or no content over
    1 MB), a directory (an array of entries), or GitHub's 404 body."""
    _token(state, request)
    name = _repo_name(request)
    repo = state.repos.get(name)
    path = request.path_params["path"].strip("/")
    ref = request.query_params.get("ref") or (repo.default_branch if repo else "main")
    api = str(request.base_url).rstrip("/")
    files = {p: t.encode() for (r, p), t in (repo.files.items() if repo else []) if r == ref}
    if path in files:
        raw = files[path]
        item = _entry(api, name, ref, path, raw)
        if len(raw) > MAX_CONTENT_BYTES:
            item.update(encoding="none", content="")
        else:
            encoded = base64.b64encode(raw).decode()
            item.update(
                content="".join(encoded[i : i + 60] + "\n" for i in range(0, len(encoded), 60))
            )
        return 200, item, {}
    children = sorted({p[len(path) + 1 :].split("/")[0] for p in files if p.startswith(path + "/")})
    if children:
        return 200, [_listed(api, name, ref, f"{path}/{c}", files) for c in children], {}
    return 404, rest_answer("contents.not-found"), {}


def _listed(api: str, repo: str, ref: str, path: str, files: dict[str, bytes]) -> dict[str, Any]:
    """A directory listing's entry: a file or a directory, without content or encoding."""
    entry = _entry(api, repo, ref, path, files.get(path, b""))
    del entry["content"], entry["encoding"]
    if path not in files:
        entry.update(type="dir", size=0, download_url=None)
    return entry


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


async def oauth_authorize(state: State, request: Request) -> tuple[int, Any, dict[str, str]]:
    """The person's answer on GitHub's authorize page, played by extras(state).oauth_user."""
    found = extras(state)
    q = request.query_params
    if found.oauth_client is None or q.get("client_id") != found.oauth_client[0]:
        raise Fail(404, "Not Found")
    uri = q.get("redirect_uri", "")
    if found.oauth_user is None:
        query = urlencode({"error": "access_denied", "state": q.get("state", "")})
        return 302, None, {"Location": f"{uri}?{query}"}
    code = secrets.token_hex(10)
    found.oauth_codes[code] = (found.oauth_user, uri)
    return (
        302,
        None,
        {"Location": f"{uri}?{urlencode({'code': code, 'state': q.get('state', '')})}"},
    )


async def oauth_access_token(state: State, request: Request) -> tuple[int, Any, dict[str, str]]:
    found = extras(state)
    form = {k: v[0] for k, v in parse_qs((await request.body()).decode()).items()}
    if found.oauth_client is None or (form.get("client_id"), form.get("client_secret")) != (
        found.oauth_client
    ):
        return 200, {"error": "incorrect_client_credentials"}, {}
    code = form.get("code", "")
    found.oauth_exchanges.append(code)
    login, uri = found.oauth_codes.pop(code, (None, None))  # a code is good once
    if login is None:
        return 200, {"error": "bad_verification_code"}, {}
    if uri != form.get("redirect_uri"):
        return 200, {"error": "redirect_uri_mismatch"}, {}
    token = "ghu_" + secrets.token_urlsafe(24)
    state.tokens[token] = Token(login=login, can_write=False)
    return 200, {"access_token": token, "token_type": "bearer", "scope": ""}, {}


ROUTES: list[tuple[str, str, Handler]] = [
    ("GET", "/login/oauth/authorize", oauth_authorize),
    ("POST", "/login/oauth/access_token", oauth_access_token),
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

fake_github.mount(ROUTES)
