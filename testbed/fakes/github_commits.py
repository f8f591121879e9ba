"""GitHub's commit history and workflow dispatches for tests/fakes/fake_github.py: what
bisection uses. Importing this module mounts the routes into the fake's ROUTES table.

- GET /repos/{o}/{r}/compare/{base}...{head}: the commits after base up to head, oldest first
  (unpaged: the newest 250; with per_page/page: pages with a Link header), in the shape of
  GitHub's documented answer (tests/data/github-rest/compare.json)
- POST /repos/{o}/{r}/actions/workflows/{file}/dispatches: recorded (204), 422 for an unknown
  ref or an input the workflow does not declare, 404 for a workflow file that is not there
- GET /repos/{o}/{r}/commits/{sha}/pulls: the pull requests that brought a commit
- GET /repos/{o}/{r}/commits/{sha}: one commit with the files it changed (auto-sync)
- GET /repos/{o}/{r}/git/trees/{sha}?recursive=1: every file at a commit (auto-sync)

Answers follow the shapes of GitHub's REST reference (compare-commits, list pull requests
associated with a commit, get a commit, get a tree); pull requests and users are the recorded
webhook payload's objects.

`commit_files` plays git for auto-sync's tests: each commit is a snapshot of the files
(stored as the fake's files at ref=sha, which the contents endpoint serves) and the list of
paths it changed."""

from __future__ import annotations

import asyncio
import copy
import hashlib
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from starlette.requests import Request

from testbed.fakes import fake_github
from testbed.fakes.fake_github import Fail, Handler, State, _repo_name, _token
from testbed.fakes.github_endpoints import add_pull, rest_answer

WORKFLOWS = ".github/workflows/"


@dataclass
class Commits:
    history: dict[str, list[dict[str, str]]] = field(default_factory=dict)  # repo -> oldest first
    pulls: dict[tuple[str, str], int] = field(default_factory=dict)  # (repo, sha) -> PR number
    dispatches: list[dict[str, Any]] = field(default_factory=list)  # repo, workflow, ref, inputs
    changed: dict[tuple[str, str], dict[str, str]] = field(default_factory=dict)  # path -> status
    # While set, a dispatch is recorded and then not answered until it is cleared: the caller
    # sees a request GitHub took but no answer (a test kills the server then).
    hold: threading.Event = field(default_factory=threading.Event)
    # Plays the CI runner: called with each dispatch GitHub took (repo, workflow, ref, inputs),
    # on the fake's own loop, so it should hand the work to another thread and return.
    runner: Callable[[dict[str, Any]], None] | None = None


def commits(state: State) -> Commits:
    found = state.__dict__.get("github_commits")
    if found is None:
        found = state.__dict__["github_commits"] = Commits()
    assert isinstance(found, Commits)
    return found


def add_commits(
    state: State, repo: str, shas: list[str], *, author: str = "octocat", branch: str = "main"
) -> None:
    """Commits on `branch`, oldest first, each by `author` (its head moves to the last)."""
    history = commits(state).history.setdefault(repo, [])
    history += [{"sha": s, "author": author, "message": f"change {s[:7]}"} for s in shas]
    state.repo(repo).refs[branch] = shas[-1]


def commit_files(
    state: State,
    repo: str,
    sha: str,
    files: dict[str, str | None],
    *,
    branch: str = "main",
    author: str = "octocat",
) -> None:
    """A commit on `branch` whose tree is its parent's with `files` written (None: removed);
    its files are served at ref=sha by the contents endpoint and listed by the trees one."""
    history = commits(state).history.setdefault(repo, [])
    r = state.repo(repo)
    parent = history[-1]["sha"] if history else None
    tree = {p: t for (ref, p), t in r.files.items() if parent is not None and ref == parent}
    status = {}
    for path, text in files.items():
        status[path] = "removed" if text is None else "modified" if path in tree else "added"
        if text is None:
            tree.pop(path, None)
        else:
            tree[path] = text
    r.files.update({(sha, p): t for p, t in tree.items()})
    commits(state).changed[(repo, sha)] = status
    add_commits(state, repo, [sha], author=author, branch=branch)


def merged_by_pull(state: State, repo: str, sha: str, number: int) -> None:
    """`sha` came in with pull request `number` (merged)."""
    pull = add_pull(state, repo, number, head_sha=sha)
    pull.update(state="closed", merged_at="2026-12-01T10:00:00Z", merge_commit_sha=sha)
    commits(state).pulls[(repo, sha)] = number


def _commit(api: str, repo: str, c: dict[str, str], parent: str | None) -> dict[str, Any]:
    """A commit of compare's list: GitHub's documented one (tests/data/github-rest/compare.json)
    with this commit's sha, author, message, parent and links."""
    out: dict[str, Any] = copy.deepcopy(rest_answer("compare")["commits"][0])
    sha, web = c["sha"], f"https://github.com/{repo}"
    out.update(
        sha=sha,
        node_id="C_" + sha[:20],
        url=f"{api}/repos/{repo}/commits/{sha}",
        html_url=f"{web}/commit/{sha}",
        comments_url=f"{api}/repos/{repo}/commits/{sha}/comments",
        parents=[]
        if parent is None
        else [{"url": f"{api}/repos/{repo}/commits/{parent}", "sha": parent}],
    )
    detail = out["commit"]
    detail.update(message=c["message"], url=f"{api}/repos/{repo}/git/commits/{sha}")
    detail["tree"] = {"url": f"{api}/repos/{repo}/tree/{sha[::-1]}", "sha": sha[::-1]}
    for role in ("author", "committer"):
        detail[role].update(name=c["author"], email=f"{c['author']}@example.com")
        out[role].update(login=c["author"], url=f"{api}/users/{c['author']}")
    return out


UNPAGED = 250  # compare without per_page or page lists the newest 250 commits only
MAX_PER_PAGE = 100


async def compare(state: State, request: Request) -> tuple[int, Any, dict[str, str]]:
    """GitHub's "Compare two commits": the commits after base up to head, oldest first.
    Unpaged, at most the newest UNPAGED; with per_page or page, that page of them (oldest
    first) with a Link header, as GitHub's docs say."""
    _token(state, request)
    repo = _repo_name(request)
    base, sep, head = request.path_params["basehead"].partition("...")
    history = commits(state).history.get(repo, [])
    index = {c["sha"]: i for i, c in enumerate(history)}
    if not sep or base not in index or head not in index:
        raise Fail(404, "Not Found")
    between = history[index[base] + 1 : index[head] + 1]
    api = str(request.base_url).rstrip("/")
    q = request.query_params
    headers: dict[str, str] = {}
    if "per_page" in q or "page" in q:
        per_page = min(max(int(q.get("per_page", 30)), 1), MAX_PER_PAGE)
        page = max(int(q.get("page", 1)), 1)
        chunk = between[(page - 1) * per_page : page * per_page]
        last = max(1, -(-len(between) // per_page))
        link = f"{api}{request.url.path}?per_page={per_page}&page="
        rels = [f'<{link}{page + 1}>; rel="next"', f'<{link}{last}>; rel="last"']
        if page < last:
            headers["Link"] = ", ".join(rels)
    else:
        chunk = between[-UNPAGED:]
    answer = rest_answer("compare")
    base_commit = _commit(api, repo, history[index[base]], None)
    answer.update(
        url=f"{api}/repos/{repo}/compare/{base}...{head}",
        html_url=f"https://github.com/{repo}/compare/{base}...{head}",
        permalink_url=f"https://github.com/{repo}/compare/{base}...{head}",
        diff_url=f"https://github.com/{repo}/compare/{base}...{head}.diff",
        patch_url=f"https://github.com/{repo}/compare/{base}...{head}.patch",
        base_commit=base_commit,
        merge_base_commit=base_commit,
        status="ahead" if between else "identical",
        ahead_by=len(between),
        behind_by=0,
        total_commits=len(between),
        commits=[
            _commit(api, repo, c, history[index[c["sha"]] - 1]["sha"] if index[c["sha"]] else None)
            for c in chunk
        ],
        files=[],
    )
    return 200, answer, headers


async def dispatch(state: State, request: Request) -> tuple[int, Any, dict[str, str]]:
    _token(state, request, write=True)
    repo = state.repos.get(_repo_name(request))
    workflow = request.path_params["workflow"]
    data = await request.json()
    ref = data.get("ref")
    if repo is None or ref not in repo.refs:
        raise Fail(422, f"No ref found for: {ref}")
    text = repo.files.get((ref, WORKFLOWS + workflow))
    if text is None:
        raise Fail(404, "Not Found")
    for name in data.get("inputs") or {}:
        if f"      {name}:" not in text:
            raise Fail(422, f'Unexpected inputs provided: ["{name}"]')
    taken = {
        "repo": _repo_name(request),
        "workflow": workflow,
        "ref": ref,
        "inputs": data["inputs"],
    }
    commits(state).dispatches.append(taken)
    runner = commits(state).runner
    if runner is not None:
        runner(taken)
    while commits(state).hold.is_set():
        await asyncio.sleep(0.05)
    return 204, None, {}


async def commit_pulls(state: State, request: Request) -> tuple[int, Any, dict[str, str]]:
    _token(state, request)
    repo_name = _repo_name(request)
    number = commits(state).pulls.get((repo_name, request.path_params["sha"]))
    repo = state.repos.get(repo_name)
    found = [p for p in (repo.pulls if repo else []) if p["number"] == number]
    return 200, found, {}


async def get_commit(state: State, request: Request) -> tuple[int, Any, dict[str, str]]:
    """GitHub's "Get a commit": the commit with its stats and changed files."""
    _token(state, request)
    repo, sha = _repo_name(request), request.path_params["sha"]
    history = commits(state).history.get(repo, [])
    index = {c["sha"]: i for i, c in enumerate(history)}
    if sha not in index:
        raise Fail(422, f"No commit found for SHA: {sha}")
    api = str(request.base_url).rstrip("/")
    parent = history[index[sha] - 1]["sha"] if index[sha] else None
    found = _commit(api, repo, history[index[sha]], parent)
    changed = commits(state).changed.get((repo, sha), {})
    found["stats"] = {"total": len(changed), "additions": len(changed), "deletions": 0}
    found["files"] = [
        {
            "sha": sha[::-1],
            "filename": path,
            "status": status,
            "additions": 1,
            "deletions": 0,
            "changes": 1,
            "blob_url": f"https://github.com/{repo}/blob/{sha}/{path}",
            "raw_url": f"https://github.com/{repo}/raw/{sha}/{path}",
            "contents_url": f"{api}/repos/{repo}/contents/{path}?ref={sha}",
            "patch": "@@ -1 +1 @@",
        }
        for path, status in sorted(changed.items())
    ]
    return 200, found, {}


async def get_tree(state: State, request: Request) -> tuple[int, Any, dict[str, str]]:
    """GitHub's "Get a tree" with ?recursive=1: every entry at the commit, blobs only here."""
    _token(state, request)
    repo_name, sha = _repo_name(request), request.path_params["sha"]
    repo = state.repos.get(repo_name)
    paths = sorted(p for (ref, p) in (repo.files if repo else {}) if ref == sha)
    if not paths:
        raise Fail(404, "Not Found")
    api = str(request.base_url).rstrip("/")
    blobs = {p: hashlib.sha1(f"{sha}:{p}".encode()).hexdigest() for p in paths}
    tree = [
        {
            "path": p,
            "mode": "100644",
            "type": "blob",
            "sha": blobs[p],
            "size": len(repo.files[(sha, p)]) if repo else 0,
            "url": f"{api}/repos/{repo_name}/git/blobs/{blobs[p]}",
        }
        for p in paths
    ]
    return 200, {"sha": sha, "url": f"{api}/repos/{repo_name}/git/trees/{sha}",
                 "tree": tree, "truncated": False}, {}  # fmt: skip


ROUTES: list[tuple[str, str, Handler]] = [
    ("GET", "/repos/{owner}/{repo}/compare/{basehead:path}", compare),
    ("POST", "/repos/{owner}/{repo}/actions/workflows/{workflow}/dispatches", dispatch),
    ("GET", "/repos/{owner}/{repo}/commits/{sha}/pulls", commit_pulls),
    ("GET", "/repos/{owner}/{repo}/commits/{sha}", get_commit),
    ("GET", "/repos/{owner}/{repo}/git/trees/{sha}", get_tree),
]

fake_github.mount(ROUTES)
