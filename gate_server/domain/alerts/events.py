"""The events alerts are sent for, and the facts each carries, as written to the outbox in the
transaction of what caused it (an upload, an accept, a failing channel)."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote, urlencode

from gate_server.db.runs import RunFacts
from gate_server.domain.anchors import anchor
from rnx.environments import EnvironmentLabel

BLOCK = "block"  # a BLOCK on a push to a baseline branch: a regression landed
CHANGE_POINT = "change_point"  # the change-point detector found a new one
ACCEPTED_SLOWDOWN = "accepted_slowdown"  # a run with a slowdown was accepted as the baseline
CHANNEL_FAILING = "channel_failing"  # a channel failed FAILING_AFTER sends in a row
SCHEDULED_REPORT = "scheduled_report"  # a scheduled baseline run's report (alerts/report.py)
EVENTS = (BLOCK, CHANGE_POINT, ACCEPTED_SLOWDOWN, CHANNEL_FAILING, SCHEDULED_REPORT)
# A rule that names no events takes the alarms; reports come only to a rule that asks.
ALARMS = (BLOCK, CHANGE_POINT, ACCEPTED_SLOWDOWN, CHANNEL_FAILING)
# A change point's culprit, named by its bisection: sent where its change point's alert went
# (rules name change_point; it is not an event of its own in them).
CULPRIT = "culprit"
TEST = "test"  # `rnx notify test`: sent at once to one channel, never through rules

OUTBOX_PREFIX = "event."  # an event's outbox kind: "event.block", "event.change_point", ...
GITHUB_WEB = "https://github.com"


def outbox_kind(event: str) -> str:
    return OUTBOX_PREFIX + event


def run_link(run_id: str) -> str:
    """The run page's path; messages make it absolute with RNX_PUBLIC_URL when it is set
    (gate_server/domain/alerts/message.py), never with a request's Host."""
    return f"/runs/{run_id}"


def dashboard_link(repository: str | None, chart: dict[str, Any] | None = None) -> str:
    """The repository's history; with `chart` (branch, environment, workload, configuration)
    filtered to that workload and scrolled to the configuration's chart, the one that moved."""
    if not repository:
        return "/"
    link = f"/repos/{quote(repository)}"
    if not chart:
        return link
    shown = {k: chart[k] for k in ("branch", "environment", "workload") if chart.get(k)}
    link += "?" + urlencode(shown)
    if chart.get("workload") and chart.get("configuration"):
        fragment = anchor(str(chart["workload"]), set())
        link += f"#{fragment}--{str(chart['configuration']).replace('/', '-')}"
    return link


def pull_request_link(repository: str, pr_number: int | None) -> str | None:
    return f"{GITHUB_WEB}/{repository}/pull/{pr_number}" if pr_number else None


def compare_link(repository: str, base_sha: str | None, head_sha: str) -> str:
    """GitHub's compare page from the baseline's commit to this one (the commit itself when
    there is no baseline)."""
    if not base_sha or base_sha == head_sha:
        return f"{GITHUB_WEB}/{repository}/commit/{head_sha}"
    return f"{GITHUB_WEB}/{repository}/compare/{base_sha}...{head_sha}"


def environment_facts(label: EnvironmentLabel) -> dict[str, Any]:
    """An environment as alerts carry it: `environment` is the key (what webhook consumers
    filter on, and the dashboard link's filter), `environment_name` what people read: the
    name and hardware as the pages show them (rnx/environments.py)."""
    return {"environment": label.key, "environment_name": label.text}


def alert_run(run: RunFacts, environment: EnvironmentLabel) -> dict[str, Any]:
    """What an alert says of a stored run (its branch: the baseline branch it is or would be)."""
    return {
        "run_id": run.run_id,
        "sha": run.sha,
        "branch": run.baseline_branch or run.base_branch or run.branch,
        "workload": run.workload,
        **environment_facts(environment),
        "pr_number": run.pr_number,
    }


def worst_slowdown(comparisons: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The comparison with the largest credible slowdown (verdict "slower"), as alerts quote
    it; None when no configuration is credibly slower."""
    slower = [c for c in comparisons if c.get("verdict") == "slower" and c.get("ratio")]
    if not slower:
        return None
    worst = max(slower, key=lambda c: float(c["ratio"]))
    return {
        "configuration": worst.get("id"),
        "ratio": worst["ratio"],
        "low": worst.get("low"),
        "high": worst.get("high"),
        "base_median_ns": worst.get("base_median_ns"),
        "head_median_ns": worst.get("head_median_ns"),
    }


def _run_facts(repository: str, answer: dict[str, Any], run: dict[str, Any]) -> dict[str, Any]:
    baseline = answer.get("baseline") or {}
    base_shas = baseline.get("shas") or []
    base_sha = base_shas[0] if base_shas else None
    worst = worst_slowdown(list(answer.get("comparisons") or []))
    pr_number = run.get("pr_number")
    chart = {**run, "configuration": (worst or {}).get("configuration")}
    links = {
        "run": run_link(run["run_id"]),
        "commits": compare_link(repository, base_sha, run["sha"]),
        "dashboard": dashboard_link(repository, chart),
        "pull_request": pull_request_link(repository, pr_number),
    }
    return {
        "repository": repository,
        "run_id": run["run_id"],
        "sha": run["sha"],
        "branch": run["branch"],
        "workload": run["workload"],
        "environment": run["environment"],
        "environment_name": run["environment_name"],
        "tier": answer.get("tier"),
        "reasons": list(answer.get("reasons") or [])[:5],
        "worst": worst,
        "baseline_sha": base_sha,
        "pr_number": pr_number,
        "links": {k: v for k, v in links.items() if v},
    }


def block_event(*, repository: str, answer: dict[str, Any], run: dict[str, Any]) -> dict[str, Any]:
    """A BLOCK on a push to a baseline branch. `run` names run_id, sha, branch, workload and
    environment; `answer` is the upload's answer (tier, reasons, comparisons, baseline)."""
    facts = _run_facts(repository, answer, run)
    return {"event_id": f"{BLOCK}:{run['run_id']}", "event": BLOCK, **facts}


def accepted_slowdown_event(
    *,
    repository: str,
    answer: dict[str, Any],
    run: dict[str, Any],
    accepted_by: str,
    reason: str,
    via: str,
) -> dict[str, Any] | None:
    """An accept of a run with a credible slowdown; None when the run has none (accepting a
    run that is not slower is no news)."""
    facts = _run_facts(repository, answer, run)
    if facts["worst"] is None:
        return None
    return {
        "event_id": f"{ACCEPTED_SLOWDOWN}:{run['run_id']}",
        "event": ACCEPTED_SLOWDOWN,
        **facts,
        "accepted_by": accepted_by,
        "reason": reason,
        "via": via,
    }


def channel_failing_event(
    *,
    channel_id: int,
    channel: str,
    kind: str,
    failures: int,
    last_error: str,
    since: str,
) -> dict[str, Any]:
    return {
        "event_id": f"{CHANNEL_FAILING}:{channel_id}:{since}",
        "event": CHANNEL_FAILING,
        "repository": None,
        "channel_id": channel_id,
        "channel": channel,
        "kind": kind,
        "failures": failures,
        "last_error": last_error,
        "since": since,
        "links": {"dashboard": dashboard_link(None)},
    }


def test_event(*, channel: str, workspace: str, delivery_id: str) -> dict[str, Any]:
    return {
        "event_id": f"{TEST}:{delivery_id}",
        "event": TEST,
        "repository": None,
        "channel": channel,
        "workspace": workspace,
        "links": {"dashboard": dashboard_link(None)},
    }
