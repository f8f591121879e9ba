"""The durable outbox: jobs written inside the caller's transaction, claimed under a lease.

A job is enqueued on the connection of the transaction that causes it, so it exists exactly when
that transaction commits. A worker claims a due job with one conditional UPDATE (pending, due,
no live lease) and checks that it changed one row: on PostgreSQL a second process's UPDATE of
the same row waits for the first to commit and then no longer matches; on SQLite writes run one
at a time. So one process at a time holds a job, and a job whose process died (kill -9) is
claimed again once its lease has passed.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import delete, func, insert, or_, select, update
from sqlalchemy.engine import Connection

from gate_server.clock import utcnow
from gate_server.db.rows import as_record
from gate_server.db.schema import outbox

PENDING = "pending"
DONE = "done"
FAILED = "failed"  # gave up: too many attempts, or the handler said it can never succeed
MAX_ERROR_CHARS = 2000


@dataclass(frozen=True)
class OutboxJob:
    id: int
    delivery_id: str  # stable across retries: a receiver dedupes by it
    kind: str
    payload: dict[str, Any]
    state: str
    created_at: datetime
    available_at: datetime
    attempts: int  # claims so far, this one included
    lease_owner: str | None
    lease_until: datetime | None
    done_at: datetime | None
    last_error: str | None


def _job(m: Any) -> OutboxJob:
    return as_record(OutboxJob, m, payload=json.loads(m["payload"]))


def enqueue(
    conn: Connection,
    kind: str,
    payload: dict[str, Any],
    *,
    delay: timedelta = timedelta(0),
) -> OutboxJob:
    """Add a job inside the caller's transaction (it commits or rolls back with it)."""
    now = utcnow()
    values = {
        "delivery_id": str(uuid.uuid4()),
        "kind": kind,
        "payload": json.dumps(payload, sort_keys=True),
        "state": PENDING,
        "created_at": now,
        "available_at": now + delay,
        "attempts": 0,
    }
    new_id = conn.execute(insert(outbox).values(**values).returning(outbox.c.id)).scalar_one()
    found = get(conn, int(new_id))
    if found is None:  # just inserted in this transaction
        raise RuntimeError(f"outbox job {new_id} was inserted but cannot be read")
    return found


def enqueue_once(conn: Connection, kind: str, payload: dict[str, Any]) -> bool:
    """enqueue(), unless a job of `kind` with this very payload waits untried (pending, never
    claimed): that one will do the same work when it runs. True when a job was added. The
    waiting job is written in this transaction, so a worker that claims it meanwhile waits for
    this transaction's end (PostgreSQL's row lock; SQLite's one writer) and its work sees what
    this transaction stored."""
    text = json.dumps(payload, sort_keys=True)
    joined = conn.execute(
        update(outbox)
        .where(
            outbox.c.state == PENDING,
            outbox.c.kind == kind,
            outbox.c.attempts == 0,
            outbox.c.lease_owner.is_(None),
            outbox.c.payload == text,
        )
        .values(payload=text)
    )
    if joined.rowcount:
        return False
    enqueue(conn, kind, payload)
    return True


def waiting(conn: Connection, kind: str, payload: dict[str, Any], *, by: datetime) -> bool:
    """Whether a job of `kind` with this very payload waits untried, due at `by` or sooner:
    then a later look need not be queued again (a job that queues its own next look would
    otherwise pile up copies)."""
    found = conn.execute(
        select(outbox.c.id)
        .where(
            outbox.c.state == PENDING,
            outbox.c.kind == kind,
            outbox.c.attempts == 0,
            outbox.c.lease_owner.is_(None),
            outbox.c.payload == json.dumps(payload, sort_keys=True),
            outbox.c.available_at <= by,
        )
        .limit(1)
    ).first()
    return found is not None


def get(conn: Connection, job_id: int) -> OutboxJob | None:
    row = conn.execute(select(outbox).where(outbox.c.id == job_id)).first()
    return None if row is None else _job(row._mapping)


def jobs(conn: Connection, *, kind: str | None = None, state: str | None = None) -> list[Any]:
    """Jobs, oldest first, optionally of one kind and state (for tests and operators)."""
    query = select(outbox).order_by(outbox.c.id)
    if kind is not None:
        query = query.where(outbox.c.kind == kind)
    if state is not None:
        query = query.where(outbox.c.state == state)
    return [_job(r._mapping) for r in conn.execute(query)]


def _claimable(now: datetime) -> Any:
    return (
        outbox.c.state == PENDING,
        outbox.c.available_at <= now,
        or_(outbox.c.lease_until.is_(None), outbox.c.lease_until < now),
    )


def has_due(conn: Connection, kinds: list[str]) -> bool:
    """Whether a job of one of `kinds` could be claimed now (a read: an idle worker looks
    with this before it takes SQLite's write lock to claim)."""
    if not kinds:
        return False
    found = conn.execute(
        select(outbox.c.id).where(*_claimable(utcnow()), outbox.c.kind.in_(kinds)).limit(1)
    ).first()
    return found is not None


def claim(conn: Connection, kinds: list[str], owner: str, lease: timedelta) -> OutboxJob | None:
    """Take the oldest due job of one of `kinds` for `owner` until now + `lease`; None when
    there is none (or another process took each one first). Jobs of other kinds stay pending."""
    if not kinds:
        return None
    now = utcnow()
    candidates = conn.execute(
        select(outbox.c.id)
        .where(*_claimable(now), outbox.c.kind.in_(kinds))
        .order_by(outbox.c.available_at, outbox.c.id)
        .limit(5)
    ).scalars()
    for job_id in list(candidates):
        taken = conn.execute(
            update(outbox)
            .where(outbox.c.id == job_id, *_claimable(now))
            .values(lease_owner=owner, lease_until=now + lease, attempts=outbox.c.attempts + 1)
        )
        if taken.rowcount == 1:
            return get(conn, job_id)
    return None


def complete(conn: Connection, job_id: int, owner: str) -> bool:
    """Mark a claimed job done; False when `owner` no longer held its lease."""
    result = conn.execute(
        update(outbox)
        .where(outbox.c.id == job_id, outbox.c.lease_owner == owner, outbox.c.state == PENDING)
        .values(state=DONE, done_at=utcnow(), lease_owner=None, lease_until=None)
    )
    return result.rowcount == 1


def fail(
    conn: Connection, job_id: int, owner: str, error: str, *, retry_in: timedelta | None
) -> bool:
    """Record a failed attempt: due again after `retry_in`, or FAILED for good when None.
    False when `owner` no longer held the job's lease."""
    values: dict[str, Any] = {
        "lease_owner": None,
        "lease_until": None,
        "last_error": error[:MAX_ERROR_CHARS],
    }
    if retry_in is None:
        values.update(state=FAILED, done_at=utcnow())
    else:
        values["available_at"] = utcnow() + retry_in
    result = conn.execute(
        update(outbox)
        .where(outbox.c.id == job_id, outbox.c.lease_owner == owner, outbox.c.state == PENDING)
        .values(**values)
    )
    return result.rowcount == 1


def purge_finished(conn: Connection, older_than: timedelta) -> int:
    """Delete done and failed jobs finished before now - `older_than`; returns how many."""
    result = conn.execute(
        delete(outbox).where(outbox.c.state != PENDING, outbox.c.done_at < utcnow() - older_than)
    )
    return int(result.rowcount)


def pending_count(conn: Connection) -> int:
    return int(
        conn.execute(
            select(func.count()).select_from(outbox).where(outbox.c.state == PENDING)
        ).scalar_one()
    )
