"""What each dashboard page reads from the database (run in a worker thread), as plain data for
its template; the shaping itself is in views.py, the SQL in gate_server/db/dashboard.py."""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from pydantic import ValidationError
from sqlalchemy.engine import Connection

from gate_server.dashboard.charts import ChangeMark, StepMark
from gate_server.dashboard.explanations import explained
from gate_server.dashboard.views import (
    EnvironmentLabels,
    HistoryRun,
    SummaryCache,
    branch_url,
    build_history,
    commit_url,
    correctness_rows,
    distributions,
    environment_rows,
    pr_url,
    ratios_from_answer,
    run_headline,
    short_reasons,
    speed_of_light_cells,
    summarize_document,
)
from gate_server.db import (
    Database,
    alerts,
    audit,
    bisections,
    change_points,
    dashboard,
    renames,
    repositories,
    runs,
    traces,
)
from gate_server.db.bisections import BisectionRecord, StepRecord
from gate_server.db.change_points import ChangePointRecord
from gate_server.db.runs import ListedRun
from gate_server.domain.anchors import anchor
from gate_server.domain.branches import all_names, follow_renames
from gate_server.domain.change_points import compare_url
from rnx.environments import EnvironmentLabel, stored_environment_label
from rnx.formatting import SPEED_OF_LIGHT_NOTE
from rnx.schema import ResultsDocument

HISTORY_WINDOW = 120  # commits per history page: enough to see a trend, light to render
AUDIT_PAGE = 100


def latest_per_branch(
    conn: Connection, repository_id: int, *, limit: int = 8, scan: int = 200
) -> list[ListedRun]:
    """The newest run for each (branch, environment, workload) among the repository's newest
    `scan` runs, most recently active first: a branch silent for `scan` uploads is not news
    for an overview. A renamed branch is one branch: its newest run, whichever name that run
    carried."""
    log = renames.log(conn, repository_id)
    latest: dict[tuple[str, str, str], ListedRun] = {}
    for run in dashboard.newest_runs(conn, repository_id, limit=scan):
        branch = follow_renames(log, run.branch)[0]
        latest.setdefault((branch, run.environment_key, run.workload), run)
        if len(latest) >= limit:
            break
    return list(latest.values())


def _summarized(conn: Connection, summaries: SummaryCache, run_ids: list[str]) -> None:
    """Every one of these runs summarised in the cache: the documents not kept there are read
    in one query, once per process (stored runs never change)."""
    missing = [rid for rid in dict.fromkeys(run_ids) if summaries.get(rid) is None]
    for run_id, document in runs.documents(conn, missing).items():
        summaries.put(run_id, summarize_document(document))


def _labels(summaries: SummaryCache, run_ids: list[str]) -> EnvironmentLabels:
    found = {rid: summaries.get(rid) for rid in run_ids}
    return EnvironmentLabels({rid: s.label for rid, s in found.items() if s is not None})


def overview(database: Database, summaries: SummaryCache, workspace_id: int) -> dict[str, Any]:
    with database.read() as conn:
        repos = dashboard.repositories_by_activity(conn, workspace_id)
        for repo in repos:
            repo["latest"] = latest_per_branch(conn, repo["id"])
        repo_ids = [repo["id"] for repo in repos]
        blocks = dashboard.recent_runs(conn, repo_ids, tier="BLOCK")
        accepts = dashboard.recent_runs(conn, repo_ids, accepted=True)
        answers = dashboard.answers(conn, [r.run_id for r in blocks])
        open_changes = change_points.open_in_workspace(conn, workspace_id)
        # Alert channels that keep failing (gate_server/domain/alerts/delivery.py); never a secret.
        failing = [c for c in alerts.channels(conn, workspace_id) if c.failing_since]
        # Each environment is named by the run it is listed with (a change point: the run
        # after the step).
        listed = [r.run_id for repo in repos for r in repo["latest"]]
        listed += [r.run_id for r in blocks + accepts] + [cp.after_run_id for cp in open_changes]
        _summarized(conn, summaries, listed)
    reasons = {rid: short_reasons(a.get("reasons") or []) for rid, a in answers.items()}
    return {
        "repos": repos,
        "blocks": blocks,
        "accepts": accepts,
        "block_reasons": reasons,
        "total_runs": sum(r["run_count"] for r in repos),
        "change_points": [_open_change(cp) for cp in open_changes],
        "failing_channels": failing,
        "labels": _labels(summaries, listed),
    }


def _open_change(cp: ChangePointRecord) -> dict[str, Any]:
    """An open change point as the overview lists it, with links to its chart and commits."""
    chart = anchor(cp.workload, set()) + "--" + cp.configuration.replace("/", "-")
    query = urlencode(
        {"branch": cp.branch, "environment": cp.environment_key, "workload": cp.workload}
    )
    return {
        "cp": cp,
        "history_url": f"/repos/{cp.repository}?{query}#{chart}",
        "compare_url": compare_url(cp.repository, cp.before_sha, cp.after_sha),
    }


@dataclass(frozen=True)
class HistoryFilter:
    """What a history page shows: a baseline branch (None: main, or the most recent one), and
    optionally one environment and one workload."""

    branch: str | None = None
    environment: str | None = None
    workload: str | None = None


def history(
    database: Database,
    summaries: SummaryCache,
    workspace_id: int,
    name: str,
    shown: HistoryFilter,
    *,
    page: int,
) -> dict[str, Any] | None:
    """A window of HISTORY_WINDOW runs of a baseline branch, drawn as one chart set per
    workload (None: no such repository)."""
    offset = (page - 1) * HISTORY_WINDOW
    with database.read() as conn:
        found = repositories.named(conn, name, workspace_id=workspace_id)
        if not found:
            return None
        repo_id = found[0].id
        branches = dashboard.baseline_branches(conn, repo_id)
        branch = shown.branch or ("main" if "main" in branches or not branches else branches[0])
        names = all_names(conn, repo_id, branch)
        environments = dashboard.history_environments(conn, repo_id, names)
        workloads = dashboard.history_workloads(conn, repo_id, names)
        rows = dashboard.history(
            conn,
            repo_id,
            names,
            environment=shown.environment,
            workload=shown.workload,
            offset=offset,
            limit=HISTORY_WINDOW + 1,
        )
        found_changes = change_points.listed(
            conn,
            repo_id,
            branch=branch,
            environment_key=shown.environment,
            workload=shown.workload,
            limit=1000,
        )
        bisected = bisections.with_steps(conn, [cp.id for cp in found_changes])
        _summarized(conn, summaries, [r.run_id for r, _ in rows])
    window = drawing_order(rows[:HISTORY_WINDOW])
    sections, events = _workload_sections(window, summaries, _marks(found_changes, bisected))
    named = _labels(summaries, [r.run_id for r, _ in window])
    return {
        "repository": name,
        "branches": branches or [branch],
        "branch": branch,
        "branch_link": branch_url(name, branch),
        "environments": environments,
        # Each environment named by its newest run in the window; the key where none is.
        "environment_labels": {
            key: next(
                (named.of(r.run_id, key) for r, _ in window if r.environment_key == key),
                EnvironmentLabel(key=key),
            )
            for key in environments
        },
        "environment": shown.environment,
        "workloads": sorted(workloads),
        "workload": shown.workload,
        "sections": sections,
        "events": events,
        "shown": len(window),
        "offset": offset,
        "page": page,
        "has_older": len(rows) > HISTORY_WINDOW,
    }


def drawing_order(
    window: list[tuple[ListedRun, dict[str, Any]]],
) -> list[tuple[ListedRun, dict[str, Any]]]:
    """The window newest first as the history draws it: an accepted run where it became the
    baseline (when it was accepted, often after later pushes), every other run where it was
    received."""
    return sorted(window, key=lambda row: row[0].accepted_at or row[0].received_at, reverse=True)


def _marks(
    found: list[ChangePointRecord], bisected: dict[int, tuple[BisectionRecord, list[StepRecord]]]
) -> dict[str, dict[str, list[ChangeMark]]]:
    """Change points as chart marks, with their bisections, by workload and configuration."""
    out: dict[str, dict[str, list[ChangeMark]]] = defaultdict(lambda: defaultdict(list))
    for cp in found:
        b, steps = bisected.get(cp.id, (None, []))
        culprit = None
        if b is not None and b.culprit_sha:
            pr = f" (#{b.culprit_pr})" if b.culprit_pr else ""
            culprit = f"{b.culprit_sha[:10]} by {b.culprit_author or '?'}{pr}"
        shown = tuple(
            StepMark(s.sha, float(s.evidence["ratio_before"]), str(s.side))
            for s in steps
            if s.evidence and "ratio_before" in s.evidence
        )
        mark = ChangeMark(
            cp.id,
            cp.after_run_id,
            cp.ratio,
            cp.low,
            cp.high,
            cp.status,
            early=cp.early,
            drift=cp.end_run_id is not None,
            culprit=culprit,
            steps=shown,
        )
        out[cp.workload][cp.configuration].append(mark)
    return out


def _workload_sections(
    window: list[tuple[ListedRun, dict[str, Any]]],
    summaries: SummaryCache,
    marks: dict[str, dict[str, list[ChangeMark]]],
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """One chart set per workload in the window (by path), and every workload's marked events,
    newest first, each naming its workload. Each workload is its own series: its points, its
    environment changes, its accepts (a baseline belongs to one workload)."""
    by_workload: dict[str, list[tuple[ListedRun, dict[str, Any]]]] = {}
    for row in window:
        by_workload.setdefault(row[0].workload, []).append(row)
    position = {run.run_id: i for i, (run, _) in enumerate(window)}  # 0 is the newest
    sections, events = [], []
    anchors: set[str] = set()
    for workload in sorted(by_workload):
        charts, marked = build_history(
            _history_runs(by_workload[workload], summaries), marks.get(workload, {})
        )
        label = anchor(workload, anchors)
        sections.append({"workload": workload, "anchor": label, "charts": charts})
        events += [{**e, "workload": workload} for e in marked]
    events.sort(key=lambda e: position[e["run"].run_id])
    return sections, events


def _history_runs(
    window: list[tuple[ListedRun, dict[str, Any]]], summaries: SummaryCache
) -> list[HistoryRun]:
    """The window's runs oldest first, each with its summary (a run without one is skipped)."""
    out = []
    for run, answer in reversed(window):
        summary = summaries.get(run.run_id)
        if summary is None:  # evicted between the two reads: nothing to draw
            continue
        out.append(
            HistoryRun(
                run_id=run.run_id,
                sha=run.sha,
                # An accepted run is drawn at its accept time (drawing_order), and says so.
                created_at=run.accepted_at or run.created_at,
                environment=run.environment_key,
                tier=run.tier,
                is_baseline=run.baseline_branch is not None,
                accepted_reason=run.accept_reason if run.accepted_at else None,
                ratios=ratios_from_answer(answer),
                summary=summary,
            )
        )
    return out


def _as_the_schema_reads(document: str | bytes) -> dict[str, Any]:
    """A stored document with the schema's defaults filled in (a document may leave out `tool`
    or a correctness record's errors), so the page finds every field it draws. A document
    today's schema no longer reads is drawn as stored."""
    try:
        return ResultsDocument.model_validate_json(document).model_dump(mode="json")
    except ValidationError:
        return dict(json.loads(document))


def run_page(database: Database, workspace_id: int, run_id: str) -> dict[str, Any] | None:
    """A run with its distributions, correctness and environment (None: not in the workspace)."""
    with database.read() as conn:
        run = runs.by_run_id(conn, run_id)
        document = runs.document(conn, run_id)
        if run is None or document is None or run.workspace_id != workspace_id:
            return None
        baseline = run.answer.get("baseline") or {}
        base_ids = [str(b) for b in baseline.get("run_ids") or []]
        base_docs_raw = runs.documents(conn, base_ids)
        kept_traces = traces.names(conn, run_id)
    doc = _as_the_schema_reads(document)
    base_docs = [_as_the_schema_reads(base_docs_raw[b]) for b in base_ids if b in base_docs_raw]
    newest_base = base_docs[0] if base_docs else None
    sol_cells, sol_peaks = speed_of_light_cells(doc)
    return {
        "run": run,
        "doc": doc,
        "reasons": run.answer.get("reasons") or [],
        "comparisons": run.answer.get("comparisons") or [],
        "explained": explained(run.answer.get("comparisons") or []),
        "traces": kept_traces,
        "baseline": baseline or None,
        "base_ids": base_ids,
        "commit_link": commit_url(run.repository, run.sha),
        "pr_link": pr_url(run.repository, run.pr_number) if run.pr_number else None,
        "branch_link": branch_url(run.repository, run.branch),
        "distributions": distributions(doc, base_docs),
        "paired": doc.get("settings", {}).get("mode") == "paired",
        "correctness": correctness_rows(doc),
        "speed_of_light": sol_cells,
        "speed_of_light_peaks": sol_peaks,
        "speed_of_light_note": SPEED_OF_LIGHT_NOTE,
        "environment": environment_rows(
            doc.get("environment") or {},
            None if newest_base is None else newest_base.get("environment") or {},
        ),
        "base_environment_run": base_ids[0] if base_ids else None,
        "headline": run_headline(run),
        "environment_label": stored_environment_label(
            doc.get("environment"), key=run.environment_key
        ),
        "base_environment_label": None
        if newest_base is None
        else stored_environment_label(
            newest_base.get("environment"), key=str(baseline.get("environment"))
        ),
    }


def audit_page(database: Database, workspace_id: int, page: int) -> list[dict[str, Any]]:
    """A page of the workspace's audit entries, newest first, and one more if there are older."""
    with database.read() as conn:
        return audit.of_workspace(
            conn, workspace_id, offset=(page - 1) * AUDIT_PAGE, limit=AUDIT_PAGE + 1
        )
