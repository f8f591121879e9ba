"""What the GitHub clients of the action and the server share: their error, the rules' reads."""

from __future__ import annotations

import base64

import httpx


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


class AcceptRuleReads:
    """The reads `rnx_github.accept_rules.decide_accept` makes, for a client whose `request` raises
    GitHubError: the same answers whether the action or the server asks."""

    def request(
        self, method: str, path: str, /, *, params: dict[str, str] | None = None
    ) -> httpx.Response:
        raise NotImplementedError

    def collaborator_permission(self, repository: str, user: str) -> str:
        try:
            r = self.request("GET", f"/repos/{repository}/collaborators/{user}/permission")
        except GitHubError as e:
            if e.status == 404:  # not a collaborator (or no such user)
                return "none"
            raise
        return str(r.json().get("permission") or "none")

    def file_text(self, repository: str, path: str, ref: str) -> str | None:
        try:
            r = self.request("GET", f"/repos/{repository}/contents/{path}", params={"ref": ref})
        except GitHubError as e:
            if e.status == 404:
                return None
            raise
        data = r.json()
        if not isinstance(data, dict) or data.get("type") != "file":
            return None
        if data.get("encoding") == "base64":
            return base64.b64decode(str(data.get("content", ""))).decode("utf-8", "replace")
        return str(data.get("content", ""))

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
