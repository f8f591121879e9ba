"""Runs: the uploaded bytes, the answer given, and the baseline and acceptance fields."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any

from sqlalchemy import Integer, and_, bindparam, func, or_, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection

from gate_server.db.rows import as_record
from gate_server.db.schema import repositories, runs


@dataclass(frozen=True)
class RunFacts:
    """What an upload said of its run and what the server made of it, as every view shows it."""

    run_id: str
    sha: str
    branch: str
    base_branch: str | None
    event: str
    pr_number: int | None
    environment_key: str
    workload: str  # its path in the repository, normalised (gate_server/workloads.py)
    tier: str
    created_at: datetime  # from the document
    received_at: datetime
    baseline_branch: str | None  # set: the run is a baseline of this branch


@dataclass(frozen=True)
class NewRun(RunFacts):
    """A run to store (a baseline from received_at when baseline_branch is set)."""

    workspace_id: int
    repository_id: int
    token_id: int | None
    answer: dict[str, Any]
    document: bytes
    body_sha256: str
    signature: str


@dataclass(frozen=True)
class ListedRun(RunFacts):
    """A run as lists show it (the dashboard's): no document, answer or signature."""

    repository: str
    accepted_at: datetime | None
    accepted_by: str | None
    accept_reason: str | None


@dataclass(frozen=True)
class RunRecord(ListedRun):
    """A stored run, all but its document."""

    id: int
    workspace_id: int
    repository_id: int
    token_id: int | None
    answer: dict[str, Any]
    body_sha256: str
    signature: str
    baseline_at: datetime | None
    accepted_via: str | None


# A run_id stored meanwhile (another upload won) inserts nothing, where a plain INSERT inside
# a SAVEPOINT caught the IntegrityError: SQLAlchemy built and compiled the SAVEPOINT and its
# RELEASE anew on every upload (about 0.2 ms of CPU per upload on SQLite). Both databases
# wait for an uncommitted insert of the same run_id as they did before, then skip the row.
# The id it returns says whether the row went in (rowcount does not: PostgreSQL's statement
# returns the id anyway to fill inserted_primary_key, and psycopg then counts -1).
# The values are parameters of one constant statement per database, compiled once per process.
_INSERT_RUN = {
    name: dialect.insert(runs)
    .on_conflict_do_nothing(index_elements=[runs.c.run_id])
    .returning(runs.c.id)
    for name, dialect in (("sqlite", sqlite), ("postgresql", postgresql))
}


def insert_run(conn: Connection, run: NewRun) -> bool:
    """Store one run; False when its run_id is already stored (another upload won)."""
    values = {f.name: getattr(run, f.name) for f in fields(NewRun)}
    values["answer"] = json.dumps(run.answer)
    values["baseline_at"] = run.received_at if run.baseline_branch is not None else None
    return conn.execute(_INSERT_RUN[conn.dialect.name], values).first() is not None


# Every column but the document (large, and read only where it is needed).
_RECORD_COLUMNS = [c for c in runs.c if c.name != "document"]


def blocked_since_pass(conn: Connection, new: NewRun) -> bool:
    """Whether an earlier run of the same repository, branch, environment and workload outside a
    pull request was a BLOCK with no PASS stored after it (the run `new` itself left out): the
    alerts group a regression's BLOCKs until the next PASS."""
    same = and_(
        runs.c.repository_id == new.repository_id,
        runs.c.branch == new.branch,
        runs.c.environment_key == new.environment_key,
        runs.c.workload == new.workload,
        runs.c.pr_number.is_(None),
        runs.c.run_id != new.run_id,
    )
    last_pass = select(func.max(runs.c.id)).where(same, runs.c.tier == "PASS").scalar_subquery()
    blocked = select(runs.c.id).where(
        same, runs.c.tier == "BLOCK", or_(last_pass.is_(None), runs.c.id > last_pass)
    )
    return conn.execute(blocked.limit(1)).first() is not None


def _select(*extra: Any) -> Any:
    return select(*_RECORD_COLUMNS, *extra, repositories.c.name.label("repository")).select_from(
        runs.join(repositories, runs.c.repository_id == repositories.c.id)
    )


def _record(m: Any) -> RunRecord:
    return as_record(RunRecord, m, answer=json.loads(m["answer"]))


# The statements every upload runs are built once, their values bound as parameters: building
# and keying a select of every column anew took longer than running it on SQLite.
_BY_RUN_ID = _select().where(runs.c.run_id == bindparam("run_id"))


def by_run_id(conn: Connection, run_id: str) -> RunRecord | None:
    row = conn.execute(_BY_RUN_ID, {"run_id": run_id}).first()
    return None if row is None else _record(row._mapping)


# Every upload asks this first; the whole record (a join, every column) is read only for a retry.
_STORED = select(runs.c.id).where(runs.c.run_id == bindparam("run_id"))


def is_stored(conn: Connection, run_id: str) -> bool:
    return conn.execute(_STORED, {"run_id": run_id}).first() is not None


def document(conn: Connection, run_id: str) -> bytes | None:
    found = conn.execute(select(runs.c.document).where(runs.c.run_id == run_id)).scalar()
    return None if found is None else bytes(found)


@dataclass(frozen=True)
class BaselineKey:
    """What a baseline belongs to: runs of other keys are never compared with each other."""

    repository_id: int
    branch: str  # by the name it has now
    environment_key: str
    workload: str


@dataclass(frozen=True)
class BaselineRun:
    """A baseline run as uploads are compared with it: what choosing, naming and parsing it
    needs. Its answer is left undecoded: decoding seven of them cost an upload more than the
    lookup itself."""

    id: int
    run_id: str
    workspace_id: int
    sha: str
    accepted_at: datetime | None
    body_sha256: str


_BASELINES = (
    select(*(runs.c[f.name] for f in fields(BaselineRun)))
    .where(
        runs.c.repository_id == bindparam("repository_id"),
        runs.c.baseline_branch == bindparam("branch"),
        runs.c.environment_key == bindparam("environment_key"),
        runs.c.workload == bindparam("workload"),
    )
    .order_by(runs.c.baseline_at.desc(), runs.c.id.desc())
    .limit(bindparam("limit", type_=Integer))
)


def _baseline_parameters(key: BaselineKey, limit: int) -> dict[str, Any]:
    return {
        "repository_id": key.repository_id,
        "branch": key.branch,
        "environment_key": key.environment_key,
        "workload": key.workload,
        "limit": limit,
    }


# Documents apart from the baseline lookup: a server process keeps the baselines it has parsed
# (gate_server/domain/stored_documents.py), so an upload reads a baseline's bytes only the first
# time.
_DOCUMENTS = select(runs.c.run_id, runs.c.document).where(
    runs.c.run_id.in_(bindparam("run_ids", expanding=True))
)


def baselines_query(key: BaselineKey, limit: int) -> Any:
    """The newest `limit` baseline runs of `key`: a walk down ix_runs_baseline, however many
    runs are stored."""
    return _BASELINES.params(_baseline_parameters(key, limit))


def baselines(conn: Connection, key: BaselineKey, limit: int) -> list[BaselineRun]:
    """The newest `limit` baseline runs of `key`, newest first (their bytes: documents)."""
    rows = conn.execute(_BASELINES, _baseline_parameters(key, limit))
    return [as_record(BaselineRun, r._mapping) for r in rows]


def documents(conn: Connection, run_ids: Sequence[str]) -> dict[str, bytes]:
    """The stored documents of a few runs, by run id."""
    if not run_ids:
        return {}
    rows = conn.execute(_DOCUMENTS, {"run_ids": list(run_ids)})
    return {str(r.run_id): bytes(r.document) for r in rows}


def pull_request_runs(
    conn: Connection, repository_id: int, pr_number: int, *, limit: int = 100
) -> list[RunRecord]:
    """A pull request's newest `limit` runs, newest first, without their documents (each may be
    megabytes: read the few a caller needs with `documents`)."""
    rows = conn.execute(
        _select()
        .where(runs.c.repository_id == repository_id, runs.c.pr_number == pr_number)
        .order_by(runs.c.received_at.desc(), runs.c.id.desc())
        .limit(limit)
    )
    return [_record(r._mapping) for r in rows]


def newest_on_branch(conn: Connection, repository_id: int, branch: str) -> RunRecord | None:
    """A branch's newest run (ix_runs_repository_received, filtered by branch)."""
    row = conn.execute(
        _select()
        .where(runs.c.repository_id == repository_id, runs.c.branch == branch)
        .order_by(runs.c.received_at.desc(), runs.c.id.desc())
        .limit(1)
    ).first()
    return None if row is None else _record(row._mapping)


def mark_accepted(
    conn: Connection,
    run_id: str,
    *,
    branch: str,
    when: datetime,
    accepted_by: str,
    reason: str,
    via: str,
) -> None:
    """Make a run the newest baseline of `branch`, accepted by `accepted_by` for `reason`."""
    conn.execute(
        update(runs)
        .where(runs.c.run_id == run_id)
        .values(
            baseline_branch=branch,
            baseline_at=when,
            accepted_at=when,
            accepted_by=accepted_by,
            accept_reason=reason,
            accepted_via=via,
        )
    )


def move_baselines(conn: Connection, repository_id: int, old: str, new: str) -> int:
    """The baselines of branch `old`, of every workload and environment, count for `new` from
    now on; returns how many moved."""
    result = conn.execute(
        update(runs)
        .where(runs.c.repository_id == repository_id, runs.c.baseline_branch == old)
        .values(baseline_branch=new)
    )
    return int(result.rowcount)


def count(conn: Connection) -> int:
    return int(conn.execute(select(func.count()).select_from(runs)).scalar_one())


def _of_key(key: BaselineKey) -> tuple[Any, ...]:
    return (
        runs.c.repository_id == key.repository_id,
        runs.c.baseline_branch == key.branch,
        runs.c.environment_key == key.environment_key,
        runs.c.workload == key.workload,
    )


def previous_of_event(
    conn: Connection, key: BaselineKey, event: str, before_id: int
) -> BaselineRun | None:
    """The newest baseline run of `key` stored before run `before_id` whose upload's event
    is `event` (the previous scheduled run, for a scheduled run's report)."""
    row = conn.execute(
        select(*(runs.c[f.name] for f in fields(BaselineRun)))
        .where(*_of_key(key), runs.c.event == event, runs.c.id < before_id)
        .order_by(runs.c.id.desc())
        .limit(1)
    ).first()
    return None if row is None else as_record(BaselineRun, row._mapping)


def baseline_as_of(conn: Connection, key: BaselineKey, when: datetime) -> BaselineRun | None:
    """The baseline run of `key` that was the newest at `when` (a month ago, for a report)."""
    row = conn.execute(
        select(*(runs.c[f.name] for f in fields(BaselineRun)))
        .where(*_of_key(key), runs.c.baseline_at <= when)
        .order_by(runs.c.baseline_at.desc(), runs.c.id.desc())
        .limit(1)
    ).first()
    return None if row is None else as_record(BaselineRun, row._mapping)
