"""GitHub App mode: the server authenticates as a GitHub App and writes to pull requests itself.

An RS256 app JWT is exchanged for installation tokens (cached until shortly before they
expire); with them the server reads what the accept rules need and posts the sticky comment
and the commit status, so pull requests from forks (whose workflow token is read-only) get
their verdict too.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import quote, unquote, urlsplit

import httpx
import jwt

from rnx_github.reads import AcceptRuleReads, GitHubError, error_message
from rnx_github.writes import PullRequestWrites

DEFAULT_API_URL = "https://api.github.com"
# GitHub refuses app JWTs living longer than 10 minutes; backdate iat for clock drift.
APP_JWT_LIFETIME_S = 540
APP_JWT_BACKDATE_S = 60
# Renew an installation token this long before GitHub's expiry, never mid-request.
TOKEN_RENEW_MARGIN_S = 120
# Where a 301 for a branch points: .../repos/{owner}/{repo}/branches/{name} (or the
# /repositories/{id}/ form GitHub uses for moved repositories), with the name percent-encoded.
_BRANCH_LOCATION = re.compile(r"/(?:repos/[^/]+/[^/]+|repositories/\d+)/branches/(.+)$")


@dataclass(frozen=True)
class AppCredentials:
    app_id: str
    private_key_pem: str
    api_url: str = DEFAULT_API_URL


def app_jwt(credentials: AppCredentials, *, now: float | None = None) -> str:
    """The JWT that authenticates as the App itself (only to get installation tokens)."""
    t = int(time.time() if now is None else now)
    claims = {
        "iat": t - APP_JWT_BACKDATE_S,
        "exp": t + APP_JWT_LIFETIME_S,
        "iss": credentials.app_id,
    }
    return jwt.encode(claims, credentials.private_key_pem, algorithm="RS256")


def _check(response: httpx.Response, what: str) -> httpx.Response:
    if response.status_code >= 400:
        raise GitHubError(
            f"{what} answered {response.status_code}: {error_message(response)}",
            response.status_code,
        )
    return response


def _send(http: httpx.Client, method: str, url: str, headers: dict[str, str]) -> httpx.Response:
    try:
        response = http.request(method, url, headers=headers)
    except httpx.HTTPError as e:
        raise GitHubError(f"{method} {url} failed: {e or type(e).__name__}") from None
    return _check(response, f"{method} {url}")


class InstallationTokens:
    """Installation tokens by installation id, cached until shortly before they expire."""

    def __init__(
        self,
        credentials: AppCredentials,
        *,
        http: httpx.Client | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.credentials = credentials
        self._http = http or httpx.Client(timeout=15.0)
        self._clock = clock
        self._lock = threading.Lock()
        self._tokens: dict[int, tuple[str, float]] = {}
        self._installations: dict[str, int] = {}
        self.exchanges = 0

    def _app_headers(self) -> dict[str, str]:
        token = app_jwt(self.credentials, now=self._clock())
        return {**_HEADERS, "Authorization": f"Bearer {token}"}

    def installation_for(self, repository: str) -> int:
        """The App's installation on `repository` (uploads carry no installation id)."""
        with self._lock:
            found = self._installations.get(repository.lower())
        if found is not None:
            return found
        url = f"{self.credentials.api_url}/repos/{repository}/installation"
        r = _send(self._http, "GET", url, self._app_headers())
        installation_id = int(r.json()["id"])
        with self._lock:
            self._installations[repository.lower()] = installation_id
        return installation_id

    def token(self, installation_id: int) -> str:
        with self._lock:
            cached = self._tokens.get(installation_id)
            if cached is not None and cached[1] - TOKEN_RENEW_MARGIN_S > self._clock():
                return cached[0]
            url = f"{self.credentials.api_url}/app/installations/{installation_id}/access_tokens"
            r = _send(self._http, "POST", url, self._app_headers())
            body = r.json()
            expires_at = datetime.fromisoformat(str(body["expires_at"]).replace("Z", "+00:00"))
            self._tokens[installation_id] = (str(body["token"]), expires_at.timestamp())
            self.exchanges += 1
            return str(body["token"])


_HEADERS = {
    "Accept": "application/vnd.github+json",
    "X-GitHub-Api-Version": "2022-11-28",
    "User-Agent": "rnx-benchmark-gate-server",
}


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


def branch_of_location(location: str) -> str | None:
    """The branch a redirect's Location names, or None when it names none."""
    match = _BRANCH_LOCATION.search(urlsplit(location).path)
    return unquote(match.group(1)) if match else None


class GitHubClient(AcceptRuleReads, PullRequestWrites):
    """The REST calls the server makes, with a token from `token` (fetched per request so an
    installation token renews itself). Also answers the accept rules' questions, and writes
    the sticky comment and the commit status as the action does (rnx_github.writes)."""

    def __init__(
        self, api_url: str, token: Callable[[], str], *, http: httpx.Client | None = None
    ) -> None:
        self.api_url = api_url.rstrip("/")
        self._token = token
        self._http = http or httpx.Client(timeout=15.0)

    def request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        return _check(self._request(method, path, **kwargs), f"{method} {path}")

    def _request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        """The response whatever its status (errors getting a token or reaching GitHub raise)."""
        url = path if path.startswith("http") else f"{self.api_url}{path}"
        headers = {**_HEADERS, "Authorization": f"Bearer {self._token()}"}
        headers.update(kwargs.pop("headers", {}))
        try:
            return self._http.request(method, url, headers=headers, **kwargs)
        except httpx.HTTPError as e:
            raise GitHubError(f"{method} {path} failed: {e or type(e).__name__}") from None

    # ---- branches

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
        _check(r, f"GET {path}")
        if r.status_code != 200:
            raise GitHubError(f"GET {path} answered {r.status_code}", r.status_code)
        return BranchLookup("exists")

    # ---- pull requests, reactions (the rules' reads, comments, statuses: the mixins)

    def pull_request(self, repository: str, number: int) -> PullRequest:
        data = self.request("GET", f"/repos/{repository}/pulls/{number}").json()
        head_repo = (data.get("head") or {}).get("repo") or {}
        return PullRequest(
            number=int(data["number"]),
            base_ref=str(data["base"]["ref"]),
            head_sha=str(data["head"]["sha"]),
            head_repository=head_repo.get("full_name"),
        )

    def react(self, repository: str, comment_id: int, content: str = "+1") -> None:
        self.request(
            "POST",
            f"/repos/{repository}/issues/comments/{comment_id}/reactions",
            json={"content": content},
        )


class GitHubApp:
    """The App: credentials, its token cache, and a client per installation."""

    def __init__(
        self,
        credentials: AppCredentials,
        *,
        http: httpx.Client | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.credentials = credentials
        self._http = http or httpx.Client(timeout=15.0)
        self.tokens = InstallationTokens(credentials, http=self._http, clock=clock)
        self._bot_login: str | None = None

    def bot_login(self) -> str:
        """The login the App's comments carry ("<slug>[bot]"), to find its own comments."""
        if self._bot_login is None:
            url = f"{self.credentials.api_url}/app"
            r = _send(self._http, "GET", url, self.tokens._app_headers())
            self._bot_login = f"{r.json()['slug']}[bot]"
        return self._bot_login

    def client(
        self, *, installation_id: int | None = None, repository: str | None = None
    ) -> GitHubClient:
        if installation_id is None:
            if repository is None:
                raise ValueError("an installation id or a repository is needed")
            installation_id = self.tokens.installation_for(repository)
        iid = installation_id
        return GitHubClient(
            self.credentials.api_url, lambda: self.tokens.token(iid), http=self._http
        )

    def close(self) -> None:
        self._http.close()
