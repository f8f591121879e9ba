"""Databases written by older servers open with today's code on both engines: one written before
gate_server/db/ (schema version 3), and one written before baselines were kept per workload
(version 4). Each migrates, keeps its data, and ends with a fresh database's layout."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, insert, inspect, select
from starlette.testclient import TestClient

from gate_server.asgi import create_app
from gate_server.dashboard.state import SESSION_KEY_NAME
from gate_server.db import LATEST_VERSION, open_database, tokens
from gate_server.db.migrations import schema_version
from gate_server.db.schema import runs as runs_table
from gate_server.domain.auth import hash_token
from gate_server.domain.receipts import KEY_NAME, ReceiptSigner, generate_private_key_pem
from gate_server.domain.server_keys import stored_key
from gate_server.settings import ServerSettings
from gate_server.workloads import UNKNOWN_WORKLOAD
from testbed import schema_v3 as v3
from testbed import schema_v4 as v4
from testbed.factories import body, make_results
from testbed.gate_helpers import fresh_postgres_schema, signed_headers


@pytest.fixture
def database_url(empty_database_url: str) -> str:
    """Every database here starts empty: the migrations are what these tests are about."""
    return empty_database_url


WHEN = datetime(2026, 3, 1, tzinfo=timezone.utc)
SECRET = "rnx_ci_" + "s" * 43
SESSION_KEY = "ab" * 32


def _fill(url: str) -> dict[str, Any]:
    """A version-3 database holding one of everything, as the old server wrote them."""
    v3.build_v3_database(url)
    receipt_pem = generate_private_key_pem()
    baseline = make_results(branch="master", sha="a" * 40, seed=1)
    data = body(baseline)
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            # The CI token's branches were widened by the rename below.
            v3.add_repository(
                conn, WHEN, token_hash=hash_token(SECRET), branches=["master", "main"]
            )
            answer = {"run_id": str(baseline.run_id), "tier": "WARN", "reasons": []}
            conn.execute(
                insert(v3.runs).values(
                    run_id=str(baseline.run_id),
                    workspace_id=1,
                    repository_id=1,
                    token_id=1,
                    sha=baseline.git.sha,
                    branch="master",
                    event="push",
                    environment_key=baseline.environment.key,
                    tier="WARN",
                    answer=json.dumps(answer),
                    document=data,
                    body_sha256=hashlib.sha256(data).hexdigest(),
                    signature="sha256=old",
                    created_at=WHEN,
                    received_at=WHEN,
                    baseline_branch="main",  # moved by the rename below
                    baseline_at=WHEN,
                )
            )
            conn.execute(
                insert(v3.branch_renames).values(
                    repository_id=1,
                    from_branch="master",
                    to_branch="main",
                    renamed_at=WHEN,
                    actor="cli:admin",
                    via="cli",
                )
            )
            for name, secret in ((KEY_NAME, receipt_pem), (SESSION_KEY_NAME, SESSION_KEY)):
                conn.execute(
                    insert(v3.server_keys).values(
                        name=name, private_key_pem=secret, created_at=WHEN
                    )
                )
    finally:
        engine.dispose()
    return {"baseline": str(baseline.run_id), "receipt_pem": receipt_pem}


def test_a_version_3_database_opens_and_keeps_its_data(database_url: str) -> None:
    old = _fill(database_url)
    settings = ServerSettings(database_url=database_url, public_url="http://gate.test")
    with TestClient(create_app(settings)) as client:
        # The receipt key written as server_keys.private_key_pem still signs.
        key = client.get("/api/v1/receipt-key").json()
        assert key["public_key_pem"] == ReceiptSigner(old["receipt_pem"]).public_key_pem
        # The token, the stored baseline and the rename log all still count: a job that still
        # names master is compared with the baseline that the rename moved to main.
        doc = make_results(branch="master", sha="b" * 40, seed=2)
        r = client.post(
            "/api/v1/runs", content=body(doc), headers=signed_headers(SECRET, body(doc))
        )
        assert r.status_code == 201, r.text
        assert r.json()["baseline"]["run_ids"] == [old["baseline"]]
        assert r.json()["baseline"]["branch"] == "main" and r.json()["is_baseline"]
    database = open_database(database_url)
    try:
        assert schema_version(database) == LATEST_VERSION
        # The dashboard's HMAC key, kept in the same column, is kept too (not made anew).
        assert stored_key(database, SESSION_KEY_NAME, lambda: "new") == SESSION_KEY
        # Migration 9: the old token is unnamed and, like every token before it, cannot act.
        with database.read() as conn:
            token = tokens.by_hash(conn, hash_token(SECRET))
        assert token is not None and (token.name, token.can_act) == (None, False)
    finally:
        database.close()


def _layout(url: str) -> dict[str, Any]:
    engine = create_engine(url)
    try:
        found = inspect(engine)
        return {
            table: {
                "columns": [
                    (c["name"], str(c["type"]), c["nullable"]) for c in found.get_columns(table)
                ],
                "primary_key": found.get_pk_constraint(table)["constrained_columns"],
                "indexes": sorted(
                    (i["name"], tuple(i["column_names"]), bool(i["unique"]))
                    for i in found.get_indexes(table)
                ),
                "unique": sorted(
                    (u["name"] or "", tuple(u["column_names"]))
                    for u in found.get_unique_constraints(table)
                ),
                "foreign_keys": sorted(
                    (tuple(f["constrained_columns"]), f["referred_table"])
                    for f in found.get_foreign_keys(table)
                ),
            }
            for table in sorted(found.get_table_names())
        }
    finally:
        engine.dispose()


@pytest.fixture
def twin_url(database_url: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[str]:
    """A second empty database on the same engine as `database_url`."""
    if database_url.startswith("sqlite"):
        yield f"sqlite:///{tmp_path / 'twin.db'}"
        return
    url, drop = fresh_postgres_schema(request.getfixturevalue("postgres_url"))
    try:
        yield url
    finally:
        drop()


@pytest.mark.parametrize(
    "build", [v3.build_v3_database, v4.build_v4_database], ids=["version-3", "version-4"]
)
def test_an_upgraded_database_has_the_layout_of_a_fresh_one(
    database_url: str, twin_url: str, build: Any
) -> None:
    build(database_url)
    open_database(database_url).close()
    open_database(twin_url).close()
    upgraded, fresh = _layout(database_url), _layout(twin_url)
    assert upgraded == fresh
    key_columns = [name for name, _, _ in fresh["server_keys"]["columns"]]
    assert key_columns == ["name", "secret", "created_at"]


# ---- version 4: runs of two workloads, and documents migration 5 cannot use


def _v4_run(conn: Any, n: int, data: bytes, *, run_id: str, sha: str) -> None:
    """A push to main that version 4 stored as a baseline of main, n minutes after WHEN."""
    when = WHEN.replace(minute=n)
    conn.execute(
        insert(v4.runs).values(
            run_id=run_id,
            workspace_id=1,
            repository_id=1,
            token_id=1,
            sha=sha,
            branch="main",
            event="push",
            environment_key="linux-x86_64-cpu-test",
            tier="PASS",
            answer=json.dumps({"run_id": run_id, "tier": "PASS", "reasons": []}),
            document=data,
            body_sha256=hashlib.sha256(data).hexdigest(),
            signature="sha256=old",
            created_at=when,
            received_at=when,
            baseline_branch="main",
            baseline_at=when,
        )
    )


def _fill_v4(url: str) -> dict[str, str]:
    """kernels/attention.py (uploaded as ./kernels/attention.py), then kernels/other.py twice as
    slow, both baselines of main, as version 4 stored them; then two newer baselines whose
    documents migration 5 cannot use: bytes that are no JSON, and an absolute workload path."""
    v4.build_v4_database(url)
    attention = make_results(workload="./kernels/attention.py", sha="a" * 40, seed=1)
    other = make_results(workload="kernels/other.py", sha="b" * 40, seed=2, slowdown=2.0)
    absolute = make_results(workload="/home/runner/kernels/attention.py", sha="d" * 40, seed=5)
    unreadable = "00000000-0000-4000-8000-00000000000c"
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            v3.add_repository(conn, WHEN, token_hash=hash_token(SECRET), prefix=SECRET[:11])
            _v4_run(conn, 1, body(attention), run_id=str(attention.run_id), sha="a" * 40)
            _v4_run(conn, 2, body(other), run_id=str(other.run_id), sha="b" * 40)
            _v4_run(conn, 3, b"\x00 not a document", run_id=unreadable, sha="c" * 40)
            _v4_run(conn, 4, body(absolute), run_id=str(absolute.run_id), sha="d" * 40)
    finally:
        engine.dispose()
    return {
        "attention": str(attention.run_id),
        "other": str(other.run_id),
        "unreadable": unreadable,
        "absolute": str(absolute.run_id),
    }


def test_a_version_4_database_gives_each_workload_its_own_baseline(database_url: str) -> None:
    old = _fill_v4(database_url)
    settings = ServerSettings(database_url=database_url, public_url="http://gate.test")
    with TestClient(create_app(settings)) as client:
        for workload, key, slowdown in (
            ("kernels/attention.py", "attention", 1.0),
            ("kernels/other.py", "other", 2.0),
        ):
            doc = make_results(
                event="pull_request",
                pr_number=1,
                branch="f",
                seed=7,
                workload=workload,
                slowdown=slowdown,
            )
            r = client.post(
                "/api/v1/runs", content=body(doc), headers=signed_headers(SECRET, body(doc))
            )
            assert r.status_code == 201, r.text
            # Only its own workload's baseline; never the newer runs migration 5 could not use.
            assert r.json()["baseline"]["run_ids"] == [old[key]], workload
            assert r.json()["baseline"]["workload"] == workload
            assert r.json()["tier"] == "PASS", r.json()["reasons"]
    database = open_database(database_url)
    try:
        assert schema_version(database) == LATEST_VERSION
        with database.read() as conn:
            found = dict(conn.execute(select(runs_table.c.run_id, runs_table.c.workload)).all())
    finally:
        database.close()
    assert found[old["attention"]] == "kernels/attention.py"
    assert found[old["other"]] == "kernels/other.py"
    assert found[old["unreadable"]] == found[old["absolute"]] == UNKNOWN_WORKLOAD
