"""Smaller holes of issue 11 (section 4), each shown on both databases: a guard a document could
talk its way around, an identity taken from the body, and answers the server did not give."""

from __future__ import annotations

import json
from typing import Any

import pytest
from starlette.testclient import TestClient

from testbed.factories import body, make_results
from testbed.gate_helpers import Token, signed_headers


def _push(client: TestClient, token: Token, **kwargs: Any) -> dict[str, Any]:
    raw = body(make_results(branch="main", **kwargs))
    r = client.post("/api/v1/runs", content=raw, headers=signed_headers(token.secret, raw))
    assert r.status_code == 201, r.text[:300]
    answer: dict[str, Any] = r.json()
    return answer


@pytest.mark.parametrize("base_branch", ["does-not-exist", "release/9", "main"])
def test_a_blocking_push_never_becomes_a_baseline_whatever_its_base_branch(
    client: TestClient, ci_token: Any, base_branch: str
) -> None:
    """A push to a baseline branch is compared with that branch's own baselines: naming a base
    branch without any used to make a 2x slower push a WARN, and the new baseline."""
    token = ci_token(branches=("main", "release/*"))
    first = _push(client, token, seed=1)
    assert first["is_baseline"]
    slow = _push(client, token, seed=2, slowdown=2.0, base_branch=base_branch)
    assert slow["tier"] == "BLOCK" and not slow["is_baseline"], (slow["tier"], slow["reasons"])
    assert slow["baseline"]["branch"] == "main"
    assert slow["baseline"]["run_ids"] == [first["run_id"]]
    # The baseline is still the first run: a normal push is compared with it, and passes.
    again = _push(client, token, seed=3)
    assert again["tier"] == "PASS" and again["baseline"]["run_ids"][0] == first["run_id"]


def test_a_pull_request_is_still_compared_with_its_base_branch(
    client: TestClient, ci_token: Any
) -> None:
    token = ci_token(branches=("main",))
    first = _push(client, token, seed=1)
    raw = body(make_results(branch="feature/x", pr_number=4, base_branch="main", seed=2))
    r = client.post("/api/v1/runs", content=raw, headers=signed_headers(token.secret, raw))
    assert r.status_code == 201 and r.json()["baseline"]["run_ids"] == [first["run_id"]]
    assert json.loads(r.text)["is_baseline"] is False


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)  # no database is touched
@pytest.mark.timeout(300)
def test_unsigned_webhook_bodies_keep_the_servers_memory_flat(
    database_url: str, server_factory: Any
) -> None:
    """8 concurrent 24 MiB deliveries with a wrong signature: at most MAX_UNVERIFIED_READS are
    read at once, so the server's peak grows by a few bodies, not by 8 (before the bound it grew
    by 200-270 MiB: benchmarks/server/webhook_memory.py measures both side by side)."""
    from testbed.webhook_flood import SECRET, flood, memory_mib

    server = server_factory(database_url, env={"RNX_GITHUB_WEBHOOK_SECRET": SECRET})
    before = memory_mib(server.process.pid, "VmRSS")
    assert flood(server, 8, 24) == [401] * 8
    growth = memory_mib(server.process.pid, "VmHWM") - before
    assert growth < 5 * 24, f"the server grew by {growth:.0f} MiB reading 8 unsigned bodies"


@pytest.mark.parametrize("size", [70_000, 900_000])
def test_oversized_headers_get_431_not_a_reset(shared_server: Any, size: int) -> None:
    """h11 used to drop such a connection without an answer (a reset, read by the action as
    an outage); now `rnx serve` reads headers up to 1 MiB and answers 431."""
    import httpx

    live_server = shared_server  # it reads nothing stored: the shared server will do

    # httpx's 5 s default timeout is short on a loaded machine: a minute, not a speed claim.
    r = httpx.get(f"{live_server.url}/api/v1/runs/x", headers={"X-Big": "a" * size}, timeout=60)
    assert r.status_code == 431, r.text[:200]
    assert r.json()["error"]["code"] == "headers_too_large"
    assert httpx.get(f"{live_server.url}/healthz", timeout=60).status_code == 200


def test_the_openapi_head_sha_pattern_is_what_the_code_checks(
    client: TestClient, ci_token: Any
) -> None:
    """The document gave head_sha no pattern, so a schema-valid value got 422."""
    import re

    document = client.get("/openapi.json").json()
    parameters = document["paths"]["/api/v1/pulls/{pr_number}/runs"]["get"]["parameters"]
    (parameter,) = [p for p in parameters if p["name"] == "head_sha"]
    pattern = re.compile(parameter["schema"]["pattern"])
    auth = {"Authorization": f"Bearer {ci_token().secret}"}
    for value in ["abc1234", "A" * 40, "0" * 64, "abc", "g" * 40, "0" * 65, "abc 123"]:
        r = client.get(f"/api/v1/pulls/5/runs?head_sha={value}", headers=auth)
        assert (r.status_code == 200) == bool(pattern.match(value)), (value, r.status_code)


@pytest.mark.parametrize("public_url", [None, "https://gate.example"])
def test_the_host_header_decides_nothing_stored_or_signed(
    database_url: str, ci_token: Any, public_url: str | None
) -> None:
    """Without RNX_PUBLIC_URL the stored run link is relative and the receipt's issuer fixed;
    the answer's link uses the URL the client reached (loopback keeps working)."""
    import jwt

    from gate_server.asgi import create_app
    from gate_server.db import Database, runs
    from gate_server.settings import ServerSettings

    token = ci_token()
    settings = ServerSettings(database_url=database_url, public_url=public_url)
    raw = body(make_results(seed=1))
    with TestClient(create_app(settings), base_url="http://evil.example") as c:
        headers = {**signed_headers(token.secret, raw), "Host": "evil.example"}
        r = c.post("/api/v1/runs", content=raw, headers=headers)
        assert r.status_code == 201, r.text[:300]
        answer = r.json()
        again = c.post("/api/v1/runs", content=raw, headers={**headers, "Host": "other.example"})
        view = c.get(
            f"/api/v1/runs/{answer['run_id']}",
            headers={"Authorization": f"Bearer {token.secret}"},
        ).json()
    claims = jwt.decode(answer["receipt"], options={"verify_signature": False})
    database = Database(database_url)
    try:
        with database.read() as conn:
            stored = runs.by_run_id(conn, answer["run_id"])
    finally:
        database.close()
    assert stored is not None
    path = f"/runs/{answer['run_id']}"
    if public_url is None:
        assert stored.answer["url"] == path
        assert claims["iss"] == "rnx-gate-server"
        assert answer["url"] == f"http://evil.example{path}"  # the client's own Host, to it
        assert again.json()["url"] == f"http://other.example{path}"
    else:
        assert stored.answer["url"] == answer["url"] == f"{public_url}{path}"
        assert again.json()["url"] == view["url"] == answer["url"]
        assert claims["iss"] == public_url


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)  # a SQLite setting
def test_sqlite_syncs_every_commit(storage: Any) -> None:
    """WAL with synchronous=NORMAL could lose the last acknowledged uploads on a power loss;
    every connection the server opens runs FULL (2). benchmarks/server/server_load.py --synchronous
    measures the cost."""
    with storage.write() as conn:
        assert conn.exec_driver_sql("PRAGMA synchronous").scalar() == 2
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
    with storage.read() as conn:
        assert conn.exec_driver_sql("PRAGMA synchronous").scalar() == 2
