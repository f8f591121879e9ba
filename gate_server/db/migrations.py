"""The schema's versions: each migration runs once, in order, inside one transaction.

A database records the versions applied in rnx_schema_migrations. Every process brings its
database to LATEST_VERSION when it starts (PostgreSQL: under an advisory lock, so processes
starting together migrate once; SQLite: under the write lock); a database newer than this code
is refused.

Each migration creates or changes tables as they were at its version: when a later migration
changes a table, the earlier one keeps a frozen copy of the old definition (as version 1 does
for server_keys and runs), so an empty database and an old one end up with the same layout.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from sqlalchemy import (
    BigInteger,
    Column,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    bindparam,
    column,
    func,
    insert,
    select,
    table,
    update,
)
from sqlalchemy.engine import Connection

from gate_server.clock import utcnow
from gate_server.db.engine import MIGRATION_LOCK, Database, advisory_lock
from gate_server.db.schema import (
    agent_tokens,
    audit_log,
    autosync_commits,
    autosync_links,
    bisection_steps,
    bisections,
    branch_renames,
    environment_prices,
    github_deliveries,
    migrations,
    notify_channels,
    notify_deliveries,
    notify_rules,
    oidc_token_uses,
    outbox,
    repositories,
    run_locations,
    run_traces,
    runs,
    tokens,
    workspaces,
)
from gate_server.db.sealed import Sealer, settle
from gate_server.errors import SettingsError
from gate_server.workloads import MAX_WORKLOAD_BYTES, stored_workload

# server_keys as version 1 created it (migration 4 renamed its key column).
_v1_server_keys = Table(
    "server_keys",
    MetaData(),
    Column("name", String(32), primary_key=True),
    Column("private_key_pem", Text, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
)

# tokens as version 1 created it (migration 9 added name and can_act).
_v1_tokens = Table(
    "tokens",
    MetaData(),
    Column("id", Integer, primary_key=True),
    Column("kind", String(10), nullable=False),
    Column("workspace_id", Integer, ForeignKey(workspaces.c.id), nullable=False),
    Column("repository_id", Integer, ForeignKey(repositories.c.id), nullable=True),
    Column("branches", Text, nullable=False),
    Column("token_hash", String(64), nullable=False, unique=True),
    Column("prefix", String(16), nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("revoked_at", DateTime(timezone=True), nullable=True),
    Column("last_used_at", DateTime(timezone=True), nullable=True),
)

# runs as version 1 created it (migration 5 added the workload and re-made ix_runs_baseline).
_v1_runs = Table(
    "runs",
    MetaData(),
    Column("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True),
    Column("run_id", String(36), nullable=False, unique=True),
    Column("workspace_id", Integer, ForeignKey(workspaces.c.id), nullable=False),
    Column("repository_id", Integer, ForeignKey(repositories.c.id), nullable=False),
    Column("token_id", Integer, ForeignKey(tokens.c.id), nullable=True),
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
# change_points as version 6 created it (migration 13 added early).
_v6_change_points = Table(
    "change_points",
    MetaData(),
    Column("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True),
    Column("repository_id", Integer, ForeignKey(repositories.c.id), nullable=False),
    Column("branch", String(255), nullable=False),
    Column("environment_key", String(128), nullable=False),
    Column("workload", String(MAX_WORKLOAD_BYTES), nullable=False),
    Column("configuration", String(100), nullable=False),
    Column("before_run_id", String(36), nullable=False),
    Column("before_sha", String(64), nullable=False),
    Column("after_run_id", String(36), nullable=False),
    Column("after_sha", String(64), nullable=False),
    Column("ratio", Float, nullable=False),
    Column("low", Float, nullable=False),
    Column("high", Float, nullable=False),
    Column("p_value", Float, nullable=False),
    Column("detected_at", DateTime(timezone=True), nullable=False),
    Column("status", String(16), nullable=False),
    Column("note", Text, nullable=True),
    Column("acknowledged_at", DateTime(timezone=True), nullable=True),
    Column("acknowledged_by", String(200), nullable=True),
    Column("resolved_at", DateTime(timezone=True), nullable=True),
    Column("undoes_id", BigInteger, nullable=True),
    UniqueConstraint(
        "repository_id",
        "branch",
        "environment_key",
        "workload",
        "configuration",
        "after_run_id",
        name="uq_change_points_series_after",
    ),
    Index("ix_change_points_repository_status", "repository_id", "status", "id"),
)
# What migration 5 reads and writes of runs (a lightweight table: no metadata to keep frozen).
_v5_runs = table("runs", column("id"), column("document"), column("workload"))
_V5_BATCH = 500  # runs read and re-keyed per round trip: documents can be large


def _create(*tables: Table) -> Callable[[Connection], None]:
    def apply(conn: Connection) -> None:
        for each in tables:
            each.create(conn, checkfirst=True)

    return apply


def _v4_name_the_key_column(conn: Connection) -> None:
    # Data preserved: a rename, on SQLite (3.25+) and PostgreSQL alike.
    conn.exec_driver_sql("ALTER TABLE server_keys RENAME COLUMN private_key_pem TO secret")


def _v5_workload_per_run(conn: Connection) -> None:
    """Every run gets its workload, read from its stored document (a document that cannot be
    read gets gate_server.workloads.UNKNOWN_WORKLOAD, so this never fails on one), and the
    baseline index takes the workload. The new column's default only lets SQLite add a NOT
    NULL column to a table that has rows; every row is written below."""
    conn.exec_driver_sql("ALTER TABLE runs ADD COLUMN workload VARCHAR(1000) NOT NULL DEFAULT ''")
    last = 0
    while True:
        rows = conn.execute(
            select(_v5_runs.c.id, _v5_runs.c.document)
            .where(_v5_runs.c.id > last)
            .order_by(_v5_runs.c.id)
            .limit(_V5_BATCH)
        ).all()
        if not rows:
            break
        conn.execute(
            update(_v5_runs)
            .where(_v5_runs.c.id == bindparam("run"))
            .values(workload=bindparam("found")),
            [{"run": r.id, "found": stored_workload(bytes(r.document))} for r in rows],
        )
        last = rows[-1].id
    conn.exec_driver_sql("DROP INDEX ix_runs_baseline")
    next(i for i in runs.indexes if i.name == "ix_runs_baseline").create(conn)


def _v9_token_names_and_acting_viewers(conn: Connection) -> None:
    # Existing tokens stay unnamed and read-only (can_act false).
    conn.exec_driver_sql("ALTER TABLE tokens ADD COLUMN name VARCHAR(64)")
    conn.exec_driver_sql("ALTER TABLE tokens ADD COLUMN can_act BOOLEAN NOT NULL DEFAULT false")


def _v12_github_sign_in(conn: Connection) -> None:
    conn.exec_driver_sql("ALTER TABLE tokens ADD COLUMN github_login VARCHAR(39)")


def _v13_early_change_points_and_drifts(conn: Connection) -> None:
    # Change points stored before were all steps found by the rank test: not early, no end.
    conn.exec_driver_sql(
        "ALTER TABLE change_points ADD COLUMN early BOOLEAN NOT NULL DEFAULT false"
    )
    conn.exec_driver_sql("ALTER TABLE change_points ADD COLUMN end_run_id VARCHAR(36)")
    conn.exec_driver_sql("ALTER TABLE change_points ADD COLUMN end_sha VARCHAR(64)")


# (version, name, apply): applied in order, each once.
MIGRATIONS: list[tuple[int, str, Callable[[Connection], None]]] = [
    (
        1,
        "workspaces, repositories, tokens, runs, audit log, server keys",
        _create(
            workspaces,
            repositories,
            _v1_tokens,
            _v1_runs,
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
    (5, "runs.workload: one baseline per workload", _v5_workload_per_run),
    (
        6,
        "change points, run locations, the durable outbox",
        _create(_v6_change_points, run_locations, outbox),
    ),
    (
        7,
        "alerts: notification channels, rules and deliveries",
        _create(notify_channels, notify_rules, notify_deliveries),
    ),
    (8, "environment prices (per workspace, per hour)", _create(environment_prices)),
    (
        9,
        "tokens.name and tokens.can_act (viewer tokens that may act)",
        _v9_token_names_and_acting_viewers,
    ),
    (11, "agent tokens: name, user, scopes, expiry", _create(agent_tokens)),
    (12, "tokens.github_login (viewers signed in with GitHub)", _v12_github_sign_in),
    (
        13,
        "change_points.early (found in a short history), end_run_id and end_sha (drifts)",
        _v13_early_change_points_and_drifts,
    ),
    (15, "run traces (harness.keep-traces)", _create(run_traces)),
    (16, "bisections of change points and their steps", _create(bisections, bisection_steps)),
    (
        17,
        "auto-sync: linked workloads and the commits dispatched for them",
        _create(autosync_links, autosync_commits),
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


def open_database(url: str, secret_keys: Sequence[str] = ()) -> Database:
    """The database at `url`, migrated to LATEST_VERSION, its stored secrets sealed with
    `secret_keys` (RNX_SECRET_KEY; gate_server/db/sealed.py), closed again if that fails."""
    database = Database(url, sealer=Sealer(secret_keys))
    try:
        migrate(database)
        with database.write() as conn:
            settle(conn, database.sealer)
    except BaseException:
        database.close()
        raise
    return database
