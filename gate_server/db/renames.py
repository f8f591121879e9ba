"""The branch-rename log: one row per rename followed, never changed (resolved in
gate_server/domain/branches.py)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import bindparam, insert, select
from sqlalchemy.engine import Connection

from gate_server.clock import utcnow
from gate_server.db.rows import as_record
from gate_server.db.schema import branch_renames


@dataclass(frozen=True)
class BranchRename:
    id: int
    from_branch: str
    to_branch: str
    renamed_at: datetime
    actor: str
    via: str


# Read on every upload: built once, the repository bound as a parameter.
_LOG = (
    select(branch_renames)
    .where(branch_renames.c.repository_id == bindparam("repository_id"))
    .order_by(branch_renames.c.id)
)


def log(conn: Connection, repository_id: int) -> list[BranchRename]:
    """A repository's rename log, oldest first (a handful of rows: one per rename ever)."""
    rows = conn.execute(_LOG, {"repository_id": repository_id})
    return [as_record(BranchRename, r._mapping) for r in rows]


def append(
    conn: Connection, repository_id: int, old: str, new: str, *, actor: str, via: str
) -> None:
    conn.execute(
        insert(branch_renames).values(
            repository_id=repository_id,
            from_branch=old,
            to_branch=new,
            renamed_at=utcnow(),
            actor=actor,
            via=via,
        )
    )
