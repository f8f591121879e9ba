"""Read-only queries for the dashboard's pages (gate_server/dashboard). Each one is bounded by a
LIMIT and walks an index, so pages stay fast however long a repository's history grows."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import fields
from datetime import datetime, timezone
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.engine import Connection

from gate_server.db.rows import as_record, aware
from gate_server.db.runs import ListedRun
from gate_server.db.schema import repositories, runs

# The columns of a ListedRun (its repository's name comes from the join).
_COLUMNS = [runs.c[f.name] for f in fields(ListedRun) if f.name != "repository"]
_NEWEST_FIRST = (runs.c.received_at.desc(), runs.c.id.desc())


def _run(m: Any) -> ListedRun:
    return as_record(ListedRun, m)


def _select(*extra: Any) -> Any:
    return select(*_COLUMNS, *extra, repositories.c.name.label("repository")).select_from(
        runs.join(repositories, runs.c.repository_id == repositories.c.id)
    )


def repositories_by_activity(conn: Connection, workspace_id: int) -> list[dict[str, Any]]:
    """The workspace's repositories with their run counts and last upload, latest first.

    Per repository, so both figures come from ix_runs_repository_received alone (a count over
    an index range, a max at its end) instead of a scan of every run in the workspace.
    """
    repos = conn.execute(
        select(repositories.c.id, repositories.c.name).where(
            repositories.c.workspace_id == workspace_id
        )
    ).all()
    out = []
    for repo in repos:
        count, last = conn.execute(
            select(func.count(), func.max(runs.c.received_at)).where(
                runs.c.repository_id == repo.id
            )
        ).one()
        out.append(
            {
                "id": repo.id,
                "name": repo.name,
                "run_count": int(count),
                "last_received_at": aware(last),
            }
        )
    never = datetime.min.replace(tzinfo=timezone.utc)
    out.sort(key=lambda r: (r["last_received_at"] or never, r["name"]), reverse=True)
    return out


def newest_runs(conn: Connection, repository_id: int, *, limit: int) -> list[ListedRun]:
    """The repository's newest `limit` runs, newest first (down ix_runs_repository_received)."""
    rows = conn.execute(
        _select().where(runs.c.repository_id == repository_id).order_by(*_NEWEST_FIRST).limit(limit)
    )
    return [_run(r._mapping) for r in rows]


def recent_runs(
    conn: Connection,
    repository_ids: Sequence[int],
    *,
    tier: str | None = None,
    accepted: bool = False,
    limit: int = 10,
    scan: int = 2000,
) -> list[ListedRun]:
    """The newest runs of these repositories, optionally only one tier or only accepted ones
    (newest accept first), found among each repository's newest `scan` runs: a bounded walk
    down ix_runs_repository_received, since BLOCKs and accepts are too rare to find by
    walking the whole table."""
    found: list[ListedRun] = []
    for repository_id in repository_ids:
        newest = (
            select(runs.c.id)
            .where(runs.c.repository_id == repository_id)
            .order_by(*_NEWEST_FIRST)
            .limit(scan)
            .subquery()
        )
        query = _select().where(runs.c.id.in_(select(newest.c.id)))
        if tier is not None:
            query = query.where(runs.c.tier == tier)
        if accepted:
            query = query.where(runs.c.accepted_at.is_not(None))
        order = runs.c.accepted_at.desc() if accepted else runs.c.received_at.desc()
        rows = conn.execute(query.order_by(order, runs.c.id.desc()).limit(limit))
        found.extend(_run(r._mapping) for r in rows)
    found.sort(key=lambda r: (r.accepted_at if accepted else None) or r.received_at, reverse=True)
    return found[:limit]


def baseline_branches(conn: Connection, repository_id: int, *, scan: int = 300) -> list[str]:
    """Branches with baselines among the repository's newest `scan` runs, most recent first
    (a bounded walk down ix_runs_repository_received, not a DISTINCT over every run)."""
    rows = conn.execute(
        select(runs.c.baseline_branch)
        .where(runs.c.repository_id == repository_id)
        .order_by(*_NEWEST_FIRST)
        .limit(scan)
    )
    return list(dict.fromkeys(str(b) for b in rows.scalars() if b is not None))


def _history_filter(repository_id: int, names: Sequence[str]) -> Any:
    # The branch's own pushes (BLOCKed ones too, shown as such) under any name it had, and its
    # baselines (a rename moved those to its current name, names[0]).
    return (runs.c.repository_id == repository_id) & (
        (runs.c.branch.in_(list(names)) & runs.c.pr_number.is_(None))
        | (runs.c.baseline_branch == names[0])
    )


def history(
    conn: Connection,
    repository_id: int,
    names: Sequence[str],
    *,
    environment: str | None = None,
    workload: str | None = None,
    offset: int = 0,
    limit: int = 120,
) -> list[tuple[ListedRun, dict[str, Any]]]:
    """A window of a baseline branch's runs (of one environment, of one workload, when given),
    newest first, each with its stored answer. `names` are the branch's name now, then the
    names it had (gate_server/domain/branches.py).

    Documents are fetched separately (runs.documents) and only for runs the dashboard has not
    summarized yet: a stored run never changes.
    """
    query = _select(runs.c.answer).where(_history_filter(repository_id, names))
    if environment is not None:
        query = query.where(runs.c.environment_key == environment)
    if workload is not None:
        query = query.where(runs.c.workload == workload)
    rows = conn.execute(query.order_by(*_NEWEST_FIRST).offset(offset).limit(limit))
    return [(_run(r._mapping), json.loads(r.answer)) for r in rows]


def _history_values(
    conn: Connection, repository_id: int, names: Sequence[str], column: Any, scan: int
) -> list[str]:
    """The values of `column` among a branch's newest `scan` history runs, most recent first:
    a bounded walk, so a repository with a million runs costs what one with a thousand does."""
    rows = conn.execute(
        select(column)
        .where(_history_filter(repository_id, names))
        .order_by(*_NEWEST_FIRST)
        .limit(scan)
    )
    return list(dict.fromkeys(str(e) for e in rows.scalars()))


def history_environments(
    conn: Connection, repository_id: int, names: Sequence[str], *, scan: int = 300
) -> list[str]:
    """The environments of a branch's newest `scan` history runs, most recent first."""
    return _history_values(conn, repository_id, names, runs.c.environment_key, scan)


def history_workloads(
    conn: Connection, repository_id: int, names: Sequence[str], *, scan: int = 300
) -> list[str]:
    """The workloads of a branch's newest `scan` history runs, most recent first."""
    return _history_values(conn, repository_id, names, runs.c.workload, scan)


def answers(conn: Connection, run_ids: list[str]) -> dict[str, dict[str, Any]]:
    """The stored answers (tier, reasons, comparisons) of a few runs, by run id."""
    if not run_ids:
        return {}
    rows = conn.execute(select(runs.c.run_id, runs.c.answer).where(runs.c.run_id.in_(run_ids)))
    return {str(r.run_id): json.loads(r.answer) for r in rows}
