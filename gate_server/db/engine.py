"""Opening the database and its transactions: SQLite (a file, WAL) or PostgreSQL (a pool).

The only place that knows how each engine is set up, how a write transaction starts, and how
transactions are ordered across processes (PostgreSQL advisory locks).
"""

from __future__ import annotations

import math
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import create_engine, event, func, select, text, update
from sqlalchemy.engine import Connection, Engine, make_url
from sqlalchemy.exc import ArgumentError, DisconnectionError
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.util import greenlet_spawn

from gate_server.db.schema import migrations
from gate_server.db.sealed import Sealer
from gate_server.errors import SettingsError

# First keys of PostgreSQL's advisory locks (any constants, distinct): migrations run one at a
# time across processes; a repository's branch renames are ordered against its uploads and
# accepts (second key: the repository id); a repository's change points are written by one
# process at a time (second key: the repository id).
MIGRATION_LOCK = 727_274_001
BRANCH_LOCK = 727_274_002
CHANGE_LOCK = 727_274_003
# An acknowledged upload must survive a power loss: in WAL mode NORMAL syncs only at
# checkpoints, so the last commits before a crash of the machine could vanish. FULL syncs the
# WAL on every commit (benchmarks/server/server_load.py --synchronous measures the cost).
SQLITE_SYNCHRONOUS = "FULL"
# A pooled PostgreSQL connection idle this long is checked with a round trip before it is used
# (the database may have restarted meanwhile); one used a moment ago is not: checking every
# checkout (pool_pre_ping) cost each upload three round trips
# (`benchmarks/server/server_load.py --db postgresql --round-trips`). Should the database go
# away under load, a statement fails instead, the pool replaces every connection it holds, and
# that request is answered 503 with Retry-After (gate_server/http/answers.py), which the action
# retries.
PING_AFTER_IDLE_S = 1.0
# INSERT ... RETURNING (db/runs.py insert_run) came with SQLite 3.35 (2021); Python uses the
# system's library, which on older distributions is older.
SQLITE_MIN_VERSION = (3, 35, 0)

T = TypeVar("T")

# True in code run by run_in_event_loop: there a Database uses its connections whose
# statements are awaited (PostgreSQL's psycopg asyncio ones), anywhere else its blocking ones.
_IN_EVENT_LOOP: ContextVar[bool] = ContextVar("rnx_in_event_loop", default=False)


def shown_url(url: str) -> str:
    """A database URL fit for a message: its password masked."""
    try:
        return repr(make_url(url))
    except ArgumentError:
        return repr(url)


class Database:
    """One database, chosen by its URL: `sqlite:///path.db` or `postgresql+psycopg://...`."""

    def __init__(self, url: str, *, pool_size: int = 10, sealer: Sealer | None = None):
        """sealer: seals and opens the secrets stored in it (gate_server/db/sealed.py)."""
        self.sealer = sealer or Sealer()
        try:
            parsed = make_url(url)
        except ArgumentError:
            raise SettingsError(
                f"{url!r} is not a database URL; use sqlite:///path/to/file.db or "
                "postgresql+psycopg://user@host:5432/dbname"
            ) from None
        self.url = url
        self.dialect = parsed.get_backend_name()
        self.engine: Engine
        # The engine code run by run_in_event_loop uses: on PostgreSQL a second pool over the
        # same URL whose statements are awaited, so the loop serves other requests while one
        # waits; on SQLite (a local file, nothing to await) the same engine.
        self.loop_engine: Engine
        if self.dialect == "sqlite":
            if sqlite3.sqlite_version_info < SQLITE_MIN_VERSION:
                raise SettingsError(
                    f"this Python's SQLite is {sqlite3.sqlite_version}; the server needs "
                    f"{'.'.join(map(str, SQLITE_MIN_VERSION))} or newer: use a Python built "
                    "with a newer SQLite, or PostgreSQL (RNX_DATABASE_URL)"
                )
            self.engine = self.loop_engine = _sqlite_engine(url, parsed.database)
        elif self.dialect == "postgresql":
            self.engine = create_engine(url, pool_size=pool_size, max_overflow=pool_size)
            awaited = create_async_engine(url, pool_size=pool_size, max_overflow=pool_size)
            self.loop_engine = awaited.sync_engine
            for engine in (self.engine, self.loop_engine):
                event.listen(engine, "connect", _read_any_timestamp)
                _ping_after_idle(engine)
        else:
            raise SettingsError(f"unsupported database {self.dialect!r}: use SQLite or PostgreSQL")

    @property
    def awaited(self) -> bool:
        """Whether code run by run_in_event_loop awaits this database's statements (PostgreSQL)
        rather than blocking the loop on them (SQLite)."""
        return self.loop_engine is not self.engine

    def _current(self) -> Engine:
        return self.loop_engine if _IN_EVENT_LOOP.get() else self.engine

    def close(self) -> None:
        """Close both pools; the awaited one's connections only close in run_in_event_loop."""
        self.engine.dispose()
        if self.awaited:
            self.loop_engine.dispose()

    @contextmanager
    def read(self) -> Iterator[Connection]:
        with self._current().connect() as conn, conn.begin():
            yield conn

    @contextmanager
    def lookup(self) -> Iterator[Connection]:
        """A read whose statements need no snapshot in common (each sees what is committed when
        it runs). On PostgreSQL that is what a read transaction gives under READ COMMITTED as
        well, so it runs without one: BEGIN and COMMIT cost an upload's two lookups four round
        trips. On SQLite it is read()."""
        if self.dialect != "postgresql":
            with self.read() as conn:
                yield conn
            return
        with self._current().connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            yield conn

    @contextmanager
    def write(self) -> Iterator[Connection]:
        """A write transaction; on SQLite it takes the write lock up front (BEGIN IMMEDIATE) so
        two writers queue on busy_timeout instead of one failing with 'database is locked'."""
        with self._current().connect() as conn:
            conn.execution_options(rnx_write=True)
            with conn.begin():
                yield conn

    def ping(self) -> None:
        """Raises when the database does not answer or holds no schema (for /readyz)."""
        with self._current().connect() as conn:
            conn.execute(select(func.count()).select_from(migrations)).scalar_one()

    def probe_write(self) -> None:
        """Raises when the database cannot store (read-only, a standby, a full disk): rewrites
        the newest migration row as it is, and commits, as an upload's write would."""
        newest = select(func.max(migrations.c.version)).scalar_subquery()
        with self.write() as conn:
            conn.execute(
                update(migrations)
                .where(migrations.c.version == newest)
                .values(name=migrations.c.name)
            )

    def explain(self, query: Any) -> str:
        """The database's plan for a query, on one line (tests and benchmarks check indexes)."""
        sql = str(query.compile(self.engine, compile_kwargs={"literal_binds": True}))
        with self.read() as conn:
            if self.dialect == "sqlite":
                rows = conn.exec_driver_sql("EXPLAIN QUERY PLAN " + sql)
                return " | ".join(str(r[-1]) for r in rows)
            return " | ".join(str(r[0]) for r in conn.exec_driver_sql("EXPLAIN " + sql))


def advisory_lock(
    conn: Connection, key: int, sub: int | None = None, *, shared: bool = False
) -> None:
    """Hold a PostgreSQL advisory lock until this transaction ends. Nothing on SQLite: its
    write transactions already run one at a time (BEGIN IMMEDIATE)."""
    if conn.dialect.name != "postgresql":
        return
    fn = "pg_advisory_xact_lock_shared" if shared else "pg_advisory_xact_lock"
    if sub is None:
        conn.execute(text(f"SELECT {fn}(:k)"), {"k": key})
    else:
        conn.execute(
            text(f"SELECT {fn}(CAST(:k AS integer), CAST(:r AS integer))"), {"k": key, "r": sub}
        )


def _sqlite_engine(url: str, database: str | None) -> Engine:
    if database and database != ":memory:":
        Path(database).parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(url, connect_args={"timeout": 30, "check_same_thread": False})

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        # Let SQLAlchemy's begin event below emit BEGIN itself (pysqlite's own is deferred only).
        dbapi_conn.isolation_level = None
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA busy_timeout=30000")
        _switch_to_wal(cur)
        cur.execute(f"PRAGMA synchronous={SQLITE_SYNCHRONOUS}")
        cur.execute("PRAGMA foreign_keys=ON")
        cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        write = conn.get_execution_options().get("rnx_write", False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")

    return engine


def _switch_to_wal(cur: Any, *, wait_s: float = 30.0) -> None:
    """Put the file in WAL mode (an in-memory database stays as it is). The switch needs an
    exclusive lock, and SQLite answers 'database is locked' at once, without its busy handler,
    while another process's first start holds the file; so retry until the deadline."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            cur.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as e:
            if "locked" not in str(e) or time.monotonic() > deadline:
                raise
        time.sleep(0.05)


async def run_in_event_loop(fn: Callable[..., T], *args: Any) -> T:
    """fn(*args), synchronous code, run in the event loop's own thread with its database I/O
    awaited (SQLAlchemy's greenlet bridge): the GIL is not handed between threads. Inside,
    every Database uses its loop_engine; any other blocking wait holds up the
    loop (SQLite's is a local file's). greenlet_spawn is what SQLAlchemy's own
    AsyncConnection.run_sync runs a synchronous function with."""

    def in_loop() -> T:
        # Set inside the greenlet: the Database calls fn makes pick their awaited connections.
        token = _IN_EVENT_LOOP.set(True)
        try:
            return fn(*args)
        finally:
            _IN_EVENT_LOOP.reset(token)

    return await greenlet_spawn(in_loop)


def _ping_after_idle(engine: Engine) -> None:
    """Check a pooled connection before use only when it sat idle PING_AFTER_IDLE_S or longer;
    a dead one is replaced (DisconnectionError: the pool connects again and retries)."""

    @event.listens_for(engine, "connect")
    @event.listens_for(engine, "checkin")
    def _idle_from(_dbapi_conn: Any, record: Any) -> None:
        record.info["idle_since"] = time.monotonic()

    @event.listens_for(engine, "checkout")
    def _check_if_idle(dbapi_conn: Any, record: Any, _proxy: Any) -> None:
        if time.monotonic() - record.info.get("idle_since", -math.inf) < PING_AFTER_IDLE_S:
            return
        try:
            engine.dialect.do_ping(dbapi_conn)
        except engine.dialect.loaded_dbapi.Error as e:
            raise DisconnectionError(f"a pooled connection no longer answers: {e}") from e


def _read_any_timestamp(dbapi_conn: Any, _record: Any) -> None:
    """PostgreSQL stores timestamps from 4713 BC to 294276 AD, Python reads years 1 to 9999:
    a value outside (stored before uploads were bounded) reads as the nearest one Python has,
    so one bad row cannot make every page that lists it fail."""
    from psycopg.types.datetime import TimestamptzBinaryLoader, TimestamptzLoader

    dbapi_conn.adapters.register_loader("timestamptz", _clamped(TimestamptzLoader))
    dbapi_conn.adapters.register_loader("timestamptz", _clamped(TimestamptzBinaryLoader))


def _clamped(loader: type[Any]) -> type[Any]:
    from psycopg import DataError

    class Clamped(loader):
        def load(self, data: Any) -> datetime:
            try:
                loaded: datetime = super().load(data)
                return loaded
            except DataError as e:
                early = "BC" in bytes(data).decode("ascii", "replace") or "too small" in str(e)
                return (datetime.min if early else datetime.max).replace(tzinfo=timezone.utc)

    return Clamped
