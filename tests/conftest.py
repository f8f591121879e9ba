"""Shared fixtures: a real database (SQLite and PostgreSQL), the app in-process, the real server
on loopback, tokens and signed uploads. The plain helpers live in testbed/ (import them
from there, never from a conftest)."""

from __future__ import annotations

import gc
import os
import queue
import threading
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from testbed.gate_helpers import (
    LiveServer,
    Token,
    create_token,
    fresh_postgres_schema,
    postgres_base_url,
    postgres_unreachable,
    refusing_port,
    signed_headers,
    start_server,
)

if TYPE_CHECKING:
    from starlette.testclient import TestClient

    from gate_server.db import Database
    from gate_server.settings import ServerSettings


def pytest_unconfigure(config: pytest.Config) -> None:
    """The process ends next: out of the collector's reach, what a test worker holds (torch,
    browsers' clients, every test module) is not traversed again by the collections at exit,
    seconds of a worker's exit that the whole run waits for."""
    gc.freeze()


# ---- databases


@pytest.fixture(scope="session")
def postgres_url() -> str:
    """The test PostgreSQL's URL; skips (or fails with RNX_REQUIRE_POSTGRES=1) when it is down."""
    url = postgres_base_url()
    why = postgres_unreachable(url)
    if why is not None:
        message = f"PostgreSQL at {url} is unreachable ({why}); set RNX_TEST_POSTGRES_URL"
        if os.environ.get("RNX_REQUIRE_POSTGRES") == "1":
            pytest.fail(message + " (RNX_REQUIRE_POSTGRES=1 makes this a failure)")
        pytest.skip(message)
    return url


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh database for one test, migrated to the latest schema version: a SQLite file, or a
    PostgreSQL schema of its own."""
    yield from _fresh_database(request, tmp_path / "rnx-test.db")


@pytest.fixture(params=["sqlite", "postgresql"])
def empty_database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh, empty database for one test (no table yet): for tests of the migrations."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'rnx-empty.db'}"
    url: str = request.getfixturevalue("postgres_database")
    return url


@pytest.fixture(scope="session", params=["sqlite", "postgresql"])
def shared_database_url(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """One database per kind for the whole session (per pytest worker), behind shared_server.
    Only for tests that keep to a workspace of their own (the `workspace` fixture), so that
    none sees another's runs, tokens or audit entries; a test asks for this or for
    database_url, never both (each is parametrized over the two databases)."""
    yield from _fresh_database(request, tmp_path_factory.mktemp("shared-db") / "rnx-shared.db")


@pytest.fixture(scope="session")
def drop_later() -> Iterator[Callable[[Callable[[], None]], None]]:
    """drop_later(drop): run a schema's drop in a thread of this worker's, not in the test's
    teardown. DROP SCHEMA ... CASCADE takes about a quarter of a second of PostgreSQL's
    (hundreds of tests make a schema), which no test needs to wait for: the next one runs
    meanwhile in a schema of its own. The session waits for the last drop (as long as a test
    may take), and a drop that failed fails it."""
    pending: queue.Queue[Callable[[], None] | None] = queue.Queue()
    failed: list[BaseException] = []

    def drop_each() -> None:
        while (drop := pending.get()) is not None:
            try:
                drop()
            except BaseException as e:  # reported when the session ends
                failed.append(e)

    # A daemon: a drop that hangs fails the session below instead of holding its exit.
    thread = threading.Thread(target=drop_each, name="drop-schema", daemon=True)
    thread.start()
    try:
        yield pending.put
    finally:
        pending.put(None)
        thread.join(timeout=300)
    assert not thread.is_alive(), "a PostgreSQL schema's drop did not end in 300 s"
    if failed:
        raise failed[0]


@pytest.fixture(scope="session")
def migrated_schema(postgres_url: str) -> Iterator[Callable[[], tuple[str, Callable[[], None]]]]:
    """take(): a new PostgreSQL schema migrated to the latest version, as (URL, drop). The next
    one is made and migrated in a thread of this worker's while the test runs: migrating an
    empty schema is most of a test's database setup on PostgreSQL (hundreds of tests have
    one), which no test needs to wait for."""

    from gate_server.db import open_database

    def made() -> tuple[str, Callable[[], None]]:
        url, drop = fresh_postgres_schema(postgres_url)
        open_database(url).close()
        return url, drop

    with ThreadPoolExecutor(1, thread_name_prefix="migrate-schema") as making:
        ahead = making.submit(made)

        def take() -> tuple[str, Callable[[], None]]:
            nonlocal ahead
            taken = ahead.result()
            ahead = making.submit(made)
            return taken

        yield take
        ahead.result()[1]()  # the one made ahead for a test that never came


def _fresh_database(request: pytest.FixtureRequest, sqlite_file: Path) -> Iterator[str]:
    """The URL of a new database of the fixture's kind (request.param), migrated to the latest
    schema version: sqlite_file, or a PostgreSQL schema of its own, dropped afterwards
    (drop_later)."""
    if request.param == "sqlite":
        from gate_server.db import open_database

        url = f"sqlite:///{sqlite_file}"
        open_database(url).close()
        yield url
        return
    drop_later = request.getfixturevalue("drop_later")
    url, drop = request.getfixturevalue("migrated_schema")()
    try:
        yield url
    finally:
        drop_later(drop)


@pytest.fixture
def postgres_database(
    postgres_url: str, drop_later: Callable[[Callable[[], None]], None]
) -> Iterator[str]:
    """A fresh PostgreSQL schema only (for tests that are about PostgreSQL, e.g. several
    server processes on one database)."""
    url, drop = fresh_postgres_schema(postgres_url)
    try:
        yield url
    finally:
        drop_later(drop)


@pytest.fixture
def storage(database_url: str) -> Iterator[Database]:
    """The database of `database_url`, migrated (a gate_server.db.Database)."""
    from gate_server.db import open_database

    s = open_database(database_url)
    try:
        yield s
    finally:
        s.close()


# ---- tokens and signed uploads


@pytest.fixture
def ci_token(database_url: str) -> Callable[..., Token]:
    """make(workspace=, repository=, branches=) -> a new CI token in this test's database."""

    def make(**kwargs: object) -> Token:
        return create_token(database_url, **kwargs)  # type: ignore[arg-type]

    return make


@pytest.fixture
def viewer_token(database_url: str) -> Callable[..., Token]:
    def make(workspace: str = "acme") -> Token:
        return create_token(database_url, workspace=workspace, viewer=True)

    return make


@pytest.fixture
def sign() -> Callable[..., dict[str, str]]:
    """sign(secret, body, timestamp=None) -> the headers of a signed upload."""
    return signed_headers


@pytest.fixture
def token_for() -> Callable[..., Token]:
    """token_for(database_url, workspace=, repository=, branches=, viewer=) -> Token."""
    return create_token


# ---- the app in-process


@pytest.fixture
def server_settings(database_url: str) -> ServerSettings:
    from gate_server.settings import ServerSettings

    return ServerSettings(database_url=database_url, public_url="http://gate.test")


@pytest.fixture
def client(server_settings: ServerSettings) -> Iterator[TestClient]:
    """A starlette TestClient on create_app(settings); startup (migrations) has run."""
    from starlette.testclient import TestClient

    from gate_server.asgi import create_app

    with TestClient(create_app(server_settings)) as c:
        yield c


@pytest.fixture
def app_key() -> Any:
    """The GitHub fake's App key (testbed's app_key(): made once per process)."""
    from testbed.fakes.github_endpoints import app_key

    return app_key()


# ---- the real server on loopback


@pytest.fixture
def refused_port() -> Iterator[int]:
    """A loopback port that refuses connections for the whole test (see refusing_port)."""
    with refusing_port() as port:
        yield port


@pytest.fixture
def server_factory(tmp_path: Path) -> Iterator[Callable[..., LiveServer]]:
    """start(database_url, env=None) -> another real server; all are stopped after the test."""
    started: list[LiveServer] = []

    def start(database_url: str, env: dict[str, str] | None = None) -> LiveServer:
        server = start_server(database_url, tmp_path, env=env)
        started.append(server)
        return server

    try:
        yield start
    finally:
        for server in started:
            server.stop()


@pytest.fixture(scope="session")
def shared_server(
    shared_database_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiveServer]:
    """The real server over shared_database_url, started once per kind of database: a test
    that needs no server of its own (no settings of its own, nothing that stops or breaks it)
    uses this one in a fresh `workspace` and saves a server start (seconds on 2 cores)."""
    server = start_server(shared_database_url, tmp_path_factory.mktemp("shared-server"))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def workspace() -> str:
    """A workspace name no other test uses: what keeps tests on shared_server apart."""
    return f"ws-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def live_server(database_url: str, tmp_path: Path) -> Iterator[LiveServer]:
    """The real server (`rnx serve`, uvicorn) on loopback over this test's database."""
    server = start_server(database_url, tmp_path)
    try:
        yield server
    finally:
        server.stop()
