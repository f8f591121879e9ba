"""Helpers for tests and benchmarks of the gate server: databases, tokens, signed uploads and
the real server on loopback (`from testbed.gate_helpers import ...`)."""

from __future__ import annotations

import os
import socket
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# The loopback server lives with the server; tests and benchmarks import it from here.
from testbed.live_server import LiveServer, free_port, start_server  # noqa: F401


@contextmanager
def refusing_port() -> Iterator[int]:
    """A loopback port that refuses every connection for as long as the block lasts: bound but
    never listened on. A port merely free a moment ago (free_port()) could meanwhile be taken by
    a server that another test, in another pytest worker, starts on it."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        yield int(s.getsockname()[1])


DEFAULT_POSTGRES_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/test"


def postgres_base_url() -> str:
    return os.environ.get("RNX_TEST_POSTGRES_URL", DEFAULT_POSTGRES_URL)


def postgres_unreachable(url: str) -> str | None:
    """None when PostgreSQL answers, else why not."""
    from sqlalchemy import create_engine, text

    engine = create_engine(url, connect_args={"connect_timeout": 3})
    try:
        with engine.connect() as conn:
            conn.execute(text("SELECT 1"))
    except Exception as e:  # any failure to connect is a reason to skip, reported as such
        return f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
    finally:
        engine.dispose()
    return None


def fresh_postgres_schema(base_url: str) -> tuple[str, Callable[[], None]]:
    """A new, empty schema on the test PostgreSQL: (URL whose search_path is that schema, drop)."""
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url
    from sqlalchemy.pool import NullPool

    schema = f"rnx_test_{uuid.uuid4().hex[:12]}"
    # No pool: between the CREATE and the DROP (which the tests queue: tests/conftest.py,
    # drop_later) no connection is held open, so queued drops cannot use up max_connections.
    admin = create_engine(base_url, isolation_level="AUTOCOMMIT", poolclass=NullPool)
    with admin.connect() as conn:
        conn.execute(text(f'CREATE SCHEMA "{schema}"'))
    url = make_url(base_url).update_query_dict({"options": f"-csearch_path={schema}"})

    def drop() -> None:
        with admin.connect() as conn:
            conn.execute(text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
        admin.dispose()

    return url.render_as_string(hide_password=False), drop


@dataclass(frozen=True)
class Token:
    id: int
    secret: str


def create_token(
    database_url: str,
    *,
    workspace: str = "acme",
    repository: str | None = "acme/kernels",
    branches: tuple[str, ...] = ("main", "release/*"),
    viewer: bool = False,
    name: str | None = None,
    can_act: bool = False,
) -> Token:
    """A new token; a viewer token has no repository, and branches only when it may act."""
    from gate_server.db import open_database
    from gate_server.domain.auth import issue_token

    s = open_database(database_url)
    try:
        token_id, secret = issue_token(
            s,
            workspace=workspace,
            repository=None if viewer else repository,
            branches=() if viewer and not can_act else branches,
            viewer=viewer,
            actor="test",
            name=name,
            can_act=can_act,
        )
    finally:
        s.close()
    return Token(token_id, secret)


@contextmanager
def server_with_ci_token(
    root: Path, repository: str = "acme/kernels", branches: tuple[str, ...] = ("main",)
) -> Iterator[tuple[LiveServer, str]]:
    """The real server on loopback over a new SQLite database in root, and the secret of a CI
    token for repository: what a test of the action uploads to."""
    url = f"sqlite:///{root / 'gate.db'}"
    token = create_token(url, repository=repository, branches=branches)
    live = start_server(url, root)
    try:
        yield live, token.secret
    finally:
        live.stop()


def signed_headers(secret: str, body: bytes, *, timestamp: int | None = None) -> dict[str, str]:
    """The headers of an upload, signed as DESIGN.md says."""
    from gate_server.domain.auth import sign_upload

    ts = str(int(time.time()) if timestamp is None else timestamp)
    return {
        "Authorization": f"Bearer {secret}",
        "Content-Type": "application/json",
        "X-Kernalin-Timestamp": ts,
        "X-Kernalin-Signature": sign_upload(secret, ts, body),
    }


def webhook_headers(secret: str, raw: bytes, event: str, delivery: str) -> dict[str, str]:
    """The headers of GitHub's webhook delivery of `raw`, signed with `secret`."""
    from gate_server.http.webhook import signature_of

    return {
        "Content-Type": "application/json",
        "X-GitHub-Event": event,
        "X-GitHub-Delivery": delivery,
        "X-Hub-Signature-256": signature_of(secret, raw),
    }


def insert_change_point(conn: Any, **fields: Any) -> int:
    """Store a change point as detection would (gate_server/db/change_points.py), on `conn` (a
    write connection), and return its id. `fields` override a 1.18x step on repository 1's
    main, environment "h200", kernels/attention.py, pytorch_eager/float16/bs8, from commit
    a*40 to b*40."""
    from gate_server.db import change_points

    found = change_points.insert_new(
        conn,
        change_points.NewChangePoint(
            **{
                "repository_id": 1,
                "branch": "main",
                "environment_key": "h200",
                "workload": "kernels/attention.py",
                "configuration": "pytorch_eager/float16/bs8",
                "before_run_id": "11111111-1111-4111-8111-111111111111",
                "before_sha": "a" * 40,
                "after_run_id": "22222222-2222-4222-8222-222222222222",
                "after_sha": "b" * 40,
                "ratio": 1.18,
                "low": 1.12,
                "high": 1.25,
                "p_value": 0.001,
                "early": False,
                "end_run_id": None,
                "end_sha": None,
                **fields,
            }
        ),
        undoes_id=None,
    )
    assert found is not None, "insert_new stored nothing: that change point is stored already"
    return found


def outbox_jobs(database_url: str, kind: str, *, state: str | None = None) -> list[Any]:
    """The outbox's jobs of `kind` (and `state`), oldest first, read on a database opened for it."""
    from gate_server.db import open_database, outbox

    database = open_database(database_url)
    try:
        with database.read() as conn:
            return outbox.jobs(conn, kind=kind, state=state)
    finally:
        database.close()


def app_mode_settings(
    database_url: str, key: Any, github_url: str, *, app_id: str = "314", **settings: Any
) -> Any:
    """The server's settings in App mode: GitHub App `app_id` signing with `key` (an RSA private
    key), GitHub's API at `github_url` (the fake, or a port that refuses), no OIDC; `settings`
    add to them (public_url, the webhook's secret, ...)."""
    from gate_server.settings import ServerSettings
    from rnx_github.app_auth import AppCredentials
    from testbed.fakes.github_endpoints import private_pem

    return ServerSettings(
        database_url=database_url,
        github_app=AppCredentials(app_id, private_pem(key), github_url),
        github_api_url=github_url,
        oidc_audience=None,
        **settings,
    )


def app_mode_env(key: Any, github_url: str, *, app_id: str = "314") -> dict[str, str]:
    """The live server's environment in App mode: what app_mode_settings() is in-process."""
    from testbed.fakes.github_endpoints import private_pem

    return {
        "RNX_GITHUB_APP_ID": app_id,
        "RNX_GITHUB_APP_PRIVATE_KEY": private_pem(key),
        "RNX_GITHUB_API_URL": github_url,
        "RNX_OIDC_AUDIENCE": "off",
    }


@contextmanager
def app_without_worker(settings: Any, **client_args: Any) -> Iterator[Any]:
    """The app in-process (a starlette TestClient, `client_args` to it) with its outbox worker
    stopped, so the test runs the jobs itself (run_due_jobs). Stopped, not merely slow to look
    again: a test that a loaded machine stretched past the worker's poll would race it."""
    from starlette.testclient import TestClient

    from gate_server.asgi import create_app

    app = create_app(settings)
    with TestClient(app, **client_args) as client:
        assert client.portal is not None  # the client's event loop, while it is entered
        client.portal.call(app.state.outbox_worker.stop)
        yield client


def run_due_jobs(client: Any) -> int:
    """Run every due outbox job with the (stopped) worker of app_without_worker(); how many."""
    worker = client.app.state.outbox_worker
    ran = 0
    while worker.run_once():
        ran += 1
    return ran
