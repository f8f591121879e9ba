"""Report one job's parts to the pull request: the sticky comment (merged with other jobs') and
the commit status. Failures come back as warnings: GitHub writes never fail the build."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import httpx

from rnx.schema import Tier
from rnx_github.client import GitHubClient, GitHubError
from rnx_github.comment import (
    Combined,
    PartResult,
    combine,
    has_part,
    status_description,
    status_state,
    sticky_comments,
    worst,
)

# Where a user fixes a refused write: a fork's PR gets a read-only GITHUB_TOKEN.
REFUSED_WRITE_HINT = (
    " (a pull request from a fork gets a read-only token; see docs/action.md, "
    "'Pull requests from forks', or grant the permission in the workflow)"
)


def github_client(
    api_url: str, token: str, *, transport: httpx.BaseTransport | None = None
) -> GitHubClient:
    """The action's GitHub client, with the workflow's token."""
    return GitHubClient(
        api_url,
        token,
        transport=transport,
        user_agent="rnx-benchmark-action",
        refused_write_hint=REFUSED_WRITE_HINT,
    )


@dataclass
class Published:
    combined: Combined | None = None
    comment_id: int | None = None
    warnings: list[str] = field(default_factory=list)


def publish(
    gh: GitHubClient,
    *,
    repository: str,
    pr: int,
    sha: str,
    status_sha: str,
    parts: list[PartResult],
    mode: str,
    target_url: str | None,
    sleep: Callable[[float], None] = time.sleep,
    attempts: int = 3,
) -> Published:
    result = Published()
    try:
        author = gh.whoami()
        for attempt in range(attempts):
            comments = sticky_comments(gh, repository, pr, author=author)
            combined = combine([c.body for c in comments], parts, sha=sha)
            if comments:
                keep = comments[0]
                gh.update_comment(repository, keep.id, combined.body)
                # Two matrix jobs that both found no comment each created one: fold into the oldest.
                for extra in comments[1:]:
                    try:
                        gh.delete_comment(repository, extra.id)
                    except GitHubError as e:
                        if e.status != 404:
                            raise
                comment_id = keep.id
            else:
                comment_id = gh.create_comment(repository, pr, combined.body).id
            result.combined, result.comment_id = combined, comment_id
            # Another job may have written between our read and our write: check our parts
            # survived, else merge again (bounded; the last writer always has every part it saw).
            sleep(random.uniform(0.05, 0.3) if attempt == 0 else random.uniform(0.5, 1.5))
            now = sticky_comments(gh, repository, pr, author=author)
            if (
                len(now) == 1
                and all("key=" in now[0].body for _ in parts)
                and all(has_part(now[0].body, p) for p in parts)
            ):
                result.combined = combine([now[0].body], [], sha=sha)
                break
    except GitHubError as e:
        result.warnings.append(f"could not write the pull request comment: {e}")
    tier = result.combined.tier if result.combined else _worst_of(parts)
    reasons = [r for p in parts for r in p.reasons]
    unresolved = (
        result.combined.unresolved if result.combined else combine([], parts, sha=sha).unresolved
    )
    try:
        gh.set_status(
            repository,
            status_sha,
            state=status_state(tier, mode),
            description=status_description(tier, mode, reasons, unresolved=unresolved),
            target_url=target_url,
        )
    except GitHubError as e:
        result.warnings.append(f"could not set the commit status: {e}")
    return result


def _worst_of(parts: list[PartResult]) -> Tier:
    return worst([p.tier for p in parts])
