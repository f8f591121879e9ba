"""Values a database cannot hold or read back: each is a 4xx (or an ignored webhook delivery)
on both databases, stores nothing, and the next normal upload still gets its verdict.

Every case here answered 500 on PostgreSQL before (issue 11, section 3); a created_at far in
the past or future was stored and then broke every later read of its repository.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import text
from starlette.testclient import TestClient

from gate_server.asgi import create_app
from gate_server.db import Database, runs
from gate_server.http.webhook import WEBHOOK_PATH
from gate_server.settings import ServerSettings
from testbed.factories import body, make_results
from testbed.gate_helpers import Token, create_token, signed_headers, webhook_headers

WEBHOOK_SECRET = "s3cret"


@pytest.fixture
def gate(database_url: str) -> Iterator[tuple[TestClient, Token]]:
    settings = ServerSettings(
        database_url=database_url,
        public_url="http://gate.test",
        github_webhook_secret=WEBHOOK_SECRET,
    )
    token = create_token(database_url, branches=("main",))
    with TestClient(create_app(settings)) as c:
        yield c, token


def _upload(client: TestClient, secret: str, doc: dict[str, Any]) -> Any:
    raw = json.dumps(doc).encode()
    return client.post("/api/v1/runs", content=raw, headers=signed_headers(secret, raw))


def _stored(database_url: str) -> int:
    database = Database(database_url)
    try:
        with database.read() as conn:
            return runs.count(conn)
    finally:
        database.close()


def _still_gates(client: TestClient, secret: str, seed: int) -> None:
    """A normal push gets its verdict, and one after it is compared with it."""
    first = _upload(client, secret, json.loads(body(make_results(seed=seed))))
    assert first.status_code == 201, first.text[:300]
    second = _upload(client, secret, json.loads(body(make_results(seed=seed + 1))))
    assert second.status_code == 201, second.text[:300]
    assert second.json()["tier"] == "PASS", second.json()["reasons"]
    assert second.json()["baseline"]["run_ids"] == [first.json()["run_id"]]


def _pr_doc(**git: Any) -> dict[str, Any]:
    doc = json.loads(body(make_results(branch="feature/x", pr_number=7, seed=3)))
    doc["git"].update(git)
    return doc


@pytest.mark.parametrize(
    "field, value, says",
    [
        ("created_at", "0001-01-01T00:00:00+14:00", "before 2000-01-01"),
        ("created_at", "9999-12-31T23:59:59-14:00", "in the future"),
        ("created_at", "1999-12-31T23:59:59Z", "before 2000-01-01"),
        ("created_at", "2999-01-01T00:00:00Z", "in the future"),
        ("git.pr_number", 2**31, "less than or equal to 2147483647"),
        ("git.pr_number", 2**63, "less than or equal to 2147483647"),
        ("git.pr_number", 2**64 + 1, "less than or equal to 2147483647"),
    ],
)
def test_values_a_database_cannot_keep_are_422_and_store_nothing(
    gate: tuple[TestClient, Token], database_url: str, field: str, value: Any, says: str
) -> None:
    client, token = gate
    doc = _pr_doc()
    target, _, key = field.rpartition(".")
    (doc[target] if target else doc)[key] = value
    r = _upload(client, token.secret, doc)
    assert r.status_code == 422, (r.status_code, r.text[:300])
    error = r.json()["error"]
    assert error["code"] == "invalid_document"
    assert error["details"][0]["field"] == field
    assert says in error["message"], error["message"]
    assert _stored(database_url) == 0
    _still_gates(client, token.secret, seed=10)


def test_created_at_is_stored_in_utc(gate: tuple[TestClient, Token], database_url: str) -> None:
    client, token = gate
    doc = json.loads(body(make_results(seed=1)))
    doc["created_at"] = "2026-01-01T23:30:00-14:00"  # 2026-01-02 13:30 UTC
    assert _upload(client, token.secret, doc).status_code == 201
    database = Database(database_url)
    try:
        with database.read() as conn:
            stored = runs.by_run_id(conn, doc["run_id"])
    finally:
        database.close()
    assert stored is not None
    assert stored.created_at.utcoffset() is not None
    assert stored.created_at.isoformat().startswith("2026-01-02T13:30:00"), stored.created_at


@pytest.mark.parametrize("stamp", ["0001-01-01 00:00:00+14", "10000-01-01 00:00:00+00"])
def test_a_stored_timestamp_python_cannot_hold_breaks_no_later_read(
    postgres_database: str, stamp: str
) -> None:
    """Rows stored before uploads were bounded (PostgreSQL keeps years 4713 BC to 294276 AD):
    the run page, the overview, the history page and later uploads still answer. SQLite is
    not at risk: the server never stored such a value there, and reads are the same code."""
    settings = ServerSettings(database_url=postgres_database, public_url="http://gate.test")
    token = create_token(postgres_database, branches=("main",))
    viewer = create_token(postgres_database, viewer=True)
    with TestClient(create_app(settings)) as client:
        first = _upload(client, token.secret, json.loads(body(make_results(seed=1))))
        run_id = first.json()["run_id"]
        database = Database(postgres_database)
        try:
            with database.write() as conn:
                conn.execute(
                    text(
                        "UPDATE runs SET created_at = CAST(:t AS timestamptz), "
                        "received_at = CAST(:t AS timestamptz) WHERE run_id = :r"
                    ),
                    {"t": stamp, "r": run_id},
                )
        finally:
            database.close()
        auth = {"Authorization": f"Bearer {viewer.secret}"}
        for page in (f"/runs/{run_id}", "/", "/repos/acme/kernels?branch=main"):
            r = client.get(page, headers=auth)
            assert r.status_code == 200, (page, r.status_code, r.text[:300])
        api = client.get(
            f"/api/v1/runs/{run_id}", headers={"Authorization": f"Bearer {token.secret}"}
        )
        assert api.status_code == 200, api.text[:300]
        later = _upload(client, token.secret, json.loads(body(make_results(seed=2))))
        assert later.status_code == 201, later.text[:300]


@pytest.fixture
def pr_run(gate: tuple[TestClient, Token]) -> str:
    client, token = gate
    r = _upload(client, token.secret, json.loads(body(make_results(branch="f", pr_number=3))))
    assert r.status_code == 201, r.text[:300]
    return str(r.json()["run_id"])


@pytest.mark.parametrize(
    "reason",
    [
        "ok\x00then",
        "\x00",
        "bell\x07",
        "esc\x1b[31mred",
        "c1\x85next line",  # C1 control (NEL)
        "line\u2028separator",
        "paragraph\u2029separator",
        "fine \u202eevil reversed",  # right-to-left override
        "isolate \u2067x\u2069",
    ],
)
def test_control_characters_in_an_accept_reason_are_422_on_both_accept_routes(
    gate: tuple[TestClient, Token], pr_run: str, reason: str
) -> None:
    client, token = gate
    auth = {"Authorization": f"Bearer {token.secret}"}
    for path, payload in (
        (f"/api/v1/runs/{pr_run}/accept", {"reason": reason}),
        ("/api/v1/pulls/3/accept", {"reason": reason, "user": "octocat", "run_ids": [pr_run]}),
    ):
        r = client.post(path, json=payload, headers=auth)
        assert r.status_code == 422, (path, r.status_code, r.text[:300])
        assert r.json()["error"]["code"] == "unstorable_reason"
    view = client.get(f"/api/v1/runs/{pr_run}", headers=auth).json()
    assert view["accepted"] is None
    # Line breaks and tabs are text: accepted.
    ok = client.post(
        f"/api/v1/runs/{pr_run}/accept", json={"reason": "known\tcost\nof the fix"}, headers=auth
    )
    assert ok.status_code == 200, ok.text[:300]


def _deliver(client: TestClient, event: str, payload: dict[str, Any], delivery: str) -> Any:
    raw = json.dumps(payload).encode()
    return client.post(
        WEBHOOK_PATH,
        content=raw,
        headers=webhook_headers(WEBHOOK_SECRET, raw, event, delivery),
    )


@pytest.mark.parametrize(
    "event, payload",
    [
        ("e" * 65, {"action": "created"}),
        ("issue_comment", {"action": "a" * 65}),
        ("issue_comment", {"action": "created\x00"}),
        ("Issue-Comment", {"action": "created"}),
        ("issue_comment", {"action": 7}),
        (
            "issue_comment",
            {
                "action": "created",
                "comment": {"id": 1, "body": "/kernalin accept why\x00not"},
                "repository": {"id": 5, "full_name": "acme/kern\x00els"},
            },
        ),
    ],
)
def test_a_signed_delivery_that_cannot_be_stored_is_answered_and_ignored(
    gate: tuple[TestClient, Token], event: str, payload: dict[str, Any]
) -> None:
    client, _ = gate
    r = _deliver(client, event, payload, "d-odd")
    assert r.status_code == 200, (r.status_code, r.text[:300])
    assert "ignored" in r.json()
    # The webhook keeps answering: a ping afterwards is acted on.
    pong = _deliver(client, "ping", {"zen": "ok", "hook_id": 1}, "d-ping")
    assert pong.status_code == 200 and pong.json()["pong"] is True, pong.text[:300]


@pytest.mark.parametrize(
    "branch, says",
    [
        ("HEAD", "not a valid git branch name"),
        ("@", "not a valid git branch name"),
        ("-main", "not a valid git branch name"),
        ("feature/.hidden", "not a valid git branch name"),
        ("x.lock/y", "not a valid git branch name"),
        ("ma\u202ein", "look-alike"),  # right-to-left override
        ("ma\u2066in", "look-alike"),  # left-to-right isolate
        ("ma\u200bin", "look-alike"),  # zero-width space
        ("ma\ufeffin", "look-alike"),  # zero-width no-break space
        ("ma\x85in", "look-alike"),  # a C1 control
    ],
)
@pytest.mark.parametrize("field", ["git.branch"])
def test_branches_git_refuses_or_that_look_alike_are_422(
    gate: tuple[TestClient, Token], database_url: str, branch: str, says: str, field: str
) -> None:
    """git check-ref-format's rules and what `git branch` refuses, plus invisible characters,
    so the dashboard never shows two branches that read the same."""
    client, token = gate
    doc = _pr_doc(**{field.split(".")[1]: branch})
    r = _upload(client, token.secret, doc)
    assert r.status_code == 422, (r.status_code, r.text[:300])
    assert r.json()["error"]["details"][0]["field"] == field
    assert says in r.json()["error"]["message"]
    assert _stored(database_url) == 0


def test_a_look_alike_base_branch_is_422(gate: tuple[TestClient, Token], database_url: str) -> None:
    client, token = gate
    r = _upload(client, token.secret, _pr_doc(base_branch="ma\u202ein"))
    assert r.status_code == 422 and r.json()["error"]["details"][0]["field"] == "git.base_branch"
    assert _stored(database_url) == 0


@pytest.mark.parametrize(
    "path",
    [
        "/repos/acme/kernels?branch=ma%00in",
        "/repos/acme/kernels?workload=x%00y",
        "/repos/acme/kernels?environment=%00",
        "/api/v1/baselines?branch=ma%00in&environment=e&workload=w",
        "/api/v1/change-points?repository=acme/kernels&branch=%00",
        "/api/v1/runs?x%00=1",
    ],
)
def test_a_nul_character_in_a_query_is_a_400_on_every_page(
    gate: tuple[TestClient, Token], path: str
) -> None:
    # The history page and the baselines endpoint answered 500 on PostgreSQL: its text cannot
    # hold NUL, not even to compare. One check answers every route alike, before any query.
    client, token = gate
    r = client.get(path, headers={"Authorization": f"Bearer {token.secret}"})
    assert r.status_code == 400, r.text[:300]
    assert r.json()["error"]["code"] == "invalid_parameter"
    assert "NUL" in r.json()["error"]["message"]
    _still_gates(client, token.secret, seed=90)
