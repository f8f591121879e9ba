"""One event's message, before any channel's format: what happened (title), where (facts), how
much (summary), and the links (run page, commit range, dashboard)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from gate_server.domain.alerts.events import (
    ACCEPTED_SLOWDOWN,
    BLOCK,
    CHANGE_POINT,
    CHANNEL_FAILING,
    CULPRIT,
    SCHEDULED_REPORT,
    TEST,
)

_LINK_LABELS = {
    "run": "Run page",
    "pull_request": "Pull request",
    "commits": "Commit range",
    "dashboard": "Dashboard",
}
# The gate's reasons end their clauses with the statistics behind them, "(adjusted P = 0.0010)"
# and "(P(ratio <= 1.25) = 0.0100)": right for the run page, noise in a chat message.
_STATISTICS = re.compile(r"\s*\((?:adjusted P|P\(ratio[^()]*\)|P =)[^()]*\)")


@dataclass(frozen=True)
class Message:
    event: str
    title: str  # what, in one line
    summary: str  # how much
    facts: list[tuple[str, str]]  # where (and who, why)
    links: list[tuple[str, str]]  # (label, URL): absolute under RNX_PUBLIC_URL, else paths

    def text(self) -> str:
        """The message as plain text (email bodies, Slack's fallback)."""
        lines = [self.title, "", self.summary, ""]
        lines += [f"{label}: {value}" for label, value in self.facts]
        lines += [""] + [f"{label}: {url}" for label, url in self.links]
        return "\n".join(lines).strip() + "\n"


def how_much(worst: dict[str, Any] | None) -> str:
    """'1.32x slower (+32%, 90% interval 1.25x to 1.40x) in <configuration>'."""
    if not worst:
        return "no configuration is credibly slower"
    ratio = float(worst["ratio"])
    text = (
        f"{ratio:.3g}x {'slower' if ratio >= 1 else 'the time: faster'} ({(ratio - 1) * 100:+.1f}%"
    )
    if worst.get("low") is not None and worst.get("high") is not None:
        text += f", 90% interval {float(worst['low']):.3g}x to {float(worst['high']):.3g}x"
    text += ")"
    if worst.get("configuration"):
        text += f" in {worst['configuration']}"
    return text


def plain_reason(reason: str) -> str:
    """A gate reason without its statistics' figures (the run page keeps them)."""
    return _STATISTICS.sub("", reason)


def _short(sha: str | None) -> str:
    return (sha or "?")[:12]


def _environment(p: dict[str, Any]) -> str:
    """Its name and hardware as the pages show them, then the key (what groups comparable runs;
    a page shows it on hover, a message has no hover). Events stored before names were
    carried have the key alone."""
    key = str(p.get("environment"))
    name = p.get("environment_name")
    return f"{name} · key {key}" if name and name != key else key


def _environment_title(p: dict[str, Any]) -> str:
    return str(p.get("environment_name") or p.get("environment"))


def _where(p: dict[str, Any]) -> list[tuple[str, str]]:
    where = [
        ("Repository", str(p.get("repository"))),
        ("Branch", str(p.get("branch"))),
        ("Commit", _short(p.get("sha"))),
        ("Workload", str(p.get("workload"))),
        ("Environment", _environment(p)),
    ]
    if p.get("pr_number"):
        where.append(("Pull request", f"#{p['pr_number']}"))
    return where


def absolute_links(links: dict[str, str], public_url: str | None) -> dict[str, str]:
    """The stored links, paths made absolute under RNX_PUBLIC_URL (left as paths without it)."""
    base = (public_url or "").rstrip("/")
    return {k: base + v if v.startswith("/") else v for k, v in links.items()}


def _links(p: dict[str, Any]) -> list[tuple[str, str]]:
    links = p.get("links") or {}
    return [(label, str(links[key])) for key, label in _LINK_LABELS.items() if links.get(key)]


def _block(p: dict[str, Any]) -> Message:
    reasons = "; ".join(plain_reason(str(r)) for r in p.get("reasons") or []) or "-"
    return Message(
        event=BLOCK,
        title=f"BLOCK on {p['repository']} {p['branch']} at {_short(p['sha'])}: "
        "a regression landed on a baseline branch",
        summary=how_much(p.get("worst")) if p.get("worst") else reasons,
        facts=[*_where(p), ("Reasons", reasons)],
        links=_links(p),
    )


def _accepted(p: dict[str, Any]) -> Message:
    return Message(
        event=ACCEPTED_SLOWDOWN,
        title=f"Slowdown accepted on {p['repository']} {p['branch']} by {p['accepted_by']}",
        summary=how_much(p.get("worst")),
        facts=[
            ("Accepted by", str(p["accepted_by"])),
            ("Reason", str(p["reason"])),
            ("Via", str(p.get("via"))),
            *_where(p),
        ],
        links=_links(p),
    )


def _change_point(p: dict[str, Any]) -> Message:
    worst = p.get("worst")
    facts = _where(p)
    if p.get("baseline_sha"):
        facts.append(("Before", _short(p.get("baseline_sha"))))
    if p.get("drift_end_sha"):
        facts.append(
            ("Drift", f"a gradual change, over the runs up to {_short(p['drift_end_sha'])}")
        )
    if p.get("early"):
        facts.append(("Early", "found in a short history, on weaker evidence than the rank test's"))
    if p.get("undoes_id"):
        facts.append(("Takes back", f"change point {p['undoes_id']} (a step back)"))
    also = p.get("also_moved") or []
    if also:
        moved = [
            f"{o['configuration']} ({o['workload']}, {_environment_title(o)}): "
            f"{float(o['ratio']):.3g}x"
            for o in also
        ]
        facts.append(("Also moved at this commit", "; ".join(moved)))
    return Message(
        event=CHANGE_POINT,
        title=f"Change point on {p.get('repository')} {p.get('branch')} at {_short(p.get('sha'))}",
        summary=how_much(worst) if worst else str(p.get("summary") or "a new change point"),
        facts=facts,
        links=_links(p),
    )


def _moved_text(against: dict[str, Any] | None, what: str) -> tuple[str, str]:
    """One fact of a report: the configurations that moved against a reference run."""
    if against is None:
        return what, "no such run stored"
    label = f"{what} ({_short(against.get('sha'))})"
    moved = against.get("moved") or []
    if not moved:
        return label, "nothing moved"
    listed = [
        f"{m['configuration']}: {float(m['ratio']):.3g}x {m['verdict']} "
        f"[{float(m['low']):.3g}, {float(m['high']):.3g}]"
        for m in moved
    ]
    more = int(against.get("moved_count") or len(moved)) - len(moved)
    return label, "; ".join(listed) + (f"; and {more} more" if more > 0 else "")


def _scheduled_report(p: dict[str, Any]) -> Message:
    opened = p.get("open_change_points") or []
    counts = [
        f"{len((p.get(k) or {}).get('moved') or [])} moved against the {what}"
        for k, what in (
            ("against_previous", "previous scheduled run"),
            ("against_month_ago", "baseline a month ago"),
        )
    ]
    changes = "; ".join(
        f"#{c['id']} {c['configuration']} {float(c['ratio']):.3g}x at {_short(c['after_sha'])}"
        + _bisection_text(c.get("bisection"))
        for c in opened
    )
    return Message(
        event=SCHEDULED_REPORT,
        title=f"Scheduled run on {p.get('repository')} {p.get('branch')} at "
        f"{_short(p.get('sha'))}: {p.get('tier')}",
        summary=f"{p.get('tier')}; " + ", ".join(counts) + f"; {len(opened)} open change points",
        facts=[
            *_where(p),
            ("Tier", str(p.get("tier"))),
            ("Ran", f"{p.get('configurations')} configurations of {p.get('workload')}"),
            _moved_text(p.get("against_previous"), "Against the previous scheduled run"),
            _moved_text(p.get("against_month_ago"), "Against the baseline a month ago"),
            ("Open change points", changes or "none"),
        ],
        links=_links(p),
    )


def _bisection_text(b: Any) -> str:
    """A report's word on an open change point's bisection (gate_server/domain/bisection/)."""
    if not isinstance(b, dict):
        return ""
    if b.get("culprit_sha"):
        return f" (bisected: {_short(b['culprit_sha'])} by {b.get('culprit_author') or '?'})"
    return f" (bisection {b.get('state')})"


def _culprit(p: dict[str, Any]) -> Message:
    who = p.get("author") or "an unknown author"
    pr = f" (pull request #{p['pr_number']})" if p.get("pr_number") else ""
    return Message(
        event=CULPRIT,
        title=f"Culprit found on {p.get('repository')} {p.get('branch')}: {_short(p.get('sha'))} "
        f"by {who}{pr}",
        summary=f"change point {p.get('change_point_id')}: {how_much(p.get('worst'))}",
        facts=[*_where(p), ("Culprit", f"{p.get('sha')} by {who}{pr}")],
        links=_links(p),
    )


def _failing(p: dict[str, Any]) -> Message:
    return Message(
        event=CHANNEL_FAILING,
        title=f"Alert channel {p['channel']} ({p['kind']}) keeps failing",
        summary=f"{p['failures']} sends in a row failed; alerts to it are retried until it "
        "answers again",
        facts=[
            ("Channel", f"{p['channel']} ({p['kind']})"),
            ("Failing since", str(p["since"])),
            ("Last error", str(p["last_error"])),
        ],
        links=_links(p),
    )


def _test(p: dict[str, Any]) -> Message:
    return Message(
        event=TEST,
        title=f"Test alert for channel {p['channel']} of workspace {p['workspace']}",
        summary="rnx notify test: this channel receives kernalin's alerts",
        facts=[("Channel", str(p["channel"])), ("Workspace", str(p["workspace"]))],
        links=_links(p),
    )


_BUILDERS = {
    TEST: _test,
    BLOCK: _block,
    ACCEPTED_SLOWDOWN: _accepted,
    CHANGE_POINT: _change_point,
    CULPRIT: _culprit,
    CHANNEL_FAILING: _failing,
    SCHEDULED_REPORT: _scheduled_report,
}


def compose(facts: dict[str, Any], public_url: str | None) -> Message:
    """The message of an event's facts (gate_server/domain/alerts/events.py), its links absolute
    under `public_url` (RNX_PUBLIC_URL)."""
    with_links = {**facts, "links": absolute_links(facts.get("links") or {}, public_url)}
    return _BUILDERS[facts["event"]](with_links)
