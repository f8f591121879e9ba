"""GitHub's REST API, as far as the action needs it: the sticky PR comment and the commit status.

Every write may fail (a fork's read-only token, a missing permission): callers get a
`GitHubError` with the reason and turn it into a warning, never a failed build.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import httpx

from action.report import COMMENT_MARKER
from rnx.github_reads import GitHubError

_NEXT_LINK = re.compile(r'<([^>]+)>;\s*rel="next"')
# The identity GitHub gives the workflow's own GITHUB_TOKEN; /user is not open to that token.
ACTIONS_BOT = "github-actions[bot]"


@dataclass(frozen=True)
class Comment:
    id: int
    body: str
    author: str


class GitHub:
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
            try:
                message = response.json().get("message", "")
            except (ValueError, AttributeError):
                message = response.text[:200]
            hint = ""
            if response.status_code in (403, 404) and method != "GET":
                hint = (
                    " (a pull request from a fork gets a read-only token; see docs/action.md, "
                    "'Pull requests from forks', or grant the permission in the workflow)"
                )
            raise GitHubError(
                f"{method} {url} answered {response.status_code}: {message}{hint}",
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

    # ---- sticky comment

    def our_comments(self, repo: str, pr: int, *, author: str) -> list[Comment]:
        """Every comment on the PR carrying our marker and written by us, oldest first.

        Paginated (a busy PR has hundreds of comments); someone else's comment that quotes
        the marker is never picked up, so we never try to edit what is not ours."""
        found: list[Comment] = []
        url: str | None = f"/repos/{repo}/issues/{pr}/comments?per_page=100"
        pages = 0
        while url and pages < 50:
            response = self.request("GET", url)
            pages += 1
            for c in response.json():
                body = c.get("body") or ""
                login = (c.get("user") or {}).get("login", "")
                if body.startswith(COMMENT_MARKER) and login == author:
                    found.append(Comment(id=int(c["id"]), body=body, author=login))
            link = _NEXT_LINK.search(response.headers.get("Link", ""))
            url = link.group(1) if link else None
        return found

    def create_comment(self, repo: str, pr: int, body: str) -> Comment:
        c = self.request("POST", f"/repos/{repo}/issues/{pr}/comments", json={"body": body}).json()
        return Comment(id=int(c["id"]), body=c.get("body", body), author=c["user"]["login"])

    def update_comment(self, repo: str, comment_id: int, body: str) -> None:
        self.request("PATCH", f"/repos/{repo}/issues/comments/{comment_id}", json={"body": body})

    def delete_comment(self, repo: str, comment_id: int) -> None:
        self.request("DELETE", f"/repos/{repo}/issues/comments/{comment_id}")

    # ---- commit status

    def set_status(
        self,
        repo: str,
        sha: str,
        *,
        state: str,
        description: str,
        target_url: str | None,
        context: str,
    ) -> None:
        payload: dict[str, Any] = {"state": state, "description": description, "context": context}
        if target_url:
            payload["target_url"] = target_url
        self.request("POST", f"/repos/{repo}/statuses/{sha}", json=payload)
