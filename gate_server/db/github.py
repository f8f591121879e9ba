"""The GitHub integration's own rows: webhook deliveries (acted on once), spent OIDC token ids."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from typing import Any

from sqlalchemy import delete, insert, select, update
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from gate_server.clock import utcnow
from gate_server.db.schema import github_deliveries, oidc_token_uses

# GitHub redelivers on request for a few days; a week of ids is plenty to answer the same.
KEEP_DELIVERIES = timedelta(days=7)
# A spent token id is kept this long after the token expires (its leeway is at most 5 minutes).
KEEP_SPENT_JTI = timedelta(hours=1)

# ---- webhook deliveries


def claim_delivery(conn: Connection, delivery_id: str, event: str, action: str | None) -> bool:
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


def reclaim_stale_delivery(conn: Connection, delivery_id: str, older_than: timedelta) -> bool:
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


def delivery_answer(conn: Connection, delivery_id: str) -> tuple[int, dict[str, Any]] | None:
    row = conn.execute(
        select(github_deliveries.c.status, github_deliveries.c.answer).where(
            github_deliveries.c.delivery_id == delivery_id
        )
    ).first()
    if row is None or row.status is None:
        return None
    return int(row.status), json.loads(row.answer)


def finish_delivery(
    conn: Connection, delivery_id: str, status: int, answer: dict[str, Any]
) -> None:
    conn.execute(
        update(github_deliveries)
        .where(github_deliveries.c.delivery_id == delivery_id)
        .values(status=status, answer=json.dumps(answer, sort_keys=True))
    )


def forget_delivery(conn: Connection, delivery_id: str) -> None:
    """Undo a claim whose handling failed, so GitHub's redelivery is acted on."""
    conn.execute(delete(github_deliveries).where(github_deliveries.c.delivery_id == delivery_id))


# ---- OIDC token ids


def spend_jti(conn: Connection, jti: str, repository_id: int, expires_at: float) -> bool:
    """Record a token id as used; False when it was used before (a replay)."""
    now = utcnow()
    # Expired ids can no longer be replayed (the token is refused as expired): drop them.
    conn.execute(delete(oidc_token_uses).where(oidc_token_uses.c.expires_at < now))
    try:
        with conn.begin_nested():
            conn.execute(
                insert(oidc_token_uses).values(
                    jti=jti,
                    repository_id=repository_id,
                    used_at=now,
                    expires_at=datetime.fromtimestamp(expires_at, timezone.utc) + KEEP_SPENT_JTI,
                )
            )
    except IntegrityError:
        return False
    return True
