"""Workspaces and repositories: registered by name, found by name (as GitHub: case-insensitive)
or by GitHub's numeric id."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, insert, select, update
from sqlalchemy.engine import Connection

from gate_server.clock import utcnow
from gate_server.db.rows import as_record
from gate_server.db.schema import repositories, workspaces


@dataclass(frozen=True)
class Repository:
    id: int
    workspace_id: int
    workspace: str
    name: str
    github_repository_id: int | None


def ensure_workspace(conn: Connection, name: str) -> int:
    found = conn.execute(select(workspaces.c.id).where(workspaces.c.name == name)).scalar()
    if found is not None:
        return int(found)
    return int(
        conn.execute(
            insert(workspaces).values(name=name, created_at=utcnow()).returning(workspaces.c.id)
        ).scalar_one()
    )


def ensure(conn: Connection, workspace_id: int, name: str) -> int:
    """The id of repository `name` in the workspace, registered now if it is new."""
    found = named(conn, name, workspace_id=workspace_id)
    if found:
        return found[0].id
    return int(
        conn.execute(
            insert(repositories)
            .values(workspace_id=workspace_id, name=name, created_at=utcnow())
            .returning(repositories.c.id)
        ).scalar_one()
    )


def _select() -> Any:
    return select(
        repositories.c.id,
        repositories.c.workspace_id,
        workspaces.c.name.label("workspace"),
        repositories.c.name,
        repositories.c.github_repository_id,
    ).select_from(repositories.join(workspaces, repositories.c.workspace_id == workspaces.c.id))


def _repository(row: Any) -> Repository:
    return as_record(Repository, row._mapping)


def named(conn: Connection, name: str, *, workspace_id: int | None = None) -> list[Repository]:
    """The repositories registered as OWNER/NAME (case as GitHub: insensitive), in every
    workspace or in one, oldest first."""
    query = _select().where(func.lower(repositories.c.name) == name.lower())
    if workspace_id is not None:
        query = query.where(repositories.c.workspace_id == workspace_id)
    return [_repository(r) for r in conn.execute(query.order_by(repositories.c.id))]


def by_id(conn: Connection, repository_id: int) -> Repository | None:
    row = conn.execute(_select().where(repositories.c.id == repository_id)).first()
    return None if row is None else _repository(row)


def by_github_id(conn: Connection, github_id: int) -> Repository | None:
    row = conn.execute(_select().where(repositories.c.github_repository_id == github_id)).first()
    return None if row is None else _repository(row)


def bind_github_id(conn: Connection, github_id: int, name: str) -> list[int]:
    """Tie GitHub's id to the repositories registered as `name` that have none yet, while no
    repository has it; returns the ids bound. Called with names GitHub signed (a verified
    webhook delivery, an OIDC token): the id then survives renames."""
    bound = []
    for repo in named(conn, name):
        if repo.github_repository_id is None and by_github_id(conn, github_id) is None:
            conn.execute(
                update(repositories)
                .where(repositories.c.id == repo.id)
                .values(github_repository_id=github_id)
            )
            bound.append(repo.id)
    return bound


def rename_by_github_id(conn: Connection, github_id: int, new_name: str) -> str | None:
    """Follow a rename on GitHub; returns the old name, or None when the id is not registered
    or the name is unchanged."""
    repo = by_github_id(conn, github_id)
    if repo is None or repo.name == new_name:
        return None
    conn.execute(update(repositories).where(repositories.c.id == repo.id).values(name=new_name))
    return repo.name
