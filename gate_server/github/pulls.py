"""A pull request's latest runs, accepting them, and how they read in a comment and a status.

Used by the webhook ("/kernalin accept" on the server) and by App mode (the server posting
a PR's verdict itself).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from gate_server.runs import accept_run
from gate_server.storage import RunRecord, Storage
from rnx_github.client import GitHubClient, GitHubError
from rnx_github.comment import COMMENT_MARKER, write_sticky

TIER_ICON = {"PASS": "✅", "WARN": "⚠️", "BLOCK": "❌"}
_ORDER = {"PASS": 0, "WARN": 1, "BLOCK": 2}


@dataclass(frozen=True)
class PullRun:
    record: RunRecord
    workload: str

    @property
    def tier(self) -> str:
        # An accepted run is the new normal: it passes whatever it measured.
        return "PASS" if self.record.accepted_at is not None else self.record.tier


def _workload(document: bytes) -> str:
    try:
        data: Any = json.loads(document)
        return str(data["workload"]["path"])
    except (ValueError, KeyError, TypeError):
        return "?"


def latest_runs(records: Sequence[tuple[RunRecord, bytes]], head_sha: str | None) -> list[PullRun]:
    """The newest run per (environment, workload) of the PR's head commit.

    `records` come newest first. Without `head_sha`, the commit of the newest run counts."""
    if not records:
        return []
    sha = (head_sha or records[0][0].sha).lower()
    chosen: dict[tuple[str, str], PullRun] = {}
    for record, document in records:
        if record.sha.lower() != sha:
            continue
        run = PullRun(record, _workload(document))
        chosen.setdefault((record.environment_key, run.workload), run)
    return sorted(chosen.values(), key=lambda r: (r.workload, r.record.environment_key))


def accept_runs(
    storage: Storage, runs: Sequence[PullRun], *, user: str, reason: str, via: str
) -> list[dict[str, Any]]:
    """Each run becomes the baseline for its base branch and environment (audited there)."""
    return [
        accept_run(storage, r.record.run_id, actor=f"github:{user}", reason=reason, via=via)
        for r in runs
    ]


def accepted_line(user: str, reason: str) -> str:
    return f"accepted by @{user}: {reason}"


def overall_tier(runs: Sequence[PullRun]) -> str:
    return max((r.tier for r in runs), key=lambda t: _ORDER[t]) if runs else "WARN"


def status_of(runs: Sequence[PullRun]) -> tuple[str, str, str | None]:
    """(state, description, target url) of the commit status for these runs."""
    tier = overall_tier(runs)
    accepted = [r.record for r in runs if r.record.accepted_at is not None]
    if tier == "PASS" and accepted and accepted[0].accepted_by:
        who = accepted[0].accepted_by.removeprefix("github:")
        text = f"PASS: {accepted_line(who, accepted[0].accept_reason or '')}"
    else:
        reasons = [str(x) for r in runs for x in r.record.answer.get("reasons", [])]
        first = reasons[0] if reasons else "no credible slowdown"
        text = f"{tier}: {first}"
    url = runs[0].record.answer.get("url") if runs else None
    state = "failure" if tier == "BLOCK" else "success"
    return state, text if len(text) <= 140 else text[:137] + "...", url


def render_comment(head_sha: str, runs: Sequence[PullRun]) -> str:
    tier = overall_tier(runs)
    lines = [
        COMMENT_MARKER,
        f"## {TIER_ICON[tier]} rnx-benchmark: {tier}",
        f"commit {head_sha[:12]} · {len(runs)} run(s), as the gate server recorded them",
        "",
    ]
    for run in runs:
        r = run.record
        lines.append(f"### {TIER_ICON[run.tier]} {run.tier} · `{_cell(run.workload)}`")
        lines.append(f"environment `{_cell(r.environment_key)}`")
        lines.append("")
        if r.accepted_at is not None:
            who = (r.accepted_by or "").removeprefix("github:")
            lines += [f"> **Accepted** by @{who}: {_cell(r.accept_reason or '')}", ""]
            lines.append(f"Measured before acceptance: {r.tier}.")
            lines.append("")
        lines += [f"- {_cell(str(x))}" for x in r.answer.get("reasons", [])]
        comparisons = r.answer.get("comparisons") or []
        if comparisons:
            lines += ["", "| configuration | ratio head/base (90% interval) | verdict |"]
            lines.append("|---|---|---|")
            for c in comparisons:
                lines.append(f"| `{c.get('id')}` | {_ratio(c)} | {c.get('verdict')} |")
        if r.answer.get("url"):
            lines += ["", f"[Run page]({r.answer['url']})"]
        lines.append("")
    return "\n".join(lines)


def _ratio(c: dict[str, Any]) -> str:
    ratio, low, high = c.get("ratio"), c.get("low"), c.get("high")
    if ratio is None:
        return "–"
    if low is not None and high is not None:
        return f"{ratio:.3f}× ({low:.3f}–{high:.3f})"
    return f"{ratio:.3f}×"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


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
