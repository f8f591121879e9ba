"""The server's own secret keys, by name (see schema.server_keys), sealed at rest
(gate_server/db/sealed.py)."""

from __future__ import annotations

from sqlalchemy import insert, select
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from gate_server.clock import utcnow
from gate_server.db.schema import server_keys
from gate_server.db.sealed import Sealer


def get(conn: Connection, name: str, sealer: Sealer) -> str | None:
    found = conn.execute(select(server_keys.c.secret).where(server_keys.c.name == name)).scalar()
    return None if found is None else sealer.open(str(found))


def add(conn: Connection, name: str, secret: str, sealer: Sealer) -> bool:
    """Store a key; False when one of that name is stored already (another process won)."""
    try:
        with conn.begin_nested():
            conn.execute(
                insert(server_keys).values(
                    name=name, secret=sealer.seal(secret), created_at=utcnow()
                )
            )
    except IntegrityError:
        return False
    return True
