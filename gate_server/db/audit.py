"""The audit log: every write, with who did it, with which token, what and when."""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import String, false, func, insert, or_, select
from sqlalchemy.engine import Connection

from gate_server.clock import utcnow
from gate_server.db.rows import aware
from gate_server.db.schema import (
    audit_log,
    notify_channels,
    notify_rules,
    runs,
    tokens,
    workspaces,
)

# One constant statement, compiled once per process; the entry's values are its parameters.
_INSERT = insert(audit_log)


def record(
    conn: Connection,
    *,
    actor: str,
    action: str,
    subject: str,
    token_id: int | None = None,
    details: dict[str, Any] | None = None,
) -> None:
    conn.execute(
        _INSERT,
        {
            "at": utcnow(),
            "actor": actor,
            "token_id": token_id,
            "action": action,
            "subject": subject,
            "details": json.dumps(details or {}, sort_keys=True),
        },
    )


def _entries(conn: Connection, query: Any) -> list[dict[str, Any]]:
    out = []
    for row in conn.execute(query):
        entry = dict(row._mapping)
        entry["at"] = aware(entry["at"])
        entry["details"] = json.loads(entry["details"])
        out.append(entry)
    return out


def entries(conn: Connection, subject: str | None = None) -> list[dict[str, Any]]:
    """Every entry (or those about `subject`), oldest first."""
    query = select(audit_log).order_by(audit_log.c.id)
    if subject is not None:
        query = query.where(audit_log.c.subject == subject)
    return _entries(conn, query)


def _admin_entries_of(workspace_id: int, workspace: str) -> Any:
    """An admin's changes to the workspace from the command line (they carry no token): its
    environments' prices (subject WORKSPACE/KEY) and its alert channels and rules."""
    prefix = workspace + "/"
    priced = (audit_log.c.action == "environment.price") & (
        func.substr(audit_log.c.subject, 1, len(prefix)) == prefix
    )
    ours = [
        audit_log.c.subject.like(kind + ":%")
        & select(table.c.id)
        .where(
            ((kind + ":") + table.c.id.cast(String)) == audit_log.c.subject,
            table.c.workspace_id == workspace_id,
        )
        .exists()
        for kind, table in (("channel", notify_channels), ("rule", notify_rules))
    ]
    return priced | (audit_log.c.action.like("notify.%") & or_(*ours))


def of_workspace(
    conn: Connection, workspace_id: int, *, offset: int = 0, limit: int = 100
) -> list[dict[str, Any]]:
    """The workspace's entries, newest first: those made with one of its tokens, about one
    of its runs or tokens (CLI and webhook entries carry no token), or an admin's change to
    its prices or alerts."""
    by_token = audit_log.c.token_id.in_(
        select(tokens.c.id).where(tokens.c.workspace_id == workspace_id)
    )
    # EXISTS on the unique run_id index: the newest entries are checked first, and the LIMIT
    # stops the walk, however many runs the workspace holds.
    about_run = audit_log.c.subject.like("run:%") & (
        select(runs.c.id)
        .where(
            runs.c.run_id == func.substr(audit_log.c.subject, 5),
            runs.c.workspace_id == workspace_id,
        )
        .exists()
    )
    about_token = audit_log.c.subject.like("token:%") & (
        select(tokens.c.id)
        .where(
            ("token:" + tokens.c.id.cast(String)) == audit_log.c.subject,
            tokens.c.workspace_id == workspace_id,
        )
        .exists()
    )
    name = conn.execute(select(workspaces.c.name).where(workspaces.c.id == workspace_id)).scalar()
    admin = _admin_entries_of(workspace_id, str(name)) if name is not None else false()
    query = (
        select(audit_log)
        .where(by_token | about_run | about_token | admin)
        .order_by(audit_log.c.id.desc())
        .offset(offset)
        .limit(limit)
    )
    return _entries(conn, query)
