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
from gate_server.errors import AmbiguousRepository


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


def by_workspace(conn: Connection) -> dict[str, list[Repository]]:
    """Every workspace that has repositories, with them, by name."""
    found: dict[str, list[Repository]] = {}
    query = _select().order_by(workspaces.c.name, repositories.c.name)
    for row in conn.execute(query):
        repo = _repository(row)
        found.setdefault(repo.workspace, []).append(repo)
    return found


def by_id(conn: Connection, repository_id: int) -> Repository | None:
    row = conn.execute(_select().where(repositories.c.id == repository_id)).first()
    return None if row is None else _repository(row)


def by_github_id(conn: Connection, github_id: int) -> Repository | None:
    row = conn.execute(_select().where(repositories.c.github_repository_id == github_id)).first()
    return None if row is None else _repository(row)


def bind_github_id(conn: Connection, github_id: int, name: str) -> list[int]:
    """Tie GitHub's id to the repository registered as `name` without one, while no repository
    has it; returns the ids bound (none or one). Called with names GitHub signed (a verified
    webhook delivery, an OIDC token): the id then survives renames. When `name` is registered
    without an id in several workspaces, nothing says which one GitHub's repository is:
    AmbiguousRepository, until an admin binds it (`rnx repo bind`, set_github_id)."""
    if by_github_id(conn, github_id) is not None:
        return []
    unbound = [r for r in named(conn, name) if r.github_repository_id is None]
    if len(unbound) > 1:
        workspaces_ = ", ".join(sorted(r.workspace for r in unbound))
        raise AmbiguousRepository(
            f"{name} is registered in several workspaces ({workspaces_}) and GitHub's id "
            f"{github_id} is bound to none: an admin says which one it is with `rnx repo bind "
            f"--repo {name} --workspace W --github-id {github_id}`"
        )
    for repo in unbound:
        set_github_id(conn, repo.id, github_id)
    return [r.id for r in unbound]


def set_github_id(conn: Connection, repository_id: int, github_id: int) -> None:
    conn.execute(
        update(repositories)
        .where(repositories.c.id == repository_id)
        .values(github_repository_id=github_id)
    )


def rename_by_github_id(conn: Connection, github_id: int, new_name: str) -> str | None:
    """Follow a rename on GitHub; returns the old name, or None when the id is not registered
    or the name is unchanged."""
    repo = by_github_id(conn, github_id)
    if repo is None or repo.name == new_name:
        return None
    conn.execute(update(repositories).where(repositories.c.id == repo.id).values(name=new_name))
    return repo.name
