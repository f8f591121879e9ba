"""The database on both engines: migrations, the indexed baseline lookup, concurrent starts."""

from __future__ import annotations

import threading
from dataclasses import replace
from datetime import timedelta

import pytest
from sqlalchemy import insert, text
from sqlalchemy.exc import OperationalError

from gate_server.clock import utcnow
from gate_server.db import LATEST_VERSION, Database, engine, migrate, runs, tokens
from gate_server.db.migrations import MIGRATIONS, schema_version
from gate_server.db.schema import migrations
from gate_server.domain.receipts import generate_private_key_pem
from gate_server.domain.server_keys import stored_key
from gate_server.errors import SettingsError


def test_migrate_is_versioned_and_idempotent(empty_database_url):
    s = Database(empty_database_url)
    try:
        assert migrate(s) == LATEST_VERSION
        assert migrate(s) == LATEST_VERSION
        assert schema_version(s) == LATEST_VERSION
        with s.read() as conn:
            rows = conn.execute(text("SELECT count(*) FROM rnx_schema_migrations")).scalar_one()
        assert rows == len(MIGRATIONS)  # numbers may skip: branches reserve theirs
    finally:
        s.close()


def test_a_newer_schema_than_the_code_is_refused(storage):
    with storage.write() as conn:
        conn.execute(insert(migrations).values(version=999, name="future", applied_at=utcnow()))
    with pytest.raises(SettingsError, match="schema version 999"):
        migrate(storage)


def test_sqlite_uses_wal(tmp_path):
    s = Database(f"sqlite:///{tmp_path / 'sub' / 'gate.db'}")
    try:
        migrate(s)
        with s.read() as conn:
            assert conn.exec_driver_sql("PRAGMA journal_mode").scalar_one() == "wal"
    finally:
        s.close()


def test_bad_database_urls_are_clear_errors():
    with pytest.raises(SettingsError, match="not a database URL"):
        Database("no such thing")
    with pytest.raises(SettingsError, match="unsupported database 'mysql'"):
        Database("mysql://localhost/x")


def test_a_sqlite_too_old_for_the_server_is_a_clear_error(tmp_path, monkeypatch):
    """Ubuntu 20.04's SQLite (3.31) lacks INSERT ... RETURNING: say so before the first upload
    fails on it."""
    monkeypatch.setattr(engine.sqlite3, "sqlite_version_info", (3, 31, 1))
    monkeypatch.setattr(engine.sqlite3, "sqlite_version", "3.31.1")
    with pytest.raises(SettingsError, match=r"SQLite is 3\.31\.1; the server needs 3\.35\.0"):
        Database(f"sqlite:///{tmp_path / 'old.db'}")


def test_baseline_lookup_reads_the_index(storage, ci_token):
    """The query plan of the real baseline lookup uses ix_runs_baseline (no table scan)."""
    ci_token()
    key = runs.BaselineKey(1, "main", "env", "kernels/attention.py")
    plan = storage.explain(runs.baselines_query(key, 6))
    assert "ix_runs_baseline" in plan, plan


def test_concurrent_first_starts_share_one_receipt_key(empty_database_url):
    """Several processes starting at once on one database migrate once and sign with one key."""
    results: list[str] = []
    errors: list[BaseException] = []

    def start() -> None:
        s = Database(empty_database_url)
        try:
            migrate(s)
            results.append(stored_key(s, "receipt", generate_private_key_pem))
        except BaseException as e:  # collected and asserted below
            errors.append(e)
        finally:
            s.close()

    threads = [threading.Thread(target=start) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors
    assert len(results) == 4 and len(set(results)) == 1


def test_token_last_use_is_recorded(client, ci_token, storage):
    tok = ci_token()
    with storage.read() as conn:
        assert tokens.by_id(conn, tok.id).last_used_at is None  # type: ignore[union-attr]
    client.get(
        "/api/v1/runs/00000000-0000-0000-0000-000000000000",
        headers={"Authorization": f"Bearer {tok.secret}"},
    )
    with storage.read() as conn:
        used = tokens.by_id(conn, tok.id).last_used_at  # type: ignore[union-attr]
    assert used is not None and utcnow() - used < timedelta(minutes=1)


def test_a_run_id_stored_meanwhile_is_not_stored_again(storage, ci_token):
    """insert_run answers False for a stored run_id (an upload that lost the race) and leaves
    the stored run and the rest of the transaction as they were."""
    tok = ci_token()
    with storage.read() as conn:
        record = tokens.by_id(conn, tok.id)
    assert record is not None and record.repository_id is not None
    now = utcnow()
    new = runs.NewRun(
        run_id="00000000-0000-4000-8000-000000000001",
        sha="abcd",
        branch="main",
        base_branch=None,
        event="push",
        pr_number=None,
        environment_key="env",
        workload="kernels/attention.py",
        tier="PASS",
        created_at=now,
        received_at=now,
        baseline_branch=None,
        workspace_id=record.workspace_id,
        repository_id=record.repository_id,
        token_id=tok.id,
        answer={"tier": "PASS"},
        document=b"{}",
        body_sha256="0" * 64,
        signature="first",
    )
    with storage.write() as conn:
        assert runs.insert_run(conn, new)
    with storage.write() as conn:
        assert not runs.insert_run(conn, replace(new, signature="second", tier="BLOCK"))
        assert runs.count(conn) == 1  # the transaction goes on
    with storage.read() as conn:
        stored = runs.by_run_id(conn, new.run_id)
    assert stored is not None and (stored.signature, stored.tier) == ("first", "PASS")


def test_a_postgresql_lookup_runs_without_a_transaction(postgres_database):
    """An upload's lookups skip BEGIN and COMMIT (two round trips each): every statement is its
    own transaction, as read() gives under READ COMMITTED anyway."""
    storage = Database(postgres_database)
    try:
        stamps = "SELECT now(), pg_sleep(0.01)"
        with storage.lookup() as conn:
            first, second = (conn.execute(text(stamps)).scalar_one() for _ in range(2))
        assert first < second
        with storage.read() as conn:
            first, second = (conn.execute(text(stamps)).scalar_one() for _ in range(2))
        assert first == second  # one transaction: now() is when it began
    finally:
        storage.close()


def _backend_pid(storage: Database) -> int:
    with storage.read() as conn:
        return int(conn.execute(text("SELECT pg_backend_pid()")).scalar_one())


def _terminate(postgres_url: str, pid: int) -> None:
    """What a database restart does to one pooled connection: its backend goes away."""
    admin = Database(postgres_url)
    try:
        with admin.write() as conn:
            conn.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})
    finally:
        admin.close()


def test_a_postgresql_connection_used_a_moment_ago_is_not_pinged(postgres_database, monkeypatch):
    """An upload checks out three connections; a round trip to check each one cost it three
    (server_load --round-trips)."""
    storage = Database(postgres_database)
    pings: list[object] = []
    ping = storage.engine.dialect.do_ping
    monkeypatch.setattr(storage.engine.dialect, "do_ping", lambda c: pings.append(c) or ping(c))
    monkeypatch.setattr(engine, "PING_AFTER_IDLE_S", 3600.0)  # however slow this machine is
    try:
        first = _backend_pid(storage)
        assert _backend_pid(storage) == first  # the same pooled connection
        assert pings == []
        monkeypatch.setattr(engine, "PING_AFTER_IDLE_S", 0.0)  # as if it sat idle
        assert _backend_pid(storage) == first
        assert len(pings) == 1
    finally:
        storage.close()


def test_a_postgresql_connection_that_died_while_idle_is_replaced_before_use(
    postgres_url, postgres_database, monkeypatch
):
    storage = Database(postgres_database)
    try:
        dead = _backend_pid(storage)
        _terminate(postgres_url, dead)
        monkeypatch.setattr(engine, "PING_AFTER_IDLE_S", 0.0)  # it sat idle: checked first
        assert _backend_pid(storage) != dead
    finally:
        storage.close()


def test_a_postgresql_restart_under_load_fails_one_use_then_every_connection_is_new(
    postgres_url, postgres_database, monkeypatch
):
    """A connection used a moment ago is not checked: the statement fails (the API answers it
    503 with Retry-After), and the pool then replaces every connection it held."""
    monkeypatch.setattr(engine, "PING_AFTER_IDLE_S", 3600.0)  # every use is "a moment ago"
    storage = Database(postgres_database)
    try:
        with storage.read() as a, storage.read() as b:  # two pooled connections
            pids = [int(c.execute(text("SELECT pg_backend_pid()")).scalar_one()) for c in (a, b)]
        for pid in pids:
            _terminate(postgres_url, pid)
        with pytest.raises(OperationalError):
            _backend_pid(storage)
        assert {_backend_pid(storage), _backend_pid(storage)}.isdisjoint(pids)
    finally:
        storage.close()
