"""What the action and the server write to a pull request alike: the sticky comment and the
commit status. Each client brings its own `request` (its token, its errors); the calls are one."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx

# The hidden first line of the sticky comment. The action and the server share it, so a reader
# knows either comment for what it is; each writer only ever edits comments it wrote itself.
COMMENT_MARKER = "<!-- rnx-benchmark:sticky -->"
STATUS_CONTEXT = "rnx-benchmark"
_NEXT_LINK = re.compile(r'<([^>]+)>;\s*rel="next"')


@dataclass(frozen=True)
class Comment:
    id: int
    body: str
    author: str


class PullRequestWrites:
    """The sticky comment and the commit status, for a client whose `request` raises
    GitHubError (rnx_github.reads) when GitHub fails or refuses."""

    def request(self, method: str, path: str, /, *, json: Any = None) -> httpx.Response:
        raise NotImplementedError

    def our_comments(self, repository: str, pr: int, *, author: str) -> list[Comment]:
        """Every comment on the PR carrying our marker and written by `author`, oldest first.

        All pages; someone else's comment that quotes the marker is never picked up, so we
        never try to edit what is not ours."""
        found: list[Comment] = []
        url: str | None = f"/repos/{repository}/issues/{pr}/comments?per_page=100"
        pages = 0
        while url and pages < 50:  # a busy PR has hundreds of comments; stop somewhere
            response = self.request("GET", url)
            pages += 1
            for c in response.json():
                body = str(c.get("body") or "")
                login = str((c.get("user") or {}).get("login", ""))
                if body.startswith(COMMENT_MARKER) and login == author:
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

    def write_sticky(
        self, repository: str, pr: int, *, author: str, body: Callable[[str | None], str]
    ) -> int:
        """Update our oldest sticky comment in place, or create one; the comment's id.

        `body` gets the comment's present text (None when there is none yet)."""
        ours = self.our_comments(repository, pr, author=author)
        if ours:
            self.update_comment(repository, ours[0].id, body(ours[0].body))
            return ours[0].id
        return self.create_comment(repository, pr, body(None)).id

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
