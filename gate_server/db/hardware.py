"""What the dashboard's /hardware page picks from: the environments that have a baseline of a
workload, per repository and baseline branch."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.engine import Connection

from gate_server.db.rows import as_record, aware
from gate_server.db.runs import BaselineKey, BaselineRun
from gate_server.db.schema import repositories, runs


@dataclass(frozen=True)
class BaselinedEnvironment:
    repository_id: int
    repository: str
    branch: str  # the baseline branch
    workload: str
    environment_key: str
    baselines: int  # how many baseline runs it has (among the newest scanned)
    newest: datetime | None  # when the newest became a baseline


def baselined_environments(
    conn: Connection, repository_ids: Sequence[int], *, scan: int = 2000
) -> list[BaselinedEnvironment]:
    """Every (branch, workload, environment) with a baseline among each repository's newest
    `scan` baseline runs: a bounded walk down ix_runs_repository_received, so a repository
    with a million runs costs what one with a few thousand does."""
    found: list[BaselinedEnvironment] = []
    for repository_id in repository_ids:
        newest = (
            select(runs.c.id)
            .where(runs.c.repository_id == repository_id)
            .where(runs.c.baseline_branch.is_not(None))
            .order_by(runs.c.received_at.desc(), runs.c.id.desc())
            .limit(scan)
            .subquery()
        )
        rows = conn.execute(
            select(
                repositories.c.name,
                runs.c.baseline_branch,
                runs.c.workload,
                runs.c.environment_key,
                func.count().label("baselines"),
                func.max(runs.c.baseline_at).label("newest"),
            )
            .select_from(runs.join(repositories, runs.c.repository_id == repositories.c.id))
            .where(runs.c.id.in_(select(newest.c.id)))
            .group_by(
                repositories.c.name, runs.c.baseline_branch, runs.c.workload, runs.c.environment_key
            )
        )
        found += [
            BaselinedEnvironment(
                repository_id=repository_id,
                repository=str(r.name),
                branch=str(r.baseline_branch),
                workload=str(r.workload),
                environment_key=str(r.environment_key),
                baselines=int(r.baselines),
                newest=aware(r.newest),
            )
            for r in rows
        ]
    return found


def newest_branch_baseline(conn: Connection, key: BaselineKey) -> BaselineRun | None:
    """The newest baseline of `key` that the baseline branch itself ran: a push or a scheduled
    run, never a pull request's run that someone accepted (that measured the PR's code, however
    many pushes came after it). None when every baseline is an accepted pull request run."""
    row = conn.execute(
        select(*(runs.c[f.name] for f in fields(BaselineRun)))
        .where(
            runs.c.repository_id == key.repository_id,
            runs.c.baseline_branch == key.branch,
            runs.c.environment_key == key.environment_key,
            runs.c.workload == key.workload,
            runs.c.pr_number.is_(None),
            ~runs.c.event.startswith("pull_request"),
        )
        .order_by(runs.c.baseline_at.desc(), runs.c.id.desc())
        .limit(1)
    ).first()
    return None if row is None else as_record(BaselineRun, row._mapping)
