"""Tokens: stored as a hash with their scope (workspace, repository, baseline-branch patterns)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import bindparam, func, insert, select, update
from sqlalchemy.engine import Connection

from gate_server.clock import utcnow
from gate_server.db.rows import as_record
from gate_server.db.schema import repositories, tokens, workspaces

CI, VIEWER, AGENT = "ci", "viewer", "agent"


@dataclass(frozen=True)
class TokenRecord:
    id: int
    kind: str
    workspace_id: int
    workspace: str
    repository_id: int | None
    repository: str | None
    branches: list[str]
    prefix: str
    token_hash: str
    created_at: datetime
    revoked_at: datetime | None
    last_used_at: datetime | None
    name: str | None = None  # who holds it (rnx token create --name)
    can_act: bool = False  # a viewer token that may acknowledge change points and accept runs
    # An OIDC token's `actor` claim: the GitHub user whose workflow run it is, as GitHub signed
    # it (gate_server/github/oidc_login.py). None for a stored token.
    github_actor: str | None = None
    # The GitHub user a viewer token was made for when they signed in to the dashboard with
    # GitHub (gate_server/github/oauth.py); None for a token someone created.
    github_login: str | None = None


def insert_token(
    conn: Connection,
    *,
    kind: str,
    workspace_id: int,
    repository_id: int | None,
    branches: Sequence[str],
    token_hash: str,
    prefix: str,
    name: str | None = None,
    can_act: bool = False,
    github_login: str | None = None,
) -> int:
    return int(
        conn.execute(
            insert(tokens)
            .values(
                kind=kind,
                workspace_id=workspace_id,
                repository_id=repository_id,
                branches=json.dumps(list(branches)),
                token_hash=token_hash,
                prefix=prefix,
                name=name,
                can_act=can_act,
                github_login=github_login,
                created_at=utcnow(),
            )
            .returning(tokens.c.id)
        ).scalar_one()
    )


def _select() -> Any:
    return select(
        tokens, workspaces.c.name.label("workspace"), repositories.c.name.label("repository")
    ).select_from(
        tokens.join(workspaces, tokens.c.workspace_id == workspaces.c.id).outerjoin(
            repositories, tokens.c.repository_id == repositories.c.id
        )
    )


def _token(m: Any) -> TokenRecord:
    return as_record(
        TokenRecord,
        m,
        branches=json.loads(m["branches"]),
        can_act=bool(m["can_act"]),
        github_actor=None,
    )


# Every request looks its token up: the statement is built once, the hash bound as a parameter.
_BY_HASH = _select().where(tokens.c.token_hash == bindparam("token_hash"))


def by_hash(conn: Connection, token_hash: str) -> TokenRecord | None:
    row = conn.execute(_BY_HASH, {"token_hash": token_hash}).first()
    return None if row is None else _token(row._mapping)


def by_id(conn: Connection, token_id: int) -> TokenRecord | None:
    row = conn.execute(_select().where(tokens.c.id == token_id)).first()
    return None if row is None else _token(row._mapping)


def all_tokens(conn: Connection) -> list[TokenRecord]:
    return [_token(r._mapping) for r in conn.execute(_select().order_by(tokens.c.id))]


def active_ci(conn: Connection, repository_id: int) -> list[TokenRecord]:
    """The repository's unrevoked CI tokens, oldest first."""
    query = _select().where(
        tokens.c.repository_id == repository_id,
        tokens.c.kind == CI,
        tokens.c.revoked_at.is_(None),
    )
    return [_token(r._mapping) for r in conn.execute(query.order_by(tokens.c.id))]


def revoke(conn: Connection, token_id: int, when: datetime) -> bool:
    """False when the token was revoked already."""
    result = conn.execute(
        update(tokens)
        .where(tokens.c.id == token_id, tokens.c.revoked_at.is_(None))
        .values(revoked_at=when)
    )
    return result.rowcount == 1


def touch(conn: Connection, token_id: int, when: datetime) -> None:
    conn.execute(update(tokens).where(tokens.c.id == token_id).values(last_used_at=when))


def signed_in_viewer(conn: Connection, workspace_id: int, login: str) -> TokenRecord | None:
    """The viewer token made for GitHub user `login` in the workspace (the newest, revoked or
    not: a revoked one means an admin shut that person out)."""
    query = _select().where(
        tokens.c.workspace_id == workspace_id,
        tokens.c.kind == VIEWER,
        func.lower(tokens.c.github_login) == login.lower(),
    )
    row = conn.execute(query.order_by(tokens.c.id.desc())).first()
    return None if row is None else _token(row._mapping)


def set_acting(conn: Connection, token_id: int, can_act: bool, patterns: Sequence[str]) -> None:
    """What a signed-in person may act on, as GitHub says at their latest sign-in."""
    values = {"can_act": can_act, "branches": json.dumps(list(patterns))}
    conn.execute(update(tokens).where(tokens.c.id == token_id).values(**values))


def ci_branches(conn: Connection, workspace_id: int) -> list[str]:
    """The baseline-branch patterns of the workspace's unrevoked CI tokens, in order, once."""
    query = select(tokens.c.branches).where(
        tokens.c.workspace_id == workspace_id,
        tokens.c.kind == CI,
        tokens.c.revoked_at.is_(None),
    )
    found: dict[str, None] = {}
    for raw in conn.execute(query.order_by(tokens.c.id)).scalars():
        found.update(dict.fromkeys(json.loads(raw)))
    return list(found)


def set_branches(conn: Connection, token_id: int, patterns: Sequence[str]) -> None:
    conn.execute(
        update(tokens).where(tokens.c.id == token_id).values(branches=json.dumps(list(patterns)))
    )
