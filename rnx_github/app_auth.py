"""GitHub App authentication: the server acts as a GitHub App and writes to pull requests itself.

An RS256 app JWT is exchanged for installation tokens (cached until shortly before they
expire); with them the server reads what the accept rules need and posts the sticky comment
and the commit status, so pull requests from forks (whose workflow token is read-only) get
their verdict too.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

import httpx
import jwt

from rnx_github.client import DEFAULT_API_URL, GitHubClient

# GitHub refuses app JWTs living longer than 10 minutes; backdate iat for clock drift.
APP_JWT_LIFETIME_S = 540
APP_JWT_BACKDATE_S = 60
# Renew an installation token this long before GitHub's expiry, never mid-request.
TOKEN_RENEW_MARGIN_S = 120
USER_AGENT = "rnx-benchmark-gate-server"


@dataclass(frozen=True)
class AppCredentials:
    app_id: str
    private_key_pem: str = field(repr=False)  # never in a traceback or a log line
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
        self.http = http or httpx.Client(timeout=15.0)
        self._clock = clock
        # Calls made as the App itself, with a fresh app JWT each.
        self.as_app = GitHubClient(
            credentials.api_url,
            lambda: app_jwt(credentials, now=self._clock()),
            http=self.http,
            user_agent=USER_AGENT,
        )
        self._lock = threading.Lock()
        self._tokens: dict[int, tuple[str, float]] = {}
        self._installations: dict[str, int] = {}
        self.exchanges = 0

    def installation_for(self, repository: str) -> int:
        """The App's installation on `repository` (uploads carry no installation id)."""
        with self._lock:
            found = self._installations.get(repository.lower())
        if found is not None:
            return found
        r = self.as_app.request("GET", f"/repos/{repository}/installation")
        installation_id = int(r.json()["id"])
        with self._lock:
            self._installations[repository.lower()] = installation_id
        return installation_id

    def token(self, installation_id: int) -> str:
        with self._lock:
            cached = self._tokens.get(installation_id)
            if cached is not None and cached[1] - TOKEN_RENEW_MARGIN_S > self._clock():
                return cached[0]
            path = f"/app/installations/{installation_id}/access_tokens"
            body = self.as_app.request("POST", path).json()
            expires_at = datetime.fromisoformat(str(body["expires_at"]).replace("Z", "+00:00"))
            self._tokens[installation_id] = (str(body["token"]), expires_at.timestamp())
            self.exchanges += 1
            return str(body["token"])


class GitHubApp(InstallationTokens):
    """The App: its installation tokens, its login, and a client per installation."""

    _bot_login: str | None = None

    def bot_login(self) -> str:
        """The login the App's comments carry ("<slug>[bot]"), to find its own comments."""
        if self._bot_login is None:
            slug = self.as_app.request("GET", "/app").json()["slug"]
            self._bot_login = f"{slug}[bot]"
        return self._bot_login

    def client(
        self, *, installation_id: int | None = None, repository: str | None = None
    ) -> GitHubClient:
        if installation_id is None:
            if repository is None:
                raise ValueError("an installation id or a repository is needed")
            installation_id = self.installation_for(repository)
        iid = installation_id
        return GitHubClient(
            self.credentials.api_url, lambda: self.token(iid), http=self.http, user_agent=USER_AGENT
        )

    def close(self) -> None:
        self.http.close()
