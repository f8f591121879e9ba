"""The server's own secret keys, by name (see schema.server_keys)."""

from __future__ import annotations

from sqlalchemy import insert, select
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from gate_server.clock import utcnow
from gate_server.db.schema import server_keys


def get(conn: Connection, name: str) -> str | None:
    found = conn.execute(select(server_keys.c.secret).where(server_keys.c.name == name)).scalar()
    return None if found is None else str(found)


def add(conn: Connection, name: str, secret: str) -> bool:
    """Store a key; False when one of that name is stored already (another process won)."""
    try:
        with conn.begin_nested():
            conn.execute(insert(server_keys).values(name=name, secret=secret, created_at=utcnow()))
    except IntegrityError:
        return False
    return True
