"""An upload waiting on the database never holds up the server's other requests: on SQLite its
statements block the thread that runs them, so uploads are ingested in worker threads there
(gate_server/http/api.py), and /healthz and /readyz answer meanwhile (issue 35, item 7)."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from testbed.factories import body, make_results
from testbed.live_server import LiveServer


@contextmanager
def _runs_locked(database_url: str) -> Iterator[None]:
    """Hold what an upload's write needs, from another connection, until the block ends."""
    url = make_url(database_url)
    if url.get_backend_name() == "sqlite":
        conn = sqlite3.connect(str(url.database), isolation_level=None)
        conn.execute("BEGIN IMMEDIATE")  # SQLite's one write lock
        try:
            yield
        finally:
            conn.execute("ROLLBACK")
            conn.close()
        return
    engine = create_engine(database_url)
    try:
        with engine.connect() as conn, conn.begin():
            conn.execute(text("LOCK TABLE runs IN EXCLUSIVE MODE"))
            yield
    finally:
        engine.dispose()


def test_health_answers_while_an_upload_waits_on_the_database(
    live_server: LiveServer, ci_token: Any, sign: Any
) -> None:
    token = ci_token()
    data = body(make_results(seed=1))
    answers: list[httpx.Response] = []

    def upload() -> None:
        answers.append(
            httpx.post(
                f"{live_server.url}/api/v1/runs",
                content=data,
                headers=sign(token.secret, data),
                timeout=60,
            )
        )

    with _runs_locked(live_server.database_url):
        uploading = threading.Thread(target=upload)
        uploading.start()
        time.sleep(1.0)  # let the upload reach the server and wait on the lock
        # The upload cannot finish while the lock is held; the server still answers (on main,
        # SQLite's busy wait ran in the event loop and these waited for it, up to 30 s).
        health = httpx.get(f"{live_server.url}/healthz", timeout=10)
        assert health.status_code == 200
        assert not answers and uploading.is_alive()
    uploading.join(timeout=60)
    assert answers and answers[0].status_code == 201, answers and answers[0].text
