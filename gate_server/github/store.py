"""The GitHub integration's SQL: webhook deliveries, spent OIDC token ids, GitHub repo ids.

Repositories and pull-request runs are looked up the way GitHub names them (by its numeric
repository id).

Kept apart from gate_server/storage.py so the integration can be reviewed as one piece; its
tables are created by migration 2 there (`create_tables`), on SQLite and PostgreSQL alike.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

from sqlalchemy import (
    Column,
    DateTime,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    delete,
    func,
    insert,
    select,
    update,
)
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from gate_server.storage import RunRecord, Storage, repositories, runs, tokens, workspaces

github_metadata = MetaData()

github_deliveries = Table(
    "github_deliveries",
    github_metadata,
    Column("delivery_id", String(100), primary_key=True),
    Column("event", String(64), nullable=False),
    Column("action", String(64), nullable=True),
    Column("received_at", DateTime(timezone=True), nullable=False),
    # The answer given the first time; a redelivery gets exactly this again.
    Column("status", Integer, nullable=True),
    Column("answer", Text, nullable=True),
    Index("ix_github_deliveries_received", "received_at"),
)
# GitHub redelivers on request for a few days; a week of ids is plenty to answer the same.
KEEP_DELIVERIES = timedelta(days=7)

oidc_token_uses = Table(
    "oidc_token_uses",
    github_metadata,
    Column("jti", String(200), primary_key=True),
    Column("repository_id", Integer, nullable=False),
    Column("used_at", DateTime(timezone=True), nullable=False),
    Column("expires_at", DateTime(timezone=True), nullable=False),
)


def create_tables(conn: Connection) -> None:
    github_metadata.create_all(conn, checkfirst=True)


def _now() -> datetime:
    return datetime.now(timezone.utc)


# ---- webhook deliveries


def claim_delivery(conn: Connection, delivery_id: str, event: str, action: str | None) -> bool:
    """Record a delivery; False when it was recorded before (a redelivery)."""
    conn.execute(
        delete(github_deliveries).where(github_deliveries.c.received_at < _now() - KEEP_DELIVERIES)
    )
    try:
        with conn.begin_nested():
            conn.execute(
                insert(github_deliveries).values(
                    delivery_id=delivery_id, event=event, action=action, received_at=_now()
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
            github_deliveries.c.received_at < _now() - older_than,
        )
        .values(received_at=_now())
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
    now = _now()
    # Expired ids can no longer be replayed (the token is refused as expired): drop them.
    conn.execute(delete(oidc_token_uses).where(oidc_token_uses.c.expires_at < now))
    try:
        with conn.begin_nested():
            conn.execute(
                insert(oidc_token_uses).values(
                    jti=jti,
                    repository_id=repository_id,
                    used_at=now,
                    expires_at=datetime.fromtimestamp(expires_at + 3600, timezone.utc),
                )
            )
    except IntegrityError:
        return False
    return True


# ---- repositories by GitHub's id


@dataclass(frozen=True)
class RegisteredRepository:
    id: int
    workspace_id: int
    workspace: str
    name: str
    github_repository_id: int | None


def _repo_select() -> Any:
    return select(
        repositories.c.id,
        repositories.c.workspace_id,
        workspaces.c.name.label("workspace"),
        repositories.c.name,
        repositories.c.github_repository_id,
    ).select_from(repositories.join(workspaces, repositories.c.workspace_id == workspaces.c.id))


def _registered(row: Any) -> RegisteredRepository:
    m = row._mapping
    return RegisteredRepository(
        id=int(m["id"]),
        workspace_id=int(m["workspace_id"]),
        workspace=str(m["workspace"]),
        name=str(m["name"]),
        github_repository_id=m["github_repository_id"],
    )


def repository_by_github_id(conn: Connection, github_id: int) -> RegisteredRepository | None:
    row = conn.execute(
        _repo_select().where(repositories.c.github_repository_id == github_id)
    ).first()
    return None if row is None else _registered(row)


def repositories_named(conn: Connection, name: str) -> list[RegisteredRepository]:
    rows = conn.execute(_repo_select().where(func.lower(repositories.c.name) == name.lower())).all()
    return [_registered(r) for r in rows]


def bind_github_id(conn: Connection, github_id: int, name: str) -> list[int]:
    """Tie GitHub's id to the repositories registered under `name` that have none yet.

    Called for verified webhook deliveries only: the id then survives renames."""
    bound = []
    for repo in repositories_named(conn, name):
        if repo.github_repository_id is None and repository_by_github_id(conn, github_id) is None:
            conn.execute(
                update(repositories)
                .where(repositories.c.id == repo.id)
                .values(github_repository_id=github_id)
            )
            bound.append(repo.id)
    return bound


def rename_repository(conn: Connection, github_id: int, new_name: str) -> str | None:
    """Follow a rename on GitHub; returns the old name, or None when the id is not registered."""
    repo = repository_by_github_id(conn, github_id)
    if repo is None or repo.name == new_name:
        return None
    conn.execute(update(repositories).where(repositories.c.id == repo.id).values(name=new_name))
    return repo.name


def active_ci_branches(conn: Connection, repository_id: int) -> tuple[int, list[str]] | None:
    """The newest unrevoked CI token of a repository (id, baseline branches): the scope an OIDC
    token acts with. None when the repository has no such token (OIDC is then refused)."""
    row = conn.execute(
        select(tokens.c.id, tokens.c.branches)
        .where(
            tokens.c.repository_id == repository_id,
            tokens.c.kind == "ci",
            tokens.c.revoked_at.is_(None),
        )
        .order_by(tokens.c.id.desc())
        .limit(1)
    ).first()
    return None if row is None else (int(row.id), list(json.loads(row.branches)))


# ---- a pull request's runs


def pull_request_runs(
    storage: Storage, conn: Connection, repository_id: int, pr_number: int, *, limit: int = 100
) -> list[tuple[RunRecord, bytes]]:
    """A PR's runs, newest first, each with its uploaded document."""
    run_ids = conn.execute(
        select(runs.c.run_id)
        .where(runs.c.repository_id == repository_id, runs.c.pr_number == pr_number)
        .order_by(runs.c.received_at.desc(), runs.c.id.desc())
        .limit(limit)
    ).scalars()
    found = []
    for run_id in list(run_ids):
        record = storage.get_run(conn, run_id)
        document = storage.get_document(conn, run_id)
        if record is not None and document is not None:
            found.append((record, document))
    return found
