"""A pull request's latest runs, accepting them, and how they read in a comment and a status.

Used by the webhook ("/kernalin accept" on the server) and by App mode (the server posting
a PR's verdict itself).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from gate_server.db import Database
from gate_server.db.runs import RunRecord
from gate_server.domain.accepts import accept_run
from rnx.schema import ConfigComparison, Inconclusive, Tier
from rnx_github.client import GitHubClient, GitHubError
from rnx_github.comment import (
    Acceptance,
    PartResult,
    accepted_line,
    combine,
    status_description,
    status_state,
    tier_of,
    worst,
    write_sticky,
)


@dataclass(frozen=True)
class PullRun:
    record: RunRecord

    @property
    def workload(self) -> str:
        return self.record.workload

    @property
    def tier(self) -> str:
        # An accepted run is the new normal: it passes whatever it measured.
        return "PASS" if self.record.accepted_at is not None else self.record.tier


def latest_runs(records: Sequence[RunRecord], head_sha: str | None) -> list[PullRun]:
    """The newest run per (environment, workload) of the PR's head commit.

    `records` come newest first. Without `head_sha`, the commit of the newest run counts."""
    if not records:
        return []
    sha = (head_sha or records[0].sha).lower()
    chosen: dict[tuple[str, str], PullRun] = {}
    for record in records:
        if record.sha.lower() != sha:
            continue
        chosen.setdefault((record.environment_key, record.workload), PullRun(record))
    return sorted(chosen.values(), key=lambda r: (r.workload, r.record.environment_key))


def accept_runs(
    database: Database, runs: Sequence[PullRun], *, user: str, reason: str, via: str
) -> list[dict[str, Any]]:
    """Each run becomes the baseline for its base branch, environment and workload (audited
    there)."""
    return [
        accept_run(database, r.record.run_id, actor=f"github:{user}", reason=reason, via=via)
        for r in runs
    ]


def github_link(url: Any) -> str | None:
    """A stored run link fit for GitHub: absolute (stored under RNX_PUBLIC_URL), else none."""
    return url if isinstance(url, str) and url.startswith(("https://", "http://")) else None


def overall_tier(runs: Sequence[PullRun]) -> Tier:
    return worst([tier_of(r.tier) for r in runs]) if runs else "WARN"


def status_of(runs: Sequence[PullRun]) -> tuple[str, str, str | None]:
    """(state, description, target url) of the commit status for these runs."""
    tier = overall_tier(runs)
    accepted = [r.record for r in runs if r.record.accepted_at is not None]
    if tier == "PASS" and accepted and accepted[0].accepted_by:
        who = accepted[0].accepted_by.removeprefix("github:")
        reasons = [accepted_line(who, accepted[0].accept_reason or "")]
    else:
        reasons = [str(x) for r in runs for x in r.record.answer.get("reasons", [])]
    url = github_link(runs[0].record.answer.get("url")) if runs else None
    unresolved = combine([], [part_of(r) for r in runs], sha="").unresolved
    description = status_description(tier, "enforce", reasons, unresolved=unresolved)
    return status_state(tier, "enforce"), description, url


def _comparisons(stored: Any) -> tuple[list[ConfigComparison], int]:
    """The stored answer's comparisons, and how many could not be read back (a stored value
    never makes the comment fail: what cannot be shown is counted, the run page has it)."""
    found, unreadable = [], 0
    for item in stored if isinstance(stored, list) else []:
        try:
            found.append(ConfigComparison.model_validate(item))
        except ValidationError:
            unreadable += 1
    return found, unreadable


def stored_inconclusive(answer: dict[str, Any]) -> Inconclusive | None:
    """What a stored answer says its run could not see (None in answers stored before the gate
    said it, and in one that cannot be read back: a stored value never breaks a comment)."""
    try:
        found = answer.get("inconclusive")
        return None if found is None else Inconclusive.model_validate(found)
    except ValidationError:
        return None


def part_of(run: PullRun) -> PartResult:
    """A run as a part of the sticky comment, rendered as the action renders its own."""
    r = run.record
    comparisons, unreadable = _comparisons(r.answer.get("comparisons"))
    reasons = [str(x) for x in r.answer.get("reasons", [])]
    if unreadable:
        reasons.append(f"{unreadable} configuration(s) cannot be shown here; see the run page")
    accepted = None
    if r.accepted_at is not None:
        who = (r.accepted_by or "").removeprefix("github:")
        accepted = Acceptance(who, r.accept_reason or "", measured=tier_of(r.tier))
    url = github_link(r.answer.get("url"))
    return PartResult(
        workload=run.workload,
        environment=r.environment_key,
        tier=tier_of(run.tier),
        reasons=reasons,
        comparisons=comparisons,
        url=url,
        accepted=accepted,
        # An accepted run passes whatever it measured: nothing is left unseen to say.
        inconclusive=None if accepted else stored_inconclusive(r.answer),
    )


def render_comment(head_sha: str, runs: Sequence[PullRun]) -> str:
    return combine([], [part_of(run) for run in runs], sha=head_sha).body


def publish(
    client: GitHubClient,
    *,
    author: str,
    repository: str,
    pr_number: int,
    head_sha: str,
    runs: Sequence[PullRun],
) -> list[str]:
    """Write the PR's sticky comment (ours only, updated in place) and the commit status.
    Returns warnings: a GitHub write that fails is reported, never raised."""
    warnings = []
    body = render_comment(head_sha, runs)
    try:
        # Our own comment is rewritten whole: the server renders every run of the commit.
        write_sticky(client, repository, pr_number, author=author, body=lambda _present: body)
    except GitHubError as e:
        warnings.append(f"could not write the sticky comment: {e}")
    state, description, url = status_of(runs)
    try:
        client.set_status(
            repository, head_sha, state=state, description=description, target_url=url
        )
    except GitHubError as e:
        warnings.append(f"could not set the commit status: {e}")
    return warnings
