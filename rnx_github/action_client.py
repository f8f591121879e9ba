"""GitHub's REST API, as far as the action needs it: the sticky PR comment and the commit status
(written as the server writes them: rnx_github.writes), with the workflow's token.

Every write may fail (a fork's read-only token, a missing permission): callers get a
`GitHubError` with the reason and turn it into a warning, never a failed build.
"""

from __future__ import annotations

from typing import Any

import httpx

from rnx_github.reads import GitHubError, error_message
from rnx_github.writes import PullRequestWrites

# The identity GitHub gives the workflow's own GITHUB_TOKEN; /user is not open to that token.
ACTIONS_BOT = "github-actions[bot]"


class GitHub(PullRequestWrites):
    """The action's client, with the workflow's token; a refused write says how to allow it."""

    def __init__(
        self,
        api_url: str,
        token: str,
        *,
        timeout: float = 15.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.api_url = api_url.rstrip("/")
        self._client = httpx.Client(
            base_url=self.api_url,
            timeout=timeout,
            transport=transport,
            headers={
                "Authorization": f"Bearer {token}",
                "Accept": "application/vnd.github+json",
                "X-GitHub-Api-Version": "2022-11-28",
                "User-Agent": "rnx-benchmark-action",
            },
        )

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> GitHub:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def request(self, method: str, url: str, **kwargs: Any) -> httpx.Response:
        try:
            response = self._client.request(method, url, **kwargs)
        except httpx.HTTPError as e:
            raise GitHubError(f"{method} {url} failed: {e or type(e).__name__}") from None
        if response.status_code >= 400:
            hint = ""
            if response.status_code in (403, 404) and method != "GET":
                hint = (
                    " (a pull request from a fork gets a read-only token; see docs/action.md, "
                    "'Pull requests from forks', or grant the permission in the workflow)"
                )
            raise GitHubError(
                f"{method} {url} answered {response.status_code}: {error_message(response)}{hint}",
                response.status_code,
            )
        return response

    # ---- identity

    def whoami(self) -> str:
        """The login the token writes as; GITHUB_TOKEN cannot read /user, and is the Actions bot."""
        try:
            login = self.request("GET", "/user").json().get("login")
        except GitHubError:
            return ACTIONS_BOT
        return str(login) if login else ACTIONS_BOT

    # ---- sticky comment: the rest is shared with the server (rnx_github.writes)

    def delete_comment(self, repo: str, comment_id: int) -> None:
        self.request("DELETE", f"/repos/{repo}/issues/comments/{comment_id}")
