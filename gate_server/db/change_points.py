"""Change points: step changes found in a baseline branch's history, stored once each."""

from __future__ import annotations

from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any

from sqlalchemy import insert, select, update
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from gate_server.clock import utcnow
from gate_server.db.engine import CHANGE_LOCK, advisory_lock
from gate_server.db.rows import as_record
from gate_server.db.runs import BaselineKey
from gate_server.db.schema import change_points, repositories, run_locations, runs

OPEN = "open"
ACKNOWLEDGED = "acknowledged"
RESOLVED = "resolved"
STATUSES = (OPEN, ACKNOWLEDGED, RESOLVED)
NO_CONFIGURATION = ""  # run_locations' row for a run that has no usable configuration


@dataclass(frozen=True)
class HistoryRun:
    run_id: str
    sha: str


def history(conn: Connection, key: BaselineKey, limit: int) -> list[HistoryRun]:
    """The newest `limit` baseline runs of `key`, oldest first, without their documents (the
    order of runs.baselines_query, on the same index)."""
    rows = conn.execute(
        select(runs.c.run_id, runs.c.sha)
        .where(
            runs.c.repository_id == key.repository_id,
            runs.c.baseline_branch == key.branch,
            runs.c.environment_key == key.environment_key,
            runs.c.workload == key.workload,
        )
        .order_by(runs.c.baseline_at.desc(), runs.c.id.desc())
        .limit(limit)
    ).all()
    return [HistoryRun(str(r.run_id), str(r.sha)) for r in reversed(rows)]


def locations(conn: Connection, run_ids: list[str]) -> dict[str, dict[str, float]]:
    """The stored locations of these runs, by run and configuration (a run stored with none
    maps to {}); runs not yet summarised are missing."""
    out: dict[str, dict[str, float]] = {}
    for start in range(0, len(run_ids), 500):
        rows = conn.execute(
            select(run_locations).where(run_locations.c.run_id.in_(run_ids[start : start + 500]))
        )
        for r in rows:
            found = out.setdefault(str(r.run_id), {})
            if r.configuration != NO_CONFIGURATION:
                found[str(r.configuration)] = float(r.location)
    return out


def store_locations(conn: Connection, run_id: str, found: dict[str, float]) -> None:
    """Keep a run's locations; nothing when another process stored them first."""
    rows = [{"run_id": run_id, "configuration": c, "location": v} for c, v in found.items()]
    rows = rows or [{"run_id": run_id, "configuration": NO_CONFIGURATION, "location": 0.0}]
    try:
        with conn.begin_nested():
            conn.execute(insert(run_locations), rows)
    except IntegrityError:
        pass


@dataclass(frozen=True)
class NewChangePoint:
    repository_id: int
    branch: str
    environment_key: str
    workload: str
    configuration: str
    before_run_id: str
    before_sha: str
    after_run_id: str
    after_sha: str
    ratio: float
    low: float
    high: float
    p_value: float
    early: bool  # found in a short history, on weaker evidence (stats.ChangePoint)
    end_run_id: str | None  # a drift: the first run at its newest level; None for a step
    end_sha: str | None


@dataclass(frozen=True)
class ChangePointRecord(NewChangePoint):
    id: int
    repository: str  # OWNER/NAME
    detected_at: datetime
    status: str
    note: str | None
    acknowledged_at: datetime | None
    acknowledged_by: str | None
    resolved_at: datetime | None
    undoes_id: int | None


def _select() -> Any:
    return select(change_points, repositories.c.name.label("repository")).select_from(
        change_points.join(repositories, change_points.c.repository_id == repositories.c.id)
    )


def _record(m: Any) -> ChangePointRecord:
    return as_record(ChangePointRecord, m)


def _of_series(key: BaselineKey) -> tuple[Any, ...]:
    return (
        change_points.c.repository_id == key.repository_id,
        change_points.c.branch == key.branch,
        change_points.c.environment_key == key.environment_key,
        change_points.c.workload == key.workload,
    )


def hold_series(conn: Connection, key: BaselineKey) -> None:
    """Until this transaction ends, no other process writes change points of the repository
    (PostgreSQL: an advisory lock; SQLite's write transactions are one at a time already)."""
    advisory_lock(conn, CHANGE_LOCK, key.repository_id)


def move_branch(conn: Connection, repository_id: int, old: str, new: str) -> None:
    """A renamed branch keeps its change points (as runs.move_baselines keeps its baselines)."""
    conn.execute(
        update(change_points)
        .where(change_points.c.repository_id == repository_id, change_points.c.branch == old)
        .values(branch=new)
    )


def of_series(conn: Connection, key: BaselineKey) -> list[ChangePointRecord]:
    """Every change point of one baseline series (all configurations), oldest first."""
    rows = conn.execute(_select().where(*_of_series(key)).order_by(change_points.c.id))
    return [_record(r._mapping) for r in rows]


def insert_new(conn: Connection, new: NewChangePoint, *, undoes_id: int | None) -> int | None:
    """Store a change point; None when the same change (series, configuration, first run
    after) is stored already. One that undoes another is stored resolved, and so is that one."""
    now = utcnow()
    values = {f.name: getattr(new, f.name) for f in fields(NewChangePoint)}
    values.update(detected_at=now, status=OPEN, undoes_id=undoes_id)
    if undoes_id is not None:
        values.update(status=RESOLVED, resolved_at=now)
    try:
        with conn.begin_nested():
            new_id = conn.execute(
                insert(change_points).values(**values).returning(change_points.c.id)
            ).scalar_one()
    except IntegrityError:
        return None
    if undoes_id is not None:
        conn.execute(
            update(change_points)
            .where(change_points.c.id == undoes_id, change_points.c.status != RESOLVED)
            .values(status=RESOLVED, resolved_at=now)
        )
    return int(new_id)


def by_id(conn: Connection, change_id: int) -> ChangePointRecord | None:
    row = conn.execute(_select().where(change_points.c.id == change_id)).first()
    return None if row is None else _record(row._mapping)


def moved_with(
    conn: Connection, found: ChangePointRecord, limit: int = 10
) -> list[ChangePointRecord]:
    """The other change points found at the same commit of the same repository and branch
    (other configurations, workloads or environments that moved with it), oldest first."""
    query = _select().where(
        change_points.c.repository_id == found.repository_id,
        change_points.c.branch == found.branch,
        change_points.c.after_sha == found.after_sha,
        change_points.c.id != found.id,
    )
    rows = conn.execute(query.order_by(change_points.c.id).limit(limit))
    return [_record(r._mapping) for r in rows]


def listed(
    conn: Connection,
    repository_id: int,
    *,
    branch: str | None = None,
    environment_key: str | None = None,
    workload: str | None = None,
    status: str | None = None,
    limit: int = 500,
) -> list[ChangePointRecord]:
    """A repository's change points, newest first, filtered by whichever are given."""
    query = _select().where(change_points.c.repository_id == repository_id)
    for column, value in (
        (change_points.c.branch, branch),
        (change_points.c.environment_key, environment_key),
        (change_points.c.workload, workload),
        (change_points.c.status, status),
    ):
        if value is not None:
            query = query.where(column == value)
    rows = conn.execute(query.order_by(change_points.c.id.desc()).limit(limit))
    return [_record(r._mapping) for r in rows]


def open_in_workspace(
    conn: Connection, workspace_id: int, *, limit: int = 100
) -> list[ChangePointRecord]:
    """The open change points of a workspace's repositories, newest first (the overview)."""
    rows = conn.execute(
        _select()
        .where(repositories.c.workspace_id == workspace_id, change_points.c.status == OPEN)
        .order_by(change_points.c.id.desc())
        .limit(limit)
    )
    return [_record(r._mapping) for r in rows]


def extend_drift(conn: Connection, change_id: int, drift: NewChangePoint) -> None:
    """A stored change point found again as part of a longer drift (stats.ChangePoint.continues):
    it becomes that drift, with its end and total change; its start, status and id stay, so
    a drift is one change point however many looks see it grow."""
    conn.execute(
        update(change_points)
        .where(change_points.c.id == change_id)
        .values(
            ratio=drift.ratio,
            low=drift.low,
            high=drift.high,
            p_value=drift.p_value,
            end_run_id=drift.end_run_id,
            end_sha=drift.end_sha,
        )
    )


def acknowledge(conn: Connection, change_id: int, *, note: str, actor: str) -> None:
    """Record the note; an open change point becomes acknowledged (a resolved one stays so)."""
    now = utcnow()
    conn.execute(
        update(change_points)
        .where(change_points.c.id == change_id)
        .values(note=note, acknowledged_at=now, acknowledged_by=actor)
    )
    conn.execute(
        update(change_points)
        .where(change_points.c.id == change_id, change_points.c.status == OPEN)
        .values(status=ACKNOWLEDGED)
    )
