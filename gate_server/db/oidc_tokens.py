"""OIDC token ids (jti) already used: a token is good for one request."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from sqlalchemy import delete, insert
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from gate_server.clock import utcnow
from gate_server.db.schema import oidc_token_uses

# A spent token id is kept this long after the token expires (its leeway is at most 5 minutes).
KEEP_SPENT_JTI = timedelta(hours=1)


def spend(conn: Connection, jti: str, repository_id: int, expires_at: float) -> bool:
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
