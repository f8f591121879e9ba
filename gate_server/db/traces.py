"""Kept profile traces (gate_server/domain/traces.py): one row per run and trace file name."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import insert, select
from sqlalchemy.engine import Connection

from gate_server.db.schema import run_traces


def stored_sha256(conn: Connection, run_id: str, name: str) -> str | None:
    """The sha256 of the trace stored under this name, None when there is none."""
    found = conn.execute(
        select(run_traces.c.body_sha256).where(
            run_traces.c.run_id == run_id, run_traces.c.name == name
        )
    ).scalar()
    return None if found is None else str(found)


def add(
    conn: Connection, run_id: str, name: str, body: bytes, body_sha256: str, now: datetime
) -> None:
    conn.execute(
        insert(run_traces).values(
            run_id=run_id, name=name, body=body, body_sha256=body_sha256, created_at=now
        )
    )


def body(conn: Connection, run_id: str, name: str) -> bytes | None:
    found = conn.execute(
        select(run_traces.c.body).where(run_traces.c.run_id == run_id, run_traces.c.name == name)
    ).scalar()
    return None if found is None else bytes(found)


def names(conn: Connection, run_id: str) -> list[str]:
    return list(
        conn.execute(
            select(run_traces.c.name)
            .where(run_traces.c.run_id == run_id)
            .order_by(run_traces.c.name)
        ).scalars()
    )
