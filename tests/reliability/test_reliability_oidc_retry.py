"""A retried OIDC upload gets through: the server spends an OIDC token on first use, so the
action must ask GitHub for a fresh one on each retry (regression: it resent the spent one and
was refused as a replay, losing the run whenever the first answer was lost on the way back)."""

from __future__ import annotations

import http.server
import random
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from action.gate import main
from action.upload import Clock
from gate_server.db import Database, repositories, runs
from testbed.factories import make_results
from testbed.gate_helpers import create_token, start_server
from testbed.oidc_issuer import OidcIssuer

REPO = "Codertocat/Hello-World"
GITHUB_ID = 186853002


@dataclass
class Proxy:
    url: str
    bearers: list[str] = field(default_factory=list)


@contextmanager
def answer_lost_once(target: str) -> Iterator[Proxy]:
    """A proxy in front of `target` that forwards every upload but answers the first with 502,
    as a load balancer does when the server's answer comes too late."""
    found = Proxy("")
    bearers = found.bearers

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
            raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            bearers.append(self.headers.get("Authorization", ""))
            headers = {k: v for k, v in self.headers.items() if k.lower() != "host"}
            real = httpx.post(target + self.path, content=raw, headers=headers, timeout=30)
            status, content = real.status_code, real.content
            if len(bearers) == 1:
                status, content = 502, b"upstream timed out"
            self.send_response(status)
            self.send_header("Content-Type", real.headers.get("content-type", "text/plain"))
            self.send_header("Content-Length", str(len(content)))
            self.end_headers()
            self.wfile.write(content)

        def log_message(self, *args: object) -> None:
            pass

    proxy = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=proxy.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    found.url = f"http://127.0.0.1:{proxy.server_address[1]}"
    try:
        yield found
    finally:
        proxy.shutdown()
        proxy.server_close()


@pytest.fixture
def issuer() -> Iterator[OidcIssuer]:
    server = OidcIssuer()
    yield server
    server.close()


def test_a_retried_oidc_upload_uses_a_fresh_token_and_is_stored_once(
    database_url: str,
    issuer: OidcIssuer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    create_token(database_url, workspace="octo", repository=REPO, branches=("master",))
    storage = Database(database_url)
    try:
        with storage.write() as conn:
            assert repositories.bind_github_id(conn, GITHUB_ID, REPO)
    finally:
        storage.close()
    server = start_server(
        database_url,
        tmp_path,
        env={"RNX_OIDC_ISSUER": issuer.url, "RNX_OIDC_AUDIENCE": "kernalin"},
    )
    monkeypatch.chdir(tmp_path)
    results = tmp_path / "results.json"
    results.write_text(make_results(repository=REPO, branch="master").to_json())
    slept: list[float] = []
    clock = Clock(
        monotonic=lambda: time.monotonic() + sum(slept),
        sleep=slept.append,
        rng=random.Random(1),
    )
    env = {
        "ACTIONS_ID_TOKEN_REQUEST_URL": f"{issuer.url}/actions-token",
        "ACTIONS_ID_TOKEN_REQUEST_TOKEN": issuer.request_token,
        "GITHUB_REPOSITORY": REPO,
        "GITHUB_EVENT_NAME": "push",
        "GITHUB_OUTPUT": str(tmp_path / "output"),
        "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md"),
    }
    argv = ["--from-results", str(results), "--branch", "master", "--sha", "a" * 40]
    try:
        with answer_lost_once(server.url) as proxy:
            assert main(argv, env={**env, "KERNALIN_URL": proxy.url}, clock=clock) == 0
        log = capsys.readouterr().out
    finally:
        server.stop()
    assert "did not reach the gate server" not in log, log
    seen = proxy.bearers
    assert len(seen) == 2, seen
    assert seen[0] != seen[1], "the retry resent the spent OIDC token"
    assert "run-url<<" in (tmp_path / "output").read_text()
    storage = Database(database_url)
    try:
        with storage.read() as conn:
            assert runs.count(conn) == 1
    finally:
        storage.close()
