"""The server's database: every table, migration and SQL statement of the server is in here.

    schema.py        the tables (including the GitHub integration's)
    migrations.py    the schema's versions; migrate() and open_database()
    engine.py        Database: the engine (SQLite WAL / PostgreSQL pool), read and write
                     transactions, advisory locks
    rows.py          rows as frozen dataclasses (times as UTC)
    repositories.py  workspaces and repositories (by name, by GitHub id)
    tokens.py        tokens (by hash, by id, a repository's CI tokens)
    agent_tokens.py  what an agent token adds: name, user, scopes, expiry
    runs.py          runs: store, read, baselines, a pull request's runs, accepts
    traces.py        profile traces kept with their runs (harness.keep-traces)
    renames.py       the branch-rename log
    audit.py         the audit log
    change_points.py change points found in baseline history (stored once, acknowledged)
    keys.py          the server's own secret keys
    sealed.py        secrets at rest encrypted with the operator's key (RNX_SECRET_KEY)
    deliveries.py    GitHub webhook deliveries (acted on once)
    alerts.py        alerts: channels (and their secrets), rules, deliveries
    oidc_tokens.py   spent OIDC token ids
    outbox.py        the durable outbox: enqueue in the caller's transaction, claim under a
                     lease, complete, fail with a retry time
    hardware.py      the environments with a baseline of each workload (/hardware)
    prices.py        environments' hourly prices (the /hardware page's cost)
    dashboard.py     the dashboard's bounded reads

Query functions take a connection first (`with database.read() as conn: runs.by_run_id(conn,
run_id)`); what to do with what they find (renames, baselines, scopes) is decided outside.
"""

from __future__ import annotations

from gate_server.db import (
    agent_tokens,
    alerts,
    audit,
    autosync,
    change_points,
    dashboard,
    deliveries,
    hardware,
    keys,
    oidc_tokens,
    outbox,
    prices,
    renames,
    repositories,
    runs,
    sealed,
    tokens,
    traces,
)
from gate_server.db.engine import Database
from gate_server.db.migrations import LATEST_VERSION, migrate, open_database

__all__ = [
    "LATEST_VERSION",
    "Database",
    "agent_tokens",
    "audit",
    "autosync",
    "change_points",
    "dashboard",
    "deliveries",
    "hardware",
    "keys",
    "alerts",
    "oidc_tokens",
    "migrate",
    "outbox",
    "open_database",
    "prices",
    "renames",
    "repositories",
    "runs",
    "sealed",
    "tokens",
    "traces",
]
