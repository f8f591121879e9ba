"""Bisections of change points and their steps (gate_server/domain/bisection/): every SQL
statement."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import delete, func, insert, select, update
from sqlalchemy.engine import Connection

from gate_server.clock import utcnow
from gate_server.db.engine import advisory_lock
from gate_server.db.rows import as_record
from gate_server.db.schema import bisection_steps, bisections

RUNNING = "running"
FOUND = "found"
STOPPED = "stopped"
CANCELLED = "cancelled"
DISPATCHING = "dispatching"  # written before the dispatch: never dispatched twice
DISPATCHED = "dispatched"
MEASURED = "measured"
BISECT_LOCK = 727_274_032  # one bisection's steps are decided by one process at a time
START_LOCK = 727_274_033  # one change point's bisection is created by one process


@dataclass(frozen=True)
class BisectionRecord:
    id: int
    change_point_id: int
    repository_id: int
    commits: list[dict[str, Any]]
    state: str
    culprit_sha: str | None
    culprit_pr: int | None
    culprit_author: str | None
    low_sha: str | None
    high_sha: str | None
    reason: str | None
    created_at: datetime
    ended_at: datetime | None


@dataclass(frozen=True)
class StepRecord:
    id: int
    bisection_id: int
    commit_index: int
    attempt: int
    sha: str
    state: str
    run_id: str | None
    side: str | None
    evidence: dict[str, Any] | None
    dispatched_at: datetime | None
    measured_at: datetime | None


def _bisection(m: Any) -> BisectionRecord:
    return as_record(BisectionRecord, m, commits=json.loads(m["commits"]))


def _step(m: Any) -> StepRecord:
    evidence = None if m["evidence"] is None else json.loads(m["evidence"])
    return as_record(StepRecord, m, evidence=evidence)


def create(
    conn: Connection, change_point_id: int, repository_id: int, commits: list[dict[str, Any]]
) -> int:
    """A new running bisection of `change_point_id` (the caller checked there is none)."""
    return int(
        conn.execute(
            insert(bisections)
            .values(
                change_point_id=change_point_id,
                repository_id=repository_id,
                commits=json.dumps(commits),
                state=RUNNING,
                created_at=utcnow(),
            )
            .returning(bisections.c.id)
        ).scalar_one()
    )


def get(conn: Connection, bisection_id: int) -> BisectionRecord | None:
    row = conn.execute(select(bisections).where(bisections.c.id == bisection_id)).first()
    return None if row is None else _bisection(row._mapping)


def of_change_point(conn: Connection, change_point_id: int) -> BisectionRecord | None:
    row = conn.execute(
        select(bisections).where(bisections.c.change_point_id == change_point_id)
    ).first()
    return None if row is None else _bisection(row._mapping)


def hold(conn: Connection, bisection_id: int) -> None:
    """Decide this bisection's next step alone until the transaction ends (PostgreSQL: an
    advisory lock; SQLite: its one writer already)."""
    advisory_lock(conn, BISECT_LOCK, bisection_id)


def hold_change_point(conn: Connection, change_point_id: int) -> None:
    """Create this change point's bisection alone until the transaction ends."""
    advisory_lock(conn, START_LOCK, change_point_id)


def steps(conn: Connection, bisection_id: int) -> list[StepRecord]:
    """Its steps in the order they were dispatched."""
    rows = conn.execute(
        select(bisection_steps)
        .where(bisection_steps.c.bisection_id == bisection_id)
        .order_by(bisection_steps.c.id)
    )
    return [_step(r._mapping) for r in rows]


def add_step(conn: Connection, bisection_id: int, index: int, attempt: int, sha: str) -> int:
    return int(
        conn.execute(
            insert(bisection_steps)
            .values(
                bisection_id=bisection_id,
                commit_index=index,
                attempt=attempt,
                sha=sha,
                state=DISPATCHING,
                dispatched_at=utcnow(),  # when it was decided: a step's timeout counts from it
            )
            .returning(bisection_steps.c.id)
        ).scalar_one()
    )


def mark_dispatched(conn: Connection, step_id: int) -> None:
    conn.execute(
        update(bisection_steps)
        .where(bisection_steps.c.id == step_id, bisection_steps.c.state == DISPATCHING)
        .values(state=DISPATCHED)
    )


def withdraw(conn: Connection, step_id: int) -> None:
    """Remove a step whose dispatch GitHub refused (nothing runs for it)."""
    conn.execute(
        delete(bisection_steps).where(
            bisection_steps.c.id == step_id, bisection_steps.c.state == DISPATCHING
        )
    )


def in_flight(conn: Connection, repository_id: int) -> int:
    """Dispatches of the repository's running bisections whose run has not come back."""
    return int(
        conn.execute(
            select(func.count())
            .select_from(bisection_steps.join(bisections))
            .where(
                bisections.c.repository_id == repository_id,
                bisections.c.state == RUNNING,
                bisection_steps.c.state.in_((DISPATCHING, DISPATCHED)),
            )
        ).scalar_one()
    )


def record_measurement(
    conn: Connection, step_id: int, run_id: str | None, side: str, evidence: dict[str, Any]
) -> None:
    conn.execute(
        update(bisection_steps)
        .where(bisection_steps.c.id == step_id)
        .values(
            state=MEASURED,
            run_id=run_id,
            side=side,
            evidence=json.dumps(evidence),
            measured_at=utcnow(),
        )
    )


def finish(conn: Connection, bisection_id: int, state: str, **found: Any) -> bool:
    """End a running bisection (FOUND, STOPPED or CANCELLED) with what it found (culprit_sha,
    culprit_pr, culprit_author, low_sha, high_sha, reason); False when it had ended already."""
    result = conn.execute(
        update(bisections)
        .where(bisections.c.id == bisection_id, bisections.c.state == RUNNING)
        .values(state=state, ended_at=utcnow(), **found)
    )
    return result.rowcount == 1


def set_pull_request(conn: Connection, bisection_id: int, number: int) -> None:
    conn.execute(
        update(bisections).where(bisections.c.id == bisection_id).values(culprit_pr=number)
    )


def with_steps(
    conn: Connection, change_point_ids: list[int]
) -> dict[int, tuple[BisectionRecord, list[StepRecord]]]:
    """The bisections of these change points with their steps, by change point (the
    dashboard's history charts)."""
    out: dict[int, tuple[BisectionRecord, list[StepRecord]]] = {}
    for start in range(0, len(change_point_ids), 500):
        chunk = change_point_ids[start : start + 500]
        found = [
            _bisection(r._mapping)
            for r in conn.execute(select(bisections).where(bisections.c.change_point_id.in_(chunk)))
        ]
        by_id = {b.id: b for b in found}
        steps: dict[int, list[StepRecord]] = {b.id: [] for b in found}
        if by_id:
            rows = conn.execute(
                select(bisection_steps)
                .where(bisection_steps.c.bisection_id.in_(list(by_id)))
                .order_by(bisection_steps.c.id)
            )
            for r in rows:
                step = _step(r._mapping)
                steps[step.bisection_id].append(step)
        out.update({b.change_point_id: (b, steps[b.id]) for b in found})
    return out
