"""GitHub webhook deliveries: each acted on once, its first answer kept for redeliveries."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from sqlalchemy import delete, insert, select, update
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from gate_server.clock import utcnow
from gate_server.db.schema import github_deliveries

# GitHub redelivers on request for a few days; a week of ids is plenty to answer the same.
KEEP_DELIVERIES = timedelta(days=7)


def claim(conn: Connection, delivery_id: str, event: str, action: str | None) -> bool:
    """Record a delivery; False when it was recorded before (a redelivery)."""
    conn.execute(
        delete(github_deliveries).where(
            github_deliveries.c.received_at < utcnow() - KEEP_DELIVERIES
        )
    )
    try:
        with conn.begin_nested():
            conn.execute(
                insert(github_deliveries).values(
                    delivery_id=delivery_id, event=event, action=action, received_at=utcnow()
                )
            )
    except IntegrityError:
        return False
    return True


def reclaim_stale(conn: Connection, delivery_id: str, older_than: timedelta) -> bool:
    """Take over a claim that never got an answer (its process died mid-way); True when taken."""
    result = conn.execute(
        update(github_deliveries)
        .where(
            github_deliveries.c.delivery_id == delivery_id,
            github_deliveries.c.status.is_(None),
            github_deliveries.c.received_at < utcnow() - older_than,
        )
        .values(received_at=utcnow())
    )
    return result.rowcount == 1


def answer_of(conn: Connection, delivery_id: str) -> tuple[int, dict[str, Any]] | None:
    row = conn.execute(
        select(github_deliveries.c.status, github_deliveries.c.answer).where(
            github_deliveries.c.delivery_id == delivery_id
        )
    ).first()
    if row is None or row.status is None:
        return None
    return int(row.status), json.loads(row.answer)


def finish(conn: Connection, delivery_id: str, status: int, answer: dict[str, Any]) -> None:
    conn.execute(
        update(github_deliveries)
        .where(github_deliveries.c.delivery_id == delivery_id)
        .values(status=status, answer=json.dumps(answer, sort_keys=True))
    )


def forget(conn: Connection, delivery_id: str) -> None:
    """Undo a claim whose handling failed, so GitHub's redelivery is acted on."""
    conn.execute(delete(github_deliveries).where(github_deliveries.c.delivery_id == delivery_id))
