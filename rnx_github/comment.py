"""Markdown reports: the job summary and the sticky PR comment, gathered from all parts of a commit.

A "part" is what one job gated (one workload in one environment). The sticky comment keeps
each part's section between hidden markers, so matrix jobs of the same commit each replace
their own section and the header's overall tier is recomputed from all of them.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import quote, unquote

from rnx.formatting import format_ns, format_percent, format_ratio_interval
from rnx.schema import ConfigComparison, Tier
from rnx_github.client import Comment, GitHubClient

# The hidden first line of the sticky comment. The action and the server share it, so a reader
# knows either comment for what it is; each writer only ever edits comments it wrote itself.
COMMENT_MARKER = "<!-- rnx-benchmark:sticky -->"

_PART_RE = re.compile(
    r"<!-- rnx-benchmark:part key=(?P<key>\S+) tier=(?P<tier>PASS|WARN|BLOCK) -->\n"
    r"(?P<body>.*?)<!-- rnx-benchmark:part-end -->",
    re.DOTALL,
)
TIER_ORDER: dict[str, int] = {"PASS": 0, "WARN": 1, "BLOCK": 2}
MAX_ROWS = 12
QUIET_VERDICTS = ("equivalent", "faster", "skipped")
TIER_ICON = {"PASS": "✅", "WARN": "⚠️", "BLOCK": "❌"}


def worst(tiers: list[Tier]) -> Tier:
    return max(tiers, key=lambda t: TIER_ORDER[t]) if tiers else "PASS"


@dataclass(frozen=True)
class PartResult:
    """One workload gated by one job in one environment."""

    workload: str
    job: str
    environment: str
    tier: Tier
    reasons: list[str]
    comparisons: list[ConfigComparison] = field(default_factory=list)
    url: str | None = None
    outage: str | None = None
    compare: str = "baseline"
    mode: str = "enforce"

    @property
    def key(self) -> str:
        return f"{self.job}/{self.environment}/{self.workload}"


def _correctness(c: ConfigComparison) -> str:
    if c.status == "ok":
        return "ok"
    reason = " ".join((c.reason or "").split())
    if len(reason) > 120:
        reason = reason[:117] + "..."
    return f"**{c.status}**: {_text(reason)}" if reason else f"**{c.status}**"


# Reasons, paths and names can come from a results document a fork's workflow wrote: render
# them as inert text, so they can neither format the comment, link elsewhere, nor forge the
# hidden markers that the sticky comment is assembled from.
_MARKDOWN_SPECIAL = re.compile(r"([\\`*_\[\]{}()#+!|~])")
_PLAIN_CODE = re.compile(r"^[A-Za-z0-9_./:@+, =-]*$")


def _text(text: str) -> str:
    text = " ".join(text.split())
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _MARKDOWN_SPECIAL.sub(r"\\\1", text)


def _code(text: str) -> str:
    return f"`{text}`" if _PLAIN_CODE.match(text) else _text(text)


def describe(c: ConfigComparison, *, block_threshold: float | None = None) -> str:
    """One sentence about one configuration, for annotations and reasons."""
    if c.verdict == "broken" or c.status in ("diverged", "error"):
        return f"{c.id} is broken ({c.status}): {c.reason or 'no reason given'}"
    if c.ratio is not None and c.verdict in ("slower", "faster", "equivalent", "undecided"):
        ratio = format_ratio_interval(c.ratio, c.low, c.high)
        beyond = (
            f", beyond the {format_percent(block_threshold)} block threshold"
            if block_threshold is not None and c.low is not None and c.low > 1 + block_threshold
            else ""
        )
        return f"{c.id}: {c.verdict}, {ratio} the base time{beyond}"
    return f"{c.id}: {c.verdict}" + (f" ({c.reason})" if c.reason else "")


def render_part(part: PartResult) -> str:
    lines = [
        f"### {TIER_ICON[part.tier]} {part.tier} · {_code(part.workload)}",
        f"job {_code(part.job)} · environment {_code(part.environment)} · "
        f"compare: {part.compare} · mode: {part.mode}",
        "",
    ]
    if part.outage:
        lines += [f"> **Gate server not reached**: {_text(part.outage)}. Not blocking.", ""]
    if part.reasons:
        lines += [f"- {_text(r)}" for r in part.reasons] + [""]
    if part.comparisons:
        lines += [
            "| configuration | base median | head median | ratio head/base (90% interval) "
            "| verdict | correctness |",
            "|---|---:|---:|---|---|---|",
        ]
        shown = part.comparisons
        # A comment holds 65,536 characters and gathers many parts: past a dozen rows, list
        # only what needs a look; the run page has every configuration.
        if len(shown) > MAX_ROWS:
            shown = [c for c in shown if c.verdict not in QUIET_VERDICTS]
        for c in shown:
            lines.append(
                f"| `{c.id}` | {format_ns(c.base_median_ns)} | {format_ns(c.head_median_ns)} "
                f"| {format_ratio_interval(c.ratio, c.low, c.high)} | {c.verdict} "
                f"| {_correctness(c)} |"
            )
        hidden = len(part.comparisons) - len(shown)
        if hidden:
            lines.append(
                f"| {hidden} more configurations: equivalent, faster or skipped | | | | | |"
            )
        lines.append("")
    if part.url:
        lines += [f"[Run page]({part.url})", ""]
    return "\n".join(lines)


def _wrap(part: PartResult) -> str:
    return (
        f"<!-- rnx-benchmark:part key={quote(part.key, safe='')} tier={part.tier} -->\n"
        f"{render_part(part)}\n<!-- rnx-benchmark:part-end -->"
    )


def parse_parts(body: str) -> dict[str, tuple[Tier, str]]:
    """The parts kept in an existing comment: key -> (tier, wrapped section)."""
    parts: dict[str, tuple[Tier, str]] = {}
    for m in _PART_RE.finditer(body):
        tier = m.group("tier")
        assert tier in TIER_ORDER
        parts[unquote(m.group("key"))] = (tier, m.group(0))  # type: ignore[assignment]
    return parts


@dataclass(frozen=True)
class Combined:
    tier: Tier
    body: str
    part_count: int


def combine(existing_bodies: list[str], mine: list[PartResult], *, sha: str) -> Combined:
    """Merge this job's parts into the parts already reported for the commit (any comments)."""
    parts: dict[str, tuple[Tier, str]] = {}
    for body in existing_bodies:
        if f"commit {sha[:12]}" in body:  # parts of an older push are dropped
            parts.update(parse_parts(body))
    for p in mine:
        parts[p.key] = (p.tier, _wrap(p))
    tier = worst([t for t, _ in parts.values()])
    counts = {t: sum(1 for x, _ in parts.values() if x == t) for t in TIER_ORDER}
    tally = ", ".join(f"{n} {t}" for t, n in counts.items() if n)
    header = [
        COMMENT_MARKER,
        f"## {TIER_ICON[tier]} rnx-benchmark: {tier}",
        f"commit {sha[:12]} · {len(parts)} part(s): {tally}",
        "",
    ]
    sections = [parts[k][1] for k in sorted(parts)]
    return Combined(
        tier=tier,
        body="\n".join(header) + "\n" + "\n\n".join(sections) + "\n",
        part_count=len(parts),
    )


def status_description(tier: Tier, mode: str, reasons: list[str]) -> str:
    first = reasons[0] if reasons else {"PASS": "no credible slowdown"}.get(tier, "")
    suffix = f" ({mode})" if mode != "enforce" and tier == "BLOCK" else ""
    text = f"{tier}{suffix}: {first}" if first else f"{tier}{suffix}"
    return text if len(text) <= 140 else text[:137] + "..."


def sticky_comments(gh: GitHubClient, repository: str, pr: int, *, author: str) -> list[Comment]:
    """Our sticky comments on the PR, oldest first: those `author` wrote that start with the
    marker. Someone else's comment quoting the marker is never ours to edit."""
    return [
        c
        for c in gh.comments(repository, pr)
        if c.author == author and c.body.startswith(COMMENT_MARKER)
    ]


def write_sticky(
    gh: GitHubClient, repository: str, pr: int, *, author: str, body: Callable[[str | None], str]
) -> int:
    """Update our oldest sticky comment in place, or create one; the comment's id.

    `body` gets the comment's present text (None when there is none yet)."""
    ours = sticky_comments(gh, repository, pr, author=author)
    if ours:
        gh.update_comment(repository, ours[0].id, body(ours[0].body))
        return ours[0].id
    return gh.create_comment(repository, pr, body(None)).id
