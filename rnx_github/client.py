"""The one GitHub REST client, for the action (the workflow's token) and the gate server (a
GitHub App's installation tokens): the reads the accept rules make, the sticky comment and the
commit status, pull requests, branches and reactions.

Every call GitHub refuses, or that cannot reach GitHub, raises `GitHubError` with the reason;
callers decide whether that is a warning (a report) or an answer (a command).
"""

from __future__ import annotations

import base64
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, unquote, urlsplit

import httpx

DEFAULT_API_URL = "https://api.github.com"
# The identity GitHub gives the workflow's own GITHUB_TOKEN; /user is not open to that token.
ACTIONS_BOT = "github-actions[bot]"
STATUS_CONTEXT = "rnx-benchmark"
_NEXT_LINK = re.compile(r'<([^>]+)>;\s*rel="next"')
COMPARE_PAGES = 100  # compare-commits pages of 100 read at most: ranges up to 10,000 commits
# Where a 301 for a branch points: .../repos/{owner}/{repo}/branches/{name} (or the
# /repositories/{id}/ form GitHub uses for moved repositories), with the name percent-encoded.
_BRANCH_LOCATION = re.compile(r"/(?:repos/[^/]+/[^/]+|repositories/\d+)/branches/(.+)$")
_HEADERS = {
    "Accept": "application/vnd.github+json",
    "X-GitHub-Api-Version": "2022-11-28",
}


class GitHubError(Exception):
    """A GitHub call failed; `status` is GitHub's HTTP status when it answered at all."""

    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        self.status = status


def error_message(response: httpx.Response) -> str:
    """What GitHub says of a refused request (its JSON `message`), else the body's start."""
    try:
        return str(response.json().get("message", ""))
    except (ValueError, AttributeError):
        return response.text[:200]


@dataclass(frozen=True)
class Comment:
    id: int
    body: str
    author: str


@dataclass(frozen=True)
class PullRequest:
    number: int
    base_ref: str
    head_sha: str
    head_repository: str | None  # differs from the base repository for a fork


@dataclass(frozen=True)
class BranchLookup:
    """What GitHub says of a branch name: it "exists", was "moved" (301, `to` names where,
    None when the redirect names no branch), or is "missing" (404)."""

    state: str
    to: str | None = None


@dataclass(frozen=True)
class RepositoryPath:
    """What GitHub's contents API says is at a path at a commit: its `kind` ("file", "dir",
    "symlink" or "submodule"; a symlink to a file in the repository reads as that file), and
    a file's bytes when GitHub sends them (`content` is None for files over 1 MB, which GitHub
    answers with encoding "none")."""

    kind: str
    content: bytes | None = None


@dataclass(frozen=True)
class Commit:
    """A commit as compare-commits lists it: its sha, author (GitHub login, else the name in
    the commit) and the first line of its message."""

    sha: str
    author: str | None
    message: str


def branch_of_location(location: str) -> str | None:
    """The branch a redirect's Location names, or None when it names none."""
    match = _BRANCH_LOCATION.search(urlsplit(location).path)
    return unquote(match.group(1)) if match else None


class GitHubClient:
    """GitHub's REST API with one token. `token` is a string, or a function asked before each
    request (an installation token renews itself). `refused_write_hint` is added to the error
    of a refused write (403/404 on anything but GET): where the caller's user can fix it."""

    def __init__(
        self,
        api_url: str,
        token: str | Callable[[], str],
        *,
        http: httpx.Client | None = None,
        transport: httpx.BaseTransport | None = None,
        timeout: float = 15.0,
        user_agent: str = "rnx-benchmark",
        refused_write_hint: str = "",
    ) -> None:
        self.api_url = api_url.rstrip("/")
        self._token = token if callable(token) else (lambda: token)
        self._owns_http = http is None
        self._http = http or httpx.Client(timeout=timeout, transport=transport)
        self._headers = {**_HEADERS, "User-Agent": user_agent}
        self._refused_write_hint = refused_write_hint

    def close(self) -> None:
        if self._owns_http:
            self._http.close()

    def __enter__(self) -> GitHubClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        """The response to a call GitHub accepted; GitHubError for anything else."""
        response = self._request(method, path, **kwargs)
        if response.status_code >= 400:
            hint = ""
            if response.status_code in (403, 404) and method != "GET":
                hint = self._refused_write_hint
            raise GitHubError(
                f"{method} {path} answered {response.status_code}: {error_message(response)}{hint}",
                response.status_code,
            )
        return response

    def _request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        """The response whatever its status (errors getting a token or reaching GitHub raise)."""
        url = path if path.startswith("http") else f"{self.api_url}{path}"
        headers = {**self._headers, "Authorization": f"Bearer {self._token()}"}
        headers.update(kwargs.pop("headers", {}))
        try:
            return self._http.request(method, url, headers=headers, **kwargs)
        except httpx.HTTPError as e:
            raise GitHubError(f"{method} {path} failed: {e or type(e).__name__}") from None

    # ---- identity

    def whoami(self) -> str:
        """The login the token writes as. The workflow's GITHUB_TOKEN cannot read /user: it
        writes as the Actions bot. (An App's login comes from rnx_github.app_auth.)"""
        try:
            login = self.request("GET", "/user").json().get("login")
        except GitHubError:
            return ACTIONS_BOT
        return str(login) if login else ACTIONS_BOT

    # ---- what the accept rules ask (rnx_github.accept_rules.GitHubReader)

    def collaborator_permission(self, repository: str, user: str) -> str:
        try:
            r = self.request("GET", f"/repos/{repository}/collaborators/{user}/permission")
        except GitHubError as e:
            if e.status == 404:  # not a collaborator (or no such user)
                return "none"
            raise
        return str(r.json().get("permission") or "none")

    def file_text(self, repository: str, path: str, ref: str) -> str | None:
        found = self.path_at(repository, path, ref)
        if found is None or found.kind != "file" or found.content is None:
            return None
        return found.content.decode("utf-8", "replace")

    def path_at(self, repository: str, path: str, ref: str) -> RepositoryPath | None:
        """GET /repos/{repository}/contents/{path}?ref={ref}: what is at `path` at commit (or
        branch) `ref`, or None when nothing is (GitHub's 404)."""
        url = f"/repos/{repository}/contents/{quote(path, safe='/')}"
        try:
            data = self.request("GET", url, params={"ref": ref}).json()
        except GitHubError as e:
            if e.status == 404:
                return None
            raise
        except ValueError:
            raise GitHubError(f"GET {url} answered with a body that is not JSON") from None
        if isinstance(data, list):  # a directory: one entry per item in it
            return RepositoryPath("dir")
        if not isinstance(data, dict):
            raise GitHubError(f"GET {url} answered with an unexpected body")
        kind = str(data.get("type") or "")
        content = None
        if kind == "file" and data.get("encoding") == "base64":
            try:
                content = base64.b64decode(str(data.get("content", "")))
            except ValueError:
                raise GitHubError(f"GET {url} answered with content that is not base64") from None
        return RepositoryPath(kind, content)

    def is_team_member(self, org: str, team_slug: str, user: str) -> bool:
        # The workflow's GITHUB_TOKEN cannot read an organisation's teams: then a team in
        # CODEOWNERS does not count (write permission still does). See docs/accept.md.
        try:
            r = self.request("GET", f"/orgs/{org}/teams/{team_slug}/memberships/{user}")
        except GitHubError as e:
            if e.status in (403, 404):  # not a member, or the token may not see the team
                return False
            raise
        return r.json().get("state") == "active"

    # ---- pull requests, branches, reactions

    def pull_request(self, repository: str, number: int) -> PullRequest:
        data = self.request("GET", f"/repos/{repository}/pulls/{number}").json()
        head_repo = (data.get("head") or {}).get("repo") or {}
        return PullRequest(
            number=int(data["number"]),
            base_ref=str(data["base"]["ref"]),
            head_sha=str(data["head"]["sha"]),
            head_repository=head_repo.get("full_name"),
        )

    def branch(self, repository: str, name: str) -> BranchLookup:
        """GET /repos/{repository}/branches/{name}, redirects not followed: GitHub answers a
        renamed branch's old name with 301 and a Location naming the new one.

        Beware that GitHub also redirects a name that is no branch, `master` at least, to the
        default branch (github/rest-api-description#7096): a 301 alone is not a rename."""
        path = f"/repos/{repository}/branches/{quote(name, safe='')}"
        # Only this request's own 404 means "no such branch"; a 404 while getting the App's
        # installation token is an error like any other.
        r = self._request("GET", path, follow_redirects=False)
        if r.status_code == 404:
            return BranchLookup("missing")
        if r.status_code in (301, 302, 307, 308):
            return BranchLookup("moved", branch_of_location(r.headers.get("location", "")))
        if r.status_code != 200:
            raise GitHubError(
                f"GET {path} answered {r.status_code}: {error_message(r)}", r.status_code
            )
        return BranchLookup("exists")

    def react(self, repository: str, comment_id: int, content: str = "+1") -> None:
        self.request(
            "POST",
            f"/repos/{repository}/issues/comments/{comment_id}/reactions",
            json={"content": content},
        )

    # ---- comments and the commit status

    def comments(self, repository: str, pr: int) -> list[Comment]:
        """The PR's comments, oldest first, all pages (a busy PR has hundreds; at most 50
        pages are read)."""
        found: list[Comment] = []
        url: str | None = f"/repos/{repository}/issues/{pr}/comments?per_page=100"
        pages = 0
        while url and pages < 50:
            response = self.request("GET", url)
            pages += 1
            for c in response.json():
                body = str(c.get("body") or "")
                login = str((c.get("user") or {}).get("login", ""))
                found.append(Comment(id=int(c["id"]), body=body, author=login))
            link = _NEXT_LINK.search(response.headers.get("Link", ""))
            url = link.group(1) if link else None
        return found

    def create_comment(self, repository: str, pr: int, body: str) -> Comment:
        c = self.request(
            "POST", f"/repos/{repository}/issues/{pr}/comments", json={"body": body}
        ).json()
        login = str((c.get("user") or {}).get("login", ""))
        return Comment(id=int(c["id"]), body=str(c.get("body", body)), author=login)

    def update_comment(self, repository: str, comment_id: int, body: str) -> None:
        self.request(
            "PATCH", f"/repos/{repository}/issues/comments/{comment_id}", json={"body": body}
        )

    def delete_comment(self, repository: str, comment_id: int) -> None:
        self.request("DELETE", f"/repos/{repository}/issues/comments/{comment_id}")

    def set_status(
        self, repository: str, sha: str, *, state: str, description: str, target_url: str | None
    ) -> None:
        payload: dict[str, Any] = {
            "state": state,
            "description": description[:140],  # all GitHub keeps
            "context": STATUS_CONTEXT,
        }
        if target_url:
            payload["target_url"] = target_url
        self.request("POST", f"/repos/{repository}/statuses/{sha}", json=payload)

    # ---- bisection: the commits of a range, dispatching the benchmark workflow

    def compare_commits(self, repository: str, base: str, head: str) -> list[Commit]:
        """GET /repos/{repository}/compare/{base}...{head}: the commits after `base` up to
        and including `head`, oldest first. Read page by page: unpaged, GitHub lists only 250
        commits (the newest), so a longer range would lose its oldest. A range of more than
        COMPARE_PAGES pages of 100 is refused (GitHubError) rather than listed in part."""
        path = f"/repos/{repository}/compare/{quote(base, safe='')}...{quote(head, safe='')}"
        url: str | None = f"{path}?per_page=100"
        found: list[Commit] = []
        for _ in range(COMPARE_PAGES):
            response = self.request("GET", url or path)
            for c in response.json().get("commits") or []:
                login = (c.get("author") or {}).get("login")
                name = ((c.get("commit") or {}).get("author") or {}).get("name")
                message = str((c.get("commit") or {}).get("message") or "")
                found.append(Commit(str(c["sha"]), login or name, message.splitlines()[0][:200]))
            link = _NEXT_LINK.search(response.headers.get("Link", ""))
            url = link.group(1) if link else None
            if url is None:
                return found
        raise GitHubError(
            f"{base[:12]}...{head[:12]} in {repository} holds more than "
            f"{COMPARE_PAGES * 100} commits: too many to list"
        )

    def dispatch_workflow(
        self, repository: str, workflow: str, *, ref: str, inputs: dict[str, str]
    ) -> None:
        """POST /repos/{repository}/actions/workflows/{workflow}/dispatches: run the workflow
        file `workflow` on branch `ref` with `inputs` (GitHub answers 204)."""
        self.request(
            "POST",
            f"/repos/{repository}/actions/workflows/{quote(workflow, safe='')}/dispatches",
            json={"ref": ref, "inputs": inputs},
        )

    # ---- auto-sync: which files a commit touched, and the repository's files at a commit

    def commit_files(self, repository: str, sha: str) -> list[str]:
        """GET /repos/{repository}/commits/{sha}: the paths the commit added, changed or
        removed (a rename counts under both names). GitHub lists at most 300 files per page
        and 3000 in all; the first page is read (a commit touching more is all-touching)."""
        data = self.request(
            "GET", f"/repos/{repository}/commits/{quote(sha, safe='')}", params={"per_page": 300}
        ).json()
        paths = []
        for f in data.get("files") or []:
            paths += [str(f["filename"])] + (
                [str(f["previous_filename"])] if f.get("previous_filename") else []
            )
        return paths

    def tree_paths(self, repository: str, sha: str) -> tuple[set[str], bool]:
        """GET /repos/{repository}/git/trees/{sha}?recursive=1: every file's path at the
        commit, and whether GitHub cut the list (it lists at most 100,000 entries)."""
        data = self.request(
            "GET", f"/repos/{repository}/git/trees/{quote(sha, safe='')}", params={"recursive": "1"}
        ).json()
        paths = {str(e["path"]) for e in data.get("tree") or [] if e.get("type") == "blob"}
        return paths, bool(data.get("truncated"))

    def commit_pull_request(self, repository: str, sha: str) -> int | None:
        """GET /repos/{repository}/commits/{sha}/pulls: the merged pull request that brought
        the commit, or None."""
        pulls = self.request("GET", f"/repos/{repository}/commits/{sha}/pulls").json()
        merged = [p for p in pulls if p.get("merged_at")] or pulls
        return int(merged[0]["number"]) if merged else None
