"""Auto-sync's links and the commits it dispatched (gate_server/domain/autosync/): every SQL
statement."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import and_, exists, func, insert, select, update
from sqlalchemy.engine import Connection

from gate_server.clock import utcnow
from gate_server.db.engine import advisory_lock
from gate_server.db.rows import as_record, aware
from gate_server.db.schema import autosync_commits, autosync_links, runs

QUEUED = "queued"
DISPATCHING = "dispatching"  # written before the dispatch: never dispatched twice
DISPATCHED = "dispatched"
SKIPPED = "skipped"  # a run at the commit came back without us (its own push's, say)
REFUSED = "refused"  # GitHub refused the dispatch for good (no such workflow or input)
MAX_LATER = 250  # commits remembered after one (compare-commits lists no more)
AUTOSYNC_LOCK = 727_274_040  # one repository's dispatches are decided by one process at a time


@dataclass(frozen=True)
class Link:
    id: int
    repository_id: int
    branch: str
    workload: str
    created_by: str
    created_at: datetime


@dataclass(frozen=True)
class SyncCommit:
    id: int
    repository_id: int
    sha: str
    branch: str
    workloads: list[str]
    reason: str
    state: str
    due_at: datetime
    dispatched_at: datetime | None
    note: str | None
    later: list[str]


def _commit(m: Any) -> SyncCommit:
    return as_record(SyncCommit, m, workloads=json.loads(m["workloads"]))


# ---- links


def links(conn: Connection, repository_id: int, branch: str | None = None) -> list[Link]:
    """The repository's live links (of one branch), oldest first."""
    query = select(autosync_links).where(
        autosync_links.c.repository_id == repository_id, autosync_links.c.removed_at.is_(None)
    )
    if branch is not None:
        query = query.where(autosync_links.c.branch == branch)
    rows = conn.execute(query.order_by(autosync_links.c.id))
    return [as_record(Link, r._mapping) for r in rows]


def add_link(
    conn: Connection, repository_id: int, branch: str, workload: str, created_by: str
) -> tuple[Link, bool]:
    """The live link, and whether it is new (linking twice is not an error). The caller holds
    the repository's lock (hold), so two requests never both add it."""
    for link in links(conn, repository_id, branch):
        if link.workload == workload:
            return link, False
    conn.execute(
        insert(autosync_links).values(
            repository_id=repository_id,
            branch=branch,
            workload=workload,
            created_by=created_by,
            created_at=utcnow(),
        )
    )
    added = [k for k in links(conn, repository_id, branch) if k.workload == workload]
    return added[0], True


def remove_link(conn: Connection, repository_id: int, branch: str, workload: str) -> bool:
    """False when no such live link exists."""
    result = conn.execute(
        update(autosync_links)
        .where(
            autosync_links.c.repository_id == repository_id,
            autosync_links.c.branch == branch,
            autosync_links.c.workload == workload,
            autosync_links.c.removed_at.is_(None),
        )
        .values(removed_at=utcnow())
    )
    return result.rowcount > 0


def move_branch(conn: Connection, repository_id: int, old: str, new: str) -> None:
    """A renamed branch keeps its links and its queued commits (dispatched on the new name)."""
    on_new = {k.workload for k in links(conn, repository_id, new)}
    for link in links(conn, repository_id, old):
        values: dict[str, Any] = {"branch": new}
        if link.workload in on_new:  # linked on both names: one link is enough
            values = {"removed_at": utcnow()}
        conn.execute(update(autosync_links).where(autosync_links.c.id == link.id).values(values))
    conn.execute(
        update(autosync_commits)
        .where(
            autosync_commits.c.repository_id == repository_id,
            autosync_commits.c.branch == old,
            autosync_commits.c.state == QUEUED,
        )
        .values(branch=new)
    )


# ---- commits


def hold(conn: Connection, repository_id: int) -> None:
    """Decide this repository's auto-sync dispatches alone until the transaction ends."""
    advisory_lock(conn, AUTOSYNC_LOCK, repository_id)


def known(conn: Connection, repository_id: int, shas: Sequence[str]) -> set[str]:
    """Which of `shas` auto-sync has a row for already."""
    if not shas:
        return set()
    rows = conn.execute(
        select(autosync_commits.c.sha).where(
            autosync_commits.c.repository_id == repository_id,
            autosync_commits.c.sha.in_(list(shas)),
        )
    )
    return {r.sha for r in rows}


def queue(
    conn: Connection,
    repository_id: int,
    sha: str,
    *,
    branch: str,
    workloads: list[str],
    reason: str,
    due_at: datetime,
    later: Sequence[str] = (),
) -> bool:
    """Queue `sha` for a dispatch; False when it has a row already (never queued twice). The
    caller holds the repository's lock, so the check and the insert are one step."""
    if known(conn, repository_id, [sha]):
        return False
    conn.execute(
        insert(autosync_commits).values(
            repository_id=repository_id,
            sha=sha,
            branch=branch,
            workloads=json.dumps(sorted(workloads)),
            reason=reason,
            state=QUEUED,
            due_at=due_at,
            created_at=utcnow(),
            later=json.dumps(list(later)[-MAX_LATER:]),
        )
    )
    return True


def commits(conn: Connection, repository_id: int, *, newest: int | None = None) -> list[SyncCommit]:
    """The repository's auto-sync commits, oldest first (`newest`: only that many, the newest)."""
    query = select(autosync_commits).where(autosync_commits.c.repository_id == repository_id)
    if newest is not None:
        query = query.order_by(autosync_commits.c.id.desc()).limit(newest)
        return [_commit(r._mapping) for r in conn.execute(query)][::-1]
    return [_commit(r._mapping) for r in conn.execute(query.order_by(autosync_commits.c.id))]


def _run_at_commit() -> Any:
    return exists().where(
        runs.c.repository_id == autosync_commits.c.repository_id,
        runs.c.sha == autosync_commits.c.sha,
    )


def in_flight(conn: Connection, repository_id: int, timeout: timedelta) -> int:
    """Dispatches whose run has not come back (and may still: younger than `timeout`)."""
    return int(
        conn.execute(
            select(func.count())
            .select_from(autosync_commits)
            .where(
                autosync_commits.c.repository_id == repository_id,
                autosync_commits.c.state.in_((DISPATCHING, DISPATCHED)),
                autosync_commits.c.dispatched_at > utcnow() - timeout,
                ~_run_at_commit(),
            )
        ).scalar_one()
    )


def due(conn: Connection, repository_id: int) -> list[SyncCommit]:
    """Queued commits, oldest first (the history fills in commit order)."""
    rows = conn.execute(
        select(autosync_commits)
        .where(
            autosync_commits.c.repository_id == repository_id,
            autosync_commits.c.state == QUEUED,
        )
        .order_by(autosync_commits.c.due_at, autosync_commits.c.id)
    )
    return [_commit(r._mapping) for r in rows]


def set_state(conn: Connection, commit_id: int, state: str, *, note: str | None = None) -> None:
    values: dict[str, Any] = {"state": state, "note": note}
    if state == DISPATCHING:
        values["dispatched_at"] = utcnow()
    conn.execute(update(autosync_commits).where(autosync_commits.c.id == commit_id).values(values))


def withdraw(conn: Connection, commit_id: int) -> None:
    """GitHub refused the dispatch (nothing runs): queued again, tried later."""
    conn.execute(
        update(autosync_commits)
        .where(autosync_commits.c.id == commit_id, autosync_commits.c.state == DISPATCHING)
        .values(state=QUEUED, dispatched_at=None)
    )


def benchmarked(
    conn: Connection, repository_id: int, shas: Sequence[str], workloads: Sequence[str]
) -> dict[str, set[str]]:
    """For each of `shas` that has stored runs of `workloads`: which of them."""
    found: dict[str, set[str]] = {}
    if not shas or not workloads:
        return found
    rows = conn.execute(
        select(runs.c.sha, runs.c.workload)
        .where(
            runs.c.repository_id == repository_id,
            runs.c.sha.in_(list(shas)),
            runs.c.workload.in_(list(workloads)),
        )
        .distinct()
    )
    for r in rows:
        found.setdefault(r.sha, set()).add(r.workload)
    return found


def newest_covered(
    conn: Connection, repository_id: int, branch: str, workloads: Sequence[str]
) -> str | None:
    """The newest commit of `branch` known to be benchmarked, or dispatched to be: its newest
    baseline run of a linked workload, or auto-sync's newest row (whichever came last). The
    every-N rule counts the commits after it."""
    run = conn.execute(
        select(runs.c.sha, runs.c.baseline_at.label("at"))
        .where(
            runs.c.repository_id == repository_id,
            runs.c.baseline_branch == branch,
            runs.c.workload.in_(list(workloads)),
        )
        .order_by(runs.c.baseline_at.desc(), runs.c.id.desc())
        .limit(1)
    ).first()
    row = conn.execute(
        select(autosync_commits.c.sha, autosync_commits.c.created_at.label("at"))
        .where(
            and_(
                autosync_commits.c.repository_id == repository_id,
                autosync_commits.c.branch == branch,
            )
        )
        .order_by(autosync_commits.c.id.desc())
        .limit(1)
    ).first()
    timed = [(aware(c.at), str(c.sha)) for c in (run, row) if c is not None and c.at is not None]
    return max(timed)[1] if timed else None


def place_in_history(conn: Connection, run_id: str) -> bool:
    """Put an auto-sync run where its commit is in the history: a baseline's history is ordered
    by baseline_at (arrival), and the run of a pushed commit arrives after the runs of commits
    that came later in its push (the push's own run of its head, another dispatch that ended
    sooner). Its baseline_at becomes a millisecond before the earliest of theirs in the same
    series; True when it moved."""
    run = conn.execute(select(runs).where(runs.c.run_id == run_id)).first()
    if run is None or run.baseline_branch is None or run.baseline_at is None:
        return False
    row = conn.execute(
        select(autosync_commits.c.later).where(
            autosync_commits.c.repository_id == run.repository_id,
            autosync_commits.c.sha == run.sha,
        )
    ).first()
    later = [] if row is None else json.loads(row.later)
    if not later:
        return False
    first_later = conn.execute(
        select(func.min(runs.c.baseline_at)).where(
            runs.c.repository_id == run.repository_id,
            runs.c.baseline_branch == run.baseline_branch,
            runs.c.environment_key == run.environment_key,
            runs.c.workload == run.workload,
            runs.c.sha.in_(later),
            runs.c.id != run.id,
        )
    ).scalar_one()
    first, mine = aware(first_later), aware(run.baseline_at)
    if first is None or mine is None or first > mine:
        return False
    placed = first - timedelta(milliseconds=1)
    conn.execute(update(runs).where(runs.c.id == run.id).values(baseline_at=placed))
    return True
