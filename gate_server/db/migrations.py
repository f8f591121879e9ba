"""The schema's versions: each migration runs once, in order, inside one transaction.

A database records the versions applied in rnx_schema_migrations. Every process brings its
database to LATEST_VERSION when it starts (PostgreSQL: under an advisory lock, so processes
starting together migrate once; SQLite: under the write lock); a database newer than this code
is refused.

Each migration creates or changes tables as they were at its version: when a later migration
changes a table, the earlier one keeps a frozen copy of the old definition (as version 1 does
for server_keys), so an empty database and an old one end up with the same layout.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy import Column, DateTime, MetaData, String, Table, Text, func, insert, select
from sqlalchemy.engine import Connection

from gate_server.clock import utcnow
from gate_server.db.engine import MIGRATION_LOCK, Database, advisory_lock
from gate_server.db.schema import (
    audit_log,
    branch_renames,
    github_deliveries,
    migrations,
    oidc_token_uses,
    repositories,
    runs,
    tokens,
    workspaces,
)
from gate_server.errors import SettingsError

# server_keys as version 1 created it (migration 4 renamed its key column).
_v1_server_keys = Table(
    "server_keys",
    MetaData(),
    Column("name", String(32), primary_key=True),
    Column("private_key_pem", Text, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
)


def _create(*tables: Table) -> Callable[[Connection], None]:
    def apply(conn: Connection) -> None:
        for table in tables:
            table.create(conn, checkfirst=True)

    return apply


def _v4_name_the_key_column(conn: Connection) -> None:
    # Data preserved: a rename, on SQLite (3.25+) and PostgreSQL alike.
    conn.exec_driver_sql("ALTER TABLE server_keys RENAME COLUMN private_key_pem TO secret")


# (version, name, apply): applied in order, each once.
MIGRATIONS: list[tuple[int, str, Callable[[Connection], None]]] = [
    (
        1,
        "workspaces, repositories, tokens, runs, audit log, server keys",
        _create(
            workspaces,
            repositories,
            tokens,
            runs,
            audit_log,
            _v1_server_keys,
        ),
    ),
    (
        2,
        "github webhook deliveries, spent OIDC token ids",
        _create(github_deliveries, oidc_token_uses),
    ),
    (3, "branch renames", _create(branch_renames)),
    (
        4,
        "server_keys.private_key_pem renamed secret (it also holds an HMAC key)",
        _v4_name_the_key_column,
    ),
]
LATEST_VERSION = MIGRATIONS[-1][0]


def migrate(database: Database) -> int:
    """Bring the schema to LATEST_VERSION; safe when several processes start at once."""
    with database.write() as conn:
        advisory_lock(conn, MIGRATION_LOCK)
        migrations.create(conn, checkfirst=True)
        done = set(conn.execute(select(migrations.c.version)).scalars())
        newer = [v for v in done if v > LATEST_VERSION]
        if newer:
            raise SettingsError(
                f"the database has schema version {max(newer)}, newer than this server "
                f"knows ({LATEST_VERSION}); upgrade rnx-benchmark before serving it"
            )
        for version, name, apply in MIGRATIONS:
            if version not in done:
                apply(conn)
                conn.execute(
                    insert(migrations).values(version=version, name=name, applied_at=utcnow())
                )
    return LATEST_VERSION


def schema_version(database: Database) -> int:
    with database.read() as conn:
        found = conn.execute(select(func.max(migrations.c.version))).scalar_one()
    return int(found or 0)


def open_database(url: str) -> Database:
    """The database at `url`, migrated to LATEST_VERSION (closed again if that fails)."""
    database = Database(url)
    try:
        migrate(database)
    except BaseException:
        database.close()
        raise
    return database
