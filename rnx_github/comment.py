"""The sticky pull request comment and the commit status text: one renderer for the action
and for the gate server's App mode.

A comment gathers parts: a part is what one job gated (one workload in one environment). Each
part's section sits between hidden markers, so matrix jobs of the same commit each replace
their own and the header's tier is the worst of them all. The server, which renders every run
of a commit at once, writes the same parts.

Everything a results document carries (workload paths, reasons, environment names) may come
from a fork's workflow, and an accept reason from a PR comment: all of it is rendered as inert
text, so it can neither format the comment, hide a link behind other words, nor forge the hidden
markers. (GitHub still turns a bare URL in such text into a link to itself, shown as it is.)
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import quote, unquote

from rnx.formatting import (
    MISSING,
    SPEED_OF_LIGHT_NOTE,
    format_headline,
    format_ns,
    format_peaks,
    format_percent,
    format_ratio_interval,
    format_speed_of_light,
)
from rnx.schema import ConfigComparison, Inconclusive, Tier
from rnx_github.client import Comment, GitHubClient

# The hidden first line of the sticky comment. The action and the server share it, so a reader
# knows either comment for what it is; each writer only ever edits comments it wrote itself.
COMMENT_MARKER = "<!-- rnx-benchmark:sticky -->"
TIERS: dict[str, Tier] = {"PASS": "PASS", "WARN": "WARN", "BLOCK": "BLOCK"}
TIER_ORDER: dict[str, int] = {"PASS": 0, "WARN": 1, "BLOCK": 2}
TIER_ICON: dict[str, str] = {"PASS": "✅", "WARN": "⚠️", "BLOCK": "❌"}
MAX_ROWS = 12
QUIET_VERDICTS = ("equivalent", "faster", "skipped")
STATUS_LIMIT = 140  # all GitHub keeps of a commit status's description

_PART_RE = re.compile(
    r"<!-- rnx-benchmark:part key=(?P<key>\S+) tier=(?P<tier>PASS|WARN|BLOCK) -->\n"
    r"(?P<body>.*?)<!-- rnx-benchmark:part-end -->",
    re.DOTALL,
)
_HEADER = re.compile(r"^## .* rnx-benchmark: (PASS|WARN|BLOCK)\b.*$", re.MULTILINE)
# A part's heading that says it could not have seen a block-sized slowdown (render_part): how
# a comment's header learns it of parts other jobs wrote.
_UNRESOLVED = re.compile(
    r"^### \S+ (?:PASS|WARN) — inconclusive: could not resolve changes under (\d{1,4})%",
    re.MULTILINE,
)
_ACCEPTED = re.compile(r"^> ✅ \*\*Accepted\*\* by .*\n?", re.MULTILINE)
_MARKDOWN_SPECIAL = re.compile(r"([\\`*_\[\]{}()#+!|~])")
_PLAIN_CODE = re.compile(r"^[A-Za-z0-9_./:@+, =-]*$")
_GITHUB_LOGIN = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})(?:\[bot\])?$")
_PLAIN_URL = re.compile(r"^https?://[^\s()<>\[\]`]+$")


def worst(tiers: list[Tier]) -> Tier:
    return max(tiers, key=lambda t: TIER_ORDER[t]) if tiers else "PASS"


def tier_of(text: str) -> Tier:
    """A stored or parsed tier; anything unknown reads as WARN (it needs a look)."""
    return TIERS.get(text, "WARN")


@dataclass(frozen=True)
class Acceptance:
    """Someone accepted the part's slowdown ("/kernalin accept <reason>")."""

    user: str
    reason: str
    measured: Tier  # the tier before it was accepted


@dataclass(frozen=True)
class ConfigNote:
    """Something about how one configuration was measured that a reader should know (a GPU
    shared with other processes, say): not a verdict, shown under the table."""

    id: str
    text: str


@dataclass(frozen=True)
class PartResult:
    """One workload gated in one environment (by one job, when the action reports it)."""

    workload: str
    environment: str
    tier: Tier
    reasons: list[str]
    comparisons: list[ConfigComparison] = field(default_factory=list)
    url: str | None = None
    job: str | None = None
    outage: str | None = None
    compare: str | None = None
    mode: str | None = None
    accepted: Acceptance | None = None
    notes: list[ConfigNote] = field(default_factory=list)
    # The gate's answer says this part could not have seen a block-sized slowdown.
    inconclusive: Inconclusive | None = None

    @property
    def headline(self) -> str:
        """The tier, and for a PASS or WARN that could not have seen a block-sized slowdown,
        what it could not resolve (rnx.formatting.format_headline)."""
        found = self.inconclusive
        return format_headline(self.tier, None if found is None else found.resolution)

    @property
    def key(self) -> str:
        return f"{self.job or '-'}/{self.environment}/{self.workload}"


# ---- inert text


def inert_text(text: str) -> str:
    """Markdown and HTML shown as the characters they are, on one line, and no live mention:
    a word joiner after each '@' keeps `@org/team` in a branch name or a fork's text from
    notifying anybody (the comment is posted as the App), while it reads the same."""
    text = " ".join(text.split())
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _MARKDOWN_SPECIAL.sub(r"\\\1", text).replace("@", "@\u2060")


def _code(text: str) -> str:
    return f"`{text}`" if _PLAIN_CODE.match(text) else inert_text(text)


def _link(label: str, url: str) -> str:
    return f"[{label}]({url})" if _PLAIN_URL.match(url) else f"{label}: {inert_text(url)}"


def accepted_line(user: str, reason: str) -> str:
    return f"accepted by @{user}: {reason}"


def _mention(user: str) -> str:
    # The code owner who accepted is mentioned on purpose, when `user` is a GitHub login.
    return f"@{user}" if _GITHUB_LOGIN.match(user) else inert_text(user)


def accepted_markdown(user: str, reason: str) -> str:
    """accepted_line() as Markdown: the user mentioned, the reason inert."""
    return f"accepted by {_mention(user)}: {inert_text(reason)}"


def _accepted_note(user: str, reason: str) -> str:
    return f"> {TIER_ICON['PASS']} **Accepted** by {_mention(user)}: {inert_text(reason)}"


# ---- one part


def _correctness(c: ConfigComparison) -> str:
    if c.status == "ok":
        return "ok"
    reason = " ".join((c.reason or "").split())
    if len(reason) > 120:
        reason = reason[:117] + "..."
    return f"**{c.status}**: {inert_text(reason)}" if reason else f"**{c.status}**"


def _sol(c: ConfigComparison) -> str:
    sol = c.speed_of_light
    if sol is None:
        return MISSING
    return inert_text(format_speed_of_light(sol.score, sol.bound, sol.beyond_roofline))


def _sol_note(comparisons: list[ConfigComparison]) -> list[str]:
    """Under a table with a SOL column: what it means and which peaks it is against."""
    parts = sorted(
        {
            format_peaks(c.speed_of_light.peak_source, inert_text(c.speed_of_light.peak_part))
            for c in comparisons
            if c.speed_of_light is not None
        }
    )
    # The note is ours; only the part's name comes from the document, and is made inert.
    return [f"{SPEED_OF_LIGHT_NOTE}. Peaks: {'; '.join(parts)}."]


def _table(comparisons: list[ConfigComparison]) -> list[str]:
    # The speed-of-light column only where the run has scores (older documents have none).
    with_sol = any(c.speed_of_light is not None for c in comparisons)
    lines = [
        "| configuration | base median | head median | ratio head/base (90% interval) "
        + ("| SOL " if with_sol else "")
        + "| verdict | correctness |",
        "|---|---:|---:|---|" + ("---:|" if with_sol else "") + "---|---|",
    ]
    shown = comparisons
    # A comment holds 65,536 characters and gathers many parts: past a dozen rows, list
    # only what needs a look; the run page has every configuration.
    if len(shown) > MAX_ROWS:
        shown = [c for c in shown if c.verdict not in QUIET_VERDICTS]
    for c in shown:
        sol = f" {_sol(c)} |" if with_sol else ""
        lines.append(
            f"| {_code(c.id)} | {format_ns(c.base_median_ns)} | {format_ns(c.head_median_ns)} "
            f"| {format_ratio_interval(c.ratio, c.low, c.high)} |{sol} {c.verdict} "
            f"| {_correctness(c)} |"
        )
    hidden = len(comparisons) - len(shown)
    if hidden:
        cells = " |" * (7 if with_sol else 6)
        lines.append(f"| {hidden} more configurations: equivalent, faster or skipped{cells}")
    if with_sol:
        lines += ["", *_sol_note(comparisons)]
    return lines


def _notes(notes: list[ConfigNote]) -> list[str]:
    lines = ["Measurement notes:"]
    lines += [f"- {_code(n.id)}: {inert_text(n.text)}" for n in notes[:MAX_ROWS]]
    if len(notes) > MAX_ROWS:
        lines.append(f"- and {len(notes) - MAX_ROWS} more configurations (see the run page)")
    return lines


EXPLAINED_ROWS = 3


def _explanations(comparisons: list[ConfigComparison]) -> list[str]:
    """The profile diff's top rows of each explained configuration (rnx/profile_diff.py):
    operator and kernel names are the workload's text, made inert."""
    explained = [c for c in comparisons if c.explanation][:MAX_ROWS]
    if not explained:
        return []
    lines = ["What moved in the profile (explains, never decides):"]
    for c in explained:
        rows = "; ".join(inert_text(ch.text) for ch in c.explanation[:EXPLAINED_ROWS])
        lines.append(f"- {_code(c.id)}: {rows}")
    return lines


def render_part(part: PartResult) -> str:
    about = [f"job {_code(part.job)}"] if part.job else []
    about.append(f"environment {_code(part.environment)}")
    about += [f"compare: {inert_text(part.compare)}"] if part.compare else []
    about += [f"mode: {inert_text(part.mode)}"] if part.mode else []
    lines = [
        f"### {TIER_ICON[part.tier]} {part.headline} · {_code(part.workload)}",
        " · ".join(about),
    ]
    lines.append("")
    if part.inconclusive is not None and part.tier != "BLOCK":
        lines += [_blind_note(part.inconclusive), ""]
    if part.accepted is not None:
        a = part.accepted
        lines += [
            _accepted_note(a.user, a.reason),
            "",
            f"Measured before acceptance: {a.measured}.",
        ]
        lines.append("")
    if part.outage:
        outage = inert_text(part.outage)
        lines += [f"> **No verdict from the gate server**: {outage}. Not blocking.", ""]
    if part.reasons:
        lines += [f"- {inert_text(r)}" for r in part.reasons] + [""]
    if part.comparisons:
        lines += [*_table(part.comparisons), ""]
        explained = _explanations(part.comparisons)
        lines += [*explained, ""] if explained else []
    if part.notes:
        lines += [*_notes(part.notes), ""]
    if part.url:
        lines += [_link("Run page", part.url), ""]
    return "\n".join(lines)


def _blind_note(found: Inconclusive) -> str:
    ids = ", ".join(_code(c) for c in found.configurations[:MAX_ROWS])
    more = len(found.configurations) - MAX_ROWS
    return (
        f"> **Inconclusive**: {len(found.configurations)} undecided configuration(s) resolve "
        f"only changes wider than the {format_percent(found.block_threshold)} block threshold "
        f"(up to ±{format_percent(found.resolution, 1)}): {ids}"
        + (f" and {more} more" if more > 0 else "")
        + ". A slowdown that should block could pass unseen here."
    )


def _wrap(part: PartResult) -> str:
    return (
        f"<!-- rnx-benchmark:part key={quote(part.key, safe='')} tier={part.tier} -->\n"
        f"{render_part(part)}\n<!-- rnx-benchmark:part-end -->"
    )


def has_part(body: str, part: PartResult) -> bool:
    """Whether `body` holds this part's section with its tier (a check after writing)."""
    return f"key={quote(part.key, safe='')} tier={part.tier}" in body


def parse_parts(body: str) -> dict[str, tuple[Tier, str]]:
    """The parts kept in an existing comment: key -> (tier, wrapped section)."""
    return {
        unquote(m.group("key")): (tier_of(m.group("tier")), m.group(0))
        for m in _PART_RE.finditer(body)
    }


# ---- the whole comment


def _header(tier: Tier, unresolved: float | None = None) -> str:
    return f"## {TIER_ICON[tier]} rnx-benchmark: {format_headline(tier, unresolved)}"


@dataclass(frozen=True)
class Combined:
    tier: Tier
    body: str
    part_count: int
    # The widest change a PASS or WARN part could not resolve (a fraction), when one could
    # not have seen a block-sized slowdown: the header and the commit status say so.
    unresolved: float | None = None


def _unresolved(sections: list[str]) -> float | None:
    found = [int(m.group(1)) for s in sections for m in _UNRESOLVED.finditer(s)]
    return max(found) / 100 if found else None


def combine(existing_bodies: list[str], mine: list[PartResult], *, sha: str) -> Combined:
    """Merge these parts into the parts already reported for the commit (any comments)."""
    parts: dict[str, tuple[Tier, str]] = {}
    for body in existing_bodies:
        if f"commit {sha[:12]}" in body:  # parts of an older push are dropped
            parts.update(parse_parts(body))
    for p in mine:
        parts[p.key] = (p.tier, _wrap(p))
    tier = worst([t for t, _ in parts.values()])
    counts = {t: sum(1 for x, _ in parts.values() if x == t) for t in TIER_ORDER}
    tally = ", ".join(f"{n} {t}" for t, n in counts.items() if n)
    sections = [parts[k][1] for k in sorted(parts)]
    unresolved = None if tier == "BLOCK" else _unresolved(sections)
    header = [
        COMMENT_MARKER,
        _header(tier, unresolved),
        f"commit {sha[:12]} · {len(parts)} part(s): {tally}",
        "",
    ]
    return Combined(
        tier=tier,
        body="\n".join(header) + "\n" + "\n\n".join(sections) + "\n",
        part_count=len(parts),
        unresolved=unresolved,
    )


def mark_accepted(body: str | None, user: str, reason: str, head_sha: str) -> str:
    """The comment with its verdict turned to PASS and who accepted it and why (the action's
    accept mode edits the comment it finds; the server re-renders its parts instead)."""
    note = _accepted_note(user, reason)
    if not body or not _HEADER.search(body):
        return f"{COMMENT_MARKER}\n{_header('PASS')}\ncommit {head_sha[:12]}\n\n{note}\n"
    body = _ACCEPTED.sub("", body)
    return _HEADER.sub(lambda _: f"{_header('PASS')}\n\n{note}", body, count=1)


# ---- the commit status


def status_state(tier: Tier, mode: str) -> str:
    # report-only and soft-fail promise never to fail: their status must not block a merge.
    return "failure" if tier == "BLOCK" and mode == "enforce" else "success"


def status_description(
    tier: Tier, mode: str, reasons: list[str], *, unresolved: float | None = None
) -> str:
    if unresolved is not None and tier != "BLOCK":
        text = format_headline(tier, unresolved)  # what it could not see comes first
        return text if len(text) <= STATUS_LIMIT else text[: STATUS_LIMIT - 3] + "..."
    first = reasons[0] if reasons else {"PASS": "no credible slowdown"}.get(tier, "")
    suffix = f" ({mode})" if mode != "enforce" and tier == "BLOCK" else ""
    text = f"{tier}{suffix}: {first}" if first else f"{tier}{suffix}"
    return text if len(text) <= STATUS_LIMIT else text[: STATUS_LIMIT - 3] + "..."


# ---- reading and writing it on GitHub


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
