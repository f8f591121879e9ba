"""The database layout that schema version 3 wrote (the server before gate_server/db/ existed),
frozen here so a test can build such a database and open it with today's code.

Never edit these definitions: they are what databases in the field hold. A test checks that a
database built from them, once migrated, has exactly the layout a fresh database gets.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime, timedelta, timezone

from sqlalchemy import (
    BigInteger,
    Column,
    Connection,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    create_engine,
    insert,
)

metadata = MetaData()

migrations = Table(
    "rnx_schema_migrations",
    metadata,
    Column("version", Integer, primary_key=True, autoincrement=False),
    Column("name", String(200), nullable=False),
    Column("applied_at", DateTime(timezone=True), nullable=False),
)
workspaces = Table(
    "workspaces",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("name", String(100), nullable=False, unique=True),
    Column("created_at", DateTime(timezone=True), nullable=False),
)
repositories = Table(
    "repositories",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("workspace_id", Integer, ForeignKey("workspaces.id"), nullable=False),
    Column("name", String(201), nullable=False),
    Column("github_repository_id", BigInteger, nullable=True, unique=True),
    Column("created_at", DateTime(timezone=True), nullable=False),
    UniqueConstraint("workspace_id", "name", name="uq_repositories_workspace_name"),
)
tokens = Table(
    "tokens",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("kind", String(10), nullable=False),
    Column("workspace_id", Integer, ForeignKey("workspaces.id"), nullable=False),
    Column("repository_id", Integer, ForeignKey("repositories.id"), nullable=True),
    Column("branches", Text, nullable=False),
    Column("token_hash", String(64), nullable=False, unique=True),
    Column("prefix", String(16), nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("revoked_at", DateTime(timezone=True), nullable=True),
    Column("last_used_at", DateTime(timezone=True), nullable=True),
)
runs = Table(
    "runs",
    metadata,
    Column("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True),
    Column("run_id", String(36), nullable=False, unique=True),
    Column("workspace_id", Integer, ForeignKey("workspaces.id"), nullable=False),
    Column("repository_id", Integer, ForeignKey("repositories.id"), nullable=False),
    Column("token_id", Integer, ForeignKey("tokens.id"), nullable=True),
    Column("sha", String(64), nullable=False),
    Column("branch", String(255), nullable=False),
    Column("base_branch", String(255), nullable=True),
    Column("event", String(64), nullable=False),
    Column("pr_number", Integer, nullable=True),
    Column("environment_key", String(128), nullable=False),
    Column("tier", String(5), nullable=False),
    Column("answer", Text, nullable=False),
    Column("document", LargeBinary, nullable=False),
    Column("body_sha256", String(64), nullable=False),
    Column("signature", String(80), nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("received_at", DateTime(timezone=True), nullable=False),
    Column("baseline_branch", String(255), nullable=True),
    Column("baseline_at", DateTime(timezone=True), nullable=True),
    Column("accepted_at", DateTime(timezone=True), nullable=True),
    Column("accepted_by", String(200), nullable=True),
    Column("accept_reason", Text, nullable=True),
    Column("accepted_via", String(32), nullable=True),
    Index(
        "ix_runs_baseline",
        "repository_id",
        "baseline_branch",
        "environment_key",
        "baseline_at",
        "id",
    ),
    Index("ix_runs_repository_received", "repository_id", "received_at"),
)
audit_log = Table(
    "audit_log",
    metadata,
    Column("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True),
    Column("at", DateTime(timezone=True), nullable=False),
    Column("actor", String(200), nullable=False),
    Column("token_id", Integer, nullable=True),
    Column("action", String(64), nullable=False),
    Column("subject", String(200), nullable=False),
    Column("details", Text, nullable=False),
)
server_keys = Table(
    "server_keys",
    metadata,
    Column("name", String(32), primary_key=True),
    Column("private_key_pem", Text, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
)
github_deliveries = Table(
    "github_deliveries",
    metadata,
    Column("delivery_id", String(100), primary_key=True),
    Column("event", String(64), nullable=False),
    Column("action", String(64), nullable=True),
    Column("received_at", DateTime(timezone=True), nullable=False),
    Column("status", Integer, nullable=True),
    Column("answer", Text, nullable=True),
    Index("ix_github_deliveries_received", "received_at"),
)
oidc_token_uses = Table(
    "oidc_token_uses",
    metadata,
    Column("jti", String(200), primary_key=True),
    Column("repository_id", Integer, nullable=False),
    Column("used_at", DateTime(timezone=True), nullable=False),
    Column("expires_at", DateTime(timezone=True), nullable=False),
)
branch_renames = Table(
    "branch_renames",
    metadata,
    Column("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True),
    Column("repository_id", Integer, ForeignKey(repositories.c.id), nullable=False),
    Column("from_branch", String(255), nullable=False),
    Column("to_branch", String(255), nullable=False),
    Column("renamed_at", DateTime(timezone=True), nullable=False),
    Column("actor", String(200), nullable=False),
    Column("via", String(32), nullable=False),
    Index("ix_branch_renames_repository", "repository_id", "id"),
)

VERSIONS = [
    (1, "workspaces, repositories, tokens, runs, audit log, server keys"),
    (2, "github webhook deliveries, spent OIDC token ids"),
    (3, "branch renames"),
]


def build_v3_database(url: str) -> None:
    """An empty database at schema version 3, as `rnx serve` of that time left it."""
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            metadata.create_all(conn)
            applied = datetime(2026, 1, 1, tzinfo=timezone.utc)
            for version, name in VERSIONS:
                conn.execute(
                    insert(migrations).values(
                        version=version, name=name, applied_at=applied + timedelta(minutes=version)
                    )
                )
    finally:
        engine.dispose()


def add_repository(
    conn: Connection,
    when: datetime,
    *,
    token_hash: str | None = None,
    prefix: str = "rnx_ci_",
    branches: Sequence[str] = ("main",),
) -> None:
    """Workspace 1 "acme" and its repository 1 "acme/kernels", as these versions stored them,
    and CI token 1 of that repository (the hash and shown prefix of its secret) when
    `token_hash` is given."""
    conn.execute(insert(workspaces).values(id=1, name="acme", created_at=when))
    conn.execute(
        insert(repositories).values(id=1, workspace_id=1, name="acme/kernels", created_at=when)
    )
    if token_hash is not None:
        conn.execute(
            insert(tokens).values(
                id=1,
                kind="ci",
                workspace_id=1,
                repository_id=1,
                branches=json.dumps(list(branches)),
                token_hash=token_hash,
                prefix=prefix,
                created_at=when,
            )
        )
