"""The "/kernalin accept <reason>" command: parsing it, and who may accept (one set of rules).

Both ways to accept (the server's webhook and the action's accept mode) call
`parse_comment` and `decide_accept`; only the GitHub client they pass in differs.

Pure standard library: the action imports this module without the server's dependencies.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from rnx_github.codeowners import CODEOWNERS_LOCATIONS, owners_of, parse_codeowners

if TYPE_CHECKING:  # the client needs httpx; this module stays standard library at run time
    from rnx_github.client import RepositoryPath

COMMAND = "/kernalin"
USAGE = "`/kernalin accept <reason>`"
MAX_REASON_CHARS = 500
# GitHub's collaborator permission endpoint answers admin, maintain, write, triage, read or none.
WRITE_PERMISSIONS = frozenset({"admin", "maintain", "write"})

_COMMAND_LINE = re.compile(r"^/kernalin(?:\s+(?P<rest>.*))?$", re.IGNORECASE)


@dataclass(frozen=True)
class AcceptCommand:
    reason: str


@dataclass(frozen=True)
class MalformedCommand:
    """A comment addressed to us that we cannot act on; `problem` is the reply's text."""

    problem: str


Command = AcceptCommand | MalformedCommand


def parse_comment(body: str | None) -> Command | None:
    """The command in a comment, or None when the comment is not addressed to us.

    Only a line that starts with /kernalin counts, outside code fences: a quoted reply
    ("> /kernalin accept ...") or an example in a code block is not a command.
    """
    in_fence = False
    for raw in (body or "").splitlines():
        line = raw.strip()
        if line.startswith("```") or line.startswith("~~~"):
            in_fence = not in_fence
            continue
        if in_fence:
            continue
        m = _COMMAND_LINE.match(line)
        if m is None:
            continue
        words = (m.group("rest") or "").split(maxsplit=1)
        if not words:
            return MalformedCommand(f"a command is missing: write {USAGE}.")
        verb = words[0].lower()
        if verb != "accept":
            return MalformedCommand(f"unknown command `{_shorten(words[0], 40)}`: write {USAGE}.")
        reason = " ".join(words[1].split()) if len(words) > 1 else ""
        if not reason:
            return MalformedCommand(f"a reason is required: write {USAGE}.")
        if any(ord(c) < 32 or ord(c) == 127 for c in reason):
            return MalformedCommand("the reason holds control characters; write it as plain text.")
        if len(reason) > MAX_REASON_CHARS:
            return MalformedCommand(
                f"the reason is {len(reason)} characters long; keep it under {MAX_REASON_CHARS}."
            )
        return AcceptCommand(reason)
    return None


def _shorten(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


# ---- The event: what both ways read from an issue_comment payload.


@dataclass(frozen=True)
class PullRequestComment:
    repository: str  # owner/name as GitHub spells it now
    repository_id: int
    pr_number: int
    user: str
    user_type: str  # "User" or "Bot"
    body: str
    comment_id: int
    installation_id: int | None


def pull_request_comment(event_name: str, payload: Mapping[str, Any]) -> PullRequestComment | None:
    """The newly written PR comment in an event, or None for anything else.

    Comments on issues (no issue.pull_request), edits and deletions are not commands.
    """
    if event_name != "issue_comment" or payload.get("action") != "created":
        return None
    issue = payload.get("issue") or {}
    comment = payload.get("comment") or {}
    repo = payload.get("repository") or {}
    if not isinstance(issue, Mapping) or not issue.get("pull_request"):
        return None
    try:
        user = comment["user"]
        installation = payload.get("installation") or {}
        return PullRequestComment(
            repository=str(repo["full_name"]),
            repository_id=int(repo["id"]),
            pr_number=int(issue["number"]),
            user=str(user["login"]),
            user_type=str(user.get("type") or "User"),
            body=str(comment.get("body") or ""),
            comment_id=int(comment["id"]),
            installation_id=int(installation["id"]) if installation.get("id") else None,
        )
    except (KeyError, TypeError, ValueError):
        return None


# ---- Who may accept.


class GitHubReader(Protocol):
    """The three questions the rules ask GitHub; each way answers them with its own token."""

    def collaborator_permission(self, repository: str, user: str) -> str:
        """GitHub's permission for `user` on `repository` ("none" when not a collaborator)."""
        ...

    def file_text(self, repository: str, path: str, ref: str) -> str | None:
        """A file's text at `ref`, or None when it does not exist."""
        ...

    def is_team_member(self, org: str, team_slug: str, user: str) -> bool: ...


@dataclass(frozen=True)
class Decision:
    allowed: bool
    why: str


def decide_accept(
    github: GitHubReader,
    *,
    repository: str,
    base_ref: str,
    user: str,
    workloads: Iterable[str],
) -> Decision:
    """May `user` accept the runs of these workloads? Write/admin, or a code owner of every one.

    CODEOWNERS is read from the base branch, never from the PR, so a PR cannot make its
    author an owner. author_association is never consulted: it is not a permission.
    """
    permission = github.collaborator_permission(repository, user)
    if permission in WRITE_PERMISSIONS:
        return Decision(True, f"@{user} has {permission} permission on {repository}")
    paths = sorted(set(workloads))
    if not paths:
        return Decision(False, f"@{user} needs write permission on {repository} to accept")
    text, location = _codeowners_text(github, repository, base_ref)
    if text is None:
        return Decision(
            False,
            f"@{user} has no write permission on {repository}, and there is no CODEOWNERS "
            f"file on {base_ref}",
        )
    rules = parse_codeowners(text)
    not_owned = [p for p in paths if not _owns(github, user, owners_of(rules, p) or ())]
    if not_owned:
        return Decision(
            False,
            f"@{user} has no write permission on {repository} and is not a code owner of "
            f"{', '.join(not_owned)} ({location} on {base_ref})",
        )
    return Decision(True, f"@{user} is a code owner of {', '.join(paths)} ({location})")


def _codeowners_text(github: GitHubReader, repository: str, ref: str) -> tuple[str | None, str]:
    for location in CODEOWNERS_LOCATIONS:
        text = github.file_text(repository, location, ref)
        if text is not None:
            return text, location
    return None, ""


def _owns(github: GitHubReader, user: str, owners: Iterable[str]) -> bool:
    for owner in owners:
        if not owner.startswith("@"):
            continue  # an e-mail address cannot be tied to a login reliably
        name = owner[1:]
        if "/" in name:
            org, team = name.split("/", 1)
            if github.is_team_member(org, team, user):
                return True
        elif name.lower() == user.lower():
            return True
    return False


# ---- Is the accepted run's workload the file it claims to be?


class ContentsReader(Protocol):
    def path_at(self, repository: str, path: str, ref: str) -> RepositoryPath | None:
        """What is at `path` at commit `ref` (GitHub's contents API), None when nothing is."""
        ...


def workload_problem(
    github: ContentsReader,
    *,
    repository: str,
    sha: str,
    path: str,
    sha256: str | None,
) -> str | None:
    """Why a run's workload is not the file it names, or None when it is.

    The path comes from the uploaded document, so an uploader could name a file that someone
    else owns (CODEOWNERS) to have an accept of a slow kernel pass as that file's. GitHub says
    what is at `path` at the run's commit: it must be a file, and when GitHub sends its bytes
    (files up to 1 MB), their SHA-256 must be the document's workload.sha256.
    """
    where = f"{path} at commit {sha[:12]}"
    found = github.path_at(repository, path, sha)
    if found is None:
        return f"{path} does not exist at commit {sha[:12]}, the commit the run measured"
    if found.kind != "file":
        return f"{where} is a {found.kind or 'path'}, not a workload file"
    if found.content is not None and sha256 is not None:
        actual = hashlib.sha256(found.content).hexdigest()
        if actual != sha256.lower():
            return (
                f"{where} is not the workload the run measured (its SHA-256 is "
                f"{actual[:12]}…, the run's workload.sha256 {sha256[:12]}…); if the base "
                f"branch changed {path} since the pull request branched, merge or rebase it "
                f"and let the job run again"
            )
    return None
