"""The report of a scheduled baseline run (nightly, weekly: the upload's event is `schedule`):
sent whatever its tier to the channels whose rules take `scheduled-report`. What ran, its
tier, the configurations that moved against the previous scheduled run and against the
baseline of a month ago, the series' open change points, and links to the charts. The upload
writes only the event's name and run id; the report is built when it is fanned out."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from sqlalchemy.engine import Connection

from gate_server.db import bisections, change_points, runs
from gate_server.db.runs import BaselineKey, BaselineRun, RunRecord
from gate_server.domain.alerts.events import (
    SCHEDULED_REPORT,
    alert_run,
    compare_link,
    dashboard_link,
    run_link,
)
from gate_server.domain.environments import document_label
from gate_server.settings import ServerSettings

SCHEDULE = "schedule"  # GitHub's event name for a run the workflow's cron started
MONTH = timedelta(days=30)
MOVED = ("slower", "faster")
MAX_LISTED = 10  # configurations or change points per list; the dashboard has the rest


def report_event(run_id: str) -> dict[str, Any]:
    """What the upload's transaction writes: the report is built when it is fanned out."""
    return {"event_id": f"{SCHEDULED_REPORT}:{run_id}", "event": SCHEDULED_REPORT, "run_id": run_id}


def _moved(
    conn: Connection, record: RunRecord, reference: BaselineRun | None, settings: ServerSettings
) -> dict[str, Any] | None:
    """The configurations of the run credibly slower or faster than `reference`'s."""
    if reference is None:
        return None
    from rnx.schema import parse_results  # numpy and the statistics: loaded when first needed
    from rnx.verdict import evaluate

    stored = runs.documents(conn, [record.run_id, reference.run_id])
    report = evaluate(
        parse_results(stored[record.run_id]),
        [parse_results(stored[reference.run_id])],
        settings.gate,
        resamples=settings.resamples,
        seed=settings.seed,
    )
    moved: list[dict[str, Any]] = [
        {
            "configuration": c.id,
            "verdict": c.verdict,
            "ratio": c.ratio,
            "low": c.low,
            "high": c.high,
        }
        for c in report.comparisons
        if c.verdict in MOVED and c.ratio is not None
    ]
    moved.sort(key=lambda m: abs(float(m["ratio"]) - 1), reverse=True)
    return {
        "run_id": reference.run_id,
        "sha": reference.sha,
        "moved": moved[:MAX_LISTED],
        "moved_count": len(moved),
    }


def _open_change_points(conn: Connection, key: BaselineKey) -> list[dict[str, Any]]:
    found = change_points.listed(
        conn,
        key.repository_id,
        branch=key.branch,
        environment_key=key.environment_key,
        workload=key.workload,
        status=change_points.OPEN,
        limit=MAX_LISTED,
    )
    return [
        {
            "id": c.id,
            "configuration": c.configuration,
            "ratio": c.ratio,
            "low": c.low,
            "high": c.high,
            "before_sha": c.before_sha,
            "after_sha": c.after_sha,
            "bisection": _bisection_state(bisections.of_change_point(conn, c.id)),
        }
        for c in found
    ]


def _bisection_state(b: bisections.BisectionRecord | None) -> dict[str, Any] | None:
    """Where the change point's bisection stands (gate_server/domain/bisection/): None without
    one."""
    if b is None:
        return None
    return {
        "state": b.state,
        "culprit_sha": b.culprit_sha,
        "culprit_author": b.culprit_author,
        "culprit_pr": b.culprit_pr,
        "reason": b.reason,
    }


def report_facts(
    conn: Connection, run_id: str, settings: ServerSettings
) -> tuple[dict[str, Any], int, int] | None:
    """A stored scheduled run's report, with its workspace and repository ids; None when the
    run is gone."""
    record = runs.by_run_id(conn, run_id)
    if record is None:
        return None
    # A BLOCKed run is no baseline: its series is its branch's.
    branch = record.baseline_branch or record.branch
    key = BaselineKey(record.repository_id, branch, record.environment_key, record.workload)
    previous = runs.previous_of_event(conn, key, SCHEDULE, record.id)
    month_ago = runs.baseline_as_of(conn, key, record.received_at - MONTH)
    label = document_label(runs.document(conn, run_id), record.environment_key)
    chart = {**alert_run(record, label), "branch": branch}
    against_previous = _moved(conn, record, previous, settings)
    against_month_ago = _moved(conn, record, month_ago, settings)
    # The dashboard opens at the chart of the configuration that moved most since last time.
    moved = [
        *(against_previous or {}).get("moved", []),
        *(against_month_ago or {}).get("moved", []),
    ]
    shown = {**chart, "configuration": moved[0]["configuration"] if moved else None}
    facts = {
        **report_event(run_id),
        "repository": record.repository,
        **chart,
        "tier": record.answer.get("tier"),
        "configurations": len(record.answer.get("comparisons") or []),
        "against_previous": against_previous,
        "against_month_ago": against_month_ago,
        "open_change_points": _open_change_points(conn, key),
        "links": {
            "run": run_link(run_id),
            "commits": compare_link(
                record.repository, previous.sha if previous else None, record.sha
            ),
            "dashboard": dashboard_link(record.repository, shown),
        },
    }
    return facts, record.workspace_id, record.repository_id
