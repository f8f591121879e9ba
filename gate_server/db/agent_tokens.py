"""What an agent token adds to its tokens row: the agent's name, the user it acts for, its
scopes and its expiry (gate_server/domain/agents.py decides what they allow)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone

from sqlalchemy import insert, select
from sqlalchemy.engine import Connection

from gate_server.db.schema import agent_tokens


@dataclass(frozen=True)
class AgentGrant:
    token_id: int
    name: str
    for_user: str
    scopes: tuple[str, ...]
    expires_at: datetime
    accept_granted_by: str | None


def insert_grant(
    conn: Connection,
    *,
    token_id: int,
    name: str,
    for_user: str,
    scopes: Sequence[str],
    expires_at: datetime,
    accept_granted_by: str | None,
) -> None:
    conn.execute(
        insert(agent_tokens).values(
            token_id=token_id,
            name=name,
            for_user=for_user,
            scopes=json.dumps(list(scopes)),
            expires_at=expires_at,
            accept_granted_by=accept_granted_by,
        )
    )


def of_token(conn: Connection, token_id: int) -> AgentGrant | None:
    row = conn.execute(select(agent_tokens).where(agent_tokens.c.token_id == token_id)).first()
    if row is None:
        return None
    m = row._mapping
    expires: datetime = m["expires_at"]  # SQLite hands datetimes back without a zone
    return AgentGrant(
        token_id=int(m["token_id"]),
        name=str(m["name"]),
        for_user=str(m["for_user"]),
        scopes=tuple(json.loads(m["scopes"])),
        expires_at=expires if expires.tzinfo else expires.replace(tzinfo=timezone.utc),
        accept_granted_by=m["accept_granted_by"],
    )
