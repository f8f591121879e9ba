"""Named tokens and viewer tokens that may act (--can-act), through the API and the
dashboard's CSRF-protected forms, on SQLite and PostgreSQL: who may acknowledge a change point
or accept a run, and that the audit log, the change point and the accept name the token."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from starlette.testclient import TestClient

from gate_server.db import audit, open_database
from gate_server.errors import InvalidInput
from gate_server.settings import ServerSettings
from testbed.factories import body, make_results
from testbed.gate_helpers import (
    Token,
    app_without_worker,
    create_token,
    run_due_jobs,
    signed_headers,
)
from tests.dashboard.test_access import csrf_from, login
from tests.gate_server.domain.test_change_points import _stepped


@pytest.fixture
def app(database_url: str) -> Iterator[TestClient]:
    """The app in-process as a browser reaches it (no redirects followed); its worker is
    stopped, so the test runs the change-point jobs itself."""
    settings = ServerSettings(
        database_url=database_url, public_url="http://gate.test", outbox_poll_ms=60_000
    )
    with app_without_worker(settings, follow_redirects=False) as c:
        yield c


def _audit(database_url: str, subject: str) -> list[dict[str, Any]]:
    database = open_database(database_url)
    try:
        with database.read() as conn:
            return audit.entries(conn, subject)
    finally:
        database.close()


def _pr_run(app: TestClient, ci: Token) -> str:
    data = body(
        make_results(event="pull_request", pr_number=7, branch="feature", base_branch="main")
    )
    r = app.post("/api/v1/runs", content=data, headers=signed_headers(ci.secret, data))
    assert r.status_code == 201, r.text
    return str(r.json()["run_id"])


def _bearer(token: Token) -> dict[str, str]:
    return {"Authorization": f"Bearer {token.secret}"}


def test_an_acting_viewer_acknowledges_on_its_branches_by_its_name(
    app: TestClient, database_url: str
) -> None:
    _, found = _stepped(app, database_url)  # a change point on main of acme/kernels
    url = f"/api/v1/change-points/{found['id']}/acknowledge"
    alice = create_token(database_url, viewer=True, can_act=True, branches=("main",), name="alice")
    refused = [
        (create_token(database_url, viewer=True, name="reader"), 403, "viewer_token"),
        (
            create_token(database_url, viewer=True, can_act=True, branches=("release/*",)),
            403,
            "branch_out_of_scope",
        ),
        (
            create_token(
                database_url, workspace="other", viewer=True, can_act=True, branches=("main",)
            ),
            404,
            "change_point_not_found",
        ),
    ]
    for token, status, code in refused:
        r = app.post(url, json={"note": "x"}, headers=_bearer(token))
        assert (r.status_code, r.json()["error"]["code"]) == (status, code), r.text
    r = app.post(url, json={"note": "the new allocator"}, headers=_bearer(alice))
    assert r.status_code == 200, r.text
    assert r.json()["acknowledged_by"] == f"token:{alice.id} (alice)"
    [logged] = _audit(database_url, f"change_point:{found['id']}")
    assert (logged["actor"], logged["token_id"]) == (f"token:{alice.id} (alice)", alice.id)


def test_an_acting_viewer_accepts_a_run_and_a_named_ci_token_is_named(
    app: TestClient, database_url: str
) -> None:
    ci = create_token(database_url, name="release-bot")
    run_id = _pr_run(app, ci)
    url = f"/api/v1/runs/{run_id}/accept"
    reader = create_token(database_url, viewer=True)
    r = app.post(url, json={"reason": "x"}, headers=_bearer(reader))
    assert (r.status_code, r.json()["error"]["code"]) == (403, "viewer_token")
    bob = create_token(database_url, viewer=True, can_act=True, branches=("main",), name="bob")
    r = app.post(url, json={"reason": "new tiling, expected"}, headers=_bearer(bob))
    assert r.status_code == 200, r.text
    assert r.json()["accepted_by"] == f"token:{bob.id} (bob)"
    [upload] = [e for e in _audit(database_url, f"run:{run_id}") if e["action"] == "run.upload"]
    assert upload["actor"] == f"token:{ci.id} (release-bot)"


def test_dashboard_forms_act_only_for_acting_viewers_with_the_csrf_token(
    app: TestClient, database_url: str
) -> None:
    history, found = _stepped(app, database_url)
    run_id = _pr_run(app, history.token)
    reader = create_token(database_url, viewer=True)
    assert login(app, reader.secret)[0] == 303
    page = app.get("/")
    assert page.status_code == 200 and "/acknowledge" not in page.text
    assert f"/runs/{run_id}/accept" not in app.get(f"/runs/{run_id}").text
    r = app.post(
        f"/runs/{run_id}/accept",
        data={"csrf": csrf_from(page.text), "reason": "x"},
        headers={"Origin": "http://testserver"},
    )
    assert r.status_code == 403 and "only reads" in r.text

    carol = create_token(database_url, viewer=True, can_act=True, branches=("main",), name="carol")
    assert login(app, carol.secret)[0] == 303
    page = app.get("/")
    action = f"/change-points/{found['id']}/acknowledge"
    assert action in page.text
    csrf = csrf_from(page.text)
    origin = {"Origin": "http://testserver"}
    for data, headers in [
        ({"note": "x"}, origin),  # no CSRF token
        ({"note": "x", "csrf": "forged"}, origin),
        ({"note": "x", "csrf": csrf}, {"Origin": "https://evil.example"}),
    ]:
        r = app.post(action, data=data, headers=headers)
        assert r.status_code == 403 and "another site" in r.text, data
    assert history.change_points()[0]["status"] == "open"
    r = app.post(action, data={"note": "  ", "csrf": csrf}, headers=origin)
    assert r.status_code == 422 and "1 to 2000 characters" in r.text
    r = app.post(action, data={"note": "known: new allocator", "csrf": csrf}, headers=origin)
    assert (r.status_code, r.headers["location"]) == (303, "/")
    [acknowledged] = history.change_points()
    assert acknowledged["acknowledged_by"] == f"token:{carol.id} (carol)"
    assert "/acknowledge" not in app.get("/").text  # no longer open

    run_page = app.get(f"/runs/{run_id}")
    assert f'action="/runs/{run_id}/accept"' in run_page.text
    accept = f"/runs/{run_id}/accept"
    r = app.post(accept, data={"reason": "ok\u202eevil", "csrf": csrf}, headers=origin)
    assert r.status_code == 422 and "U+202E" in r.text
    r = app.post(accept, data={"reason": "new tiling", "csrf": csrf}, headers=origin)
    assert (r.status_code, r.headers["location"]) == (303, f"/runs/{run_id}")
    shown = app.get(f"/runs/{run_id}").text
    assert f"token:{carol.id} (carol) (dashboard)" in shown
    [accepted] = [e for e in _audit(database_url, f"run:{run_id}") if e["action"] == "run.accept"]
    assert (accepted["actor"], accepted["details"]["via"]) == (
        f"token:{carol.id} (carol)",
        "dashboard",
    )
    run_due_jobs(app)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"viewer": True, "can_act": True, "branches": ()}, "needs --branches"),
        ({"viewer": False, "can_act": True}, "--can-act is for viewer tokens"),
        ({"viewer": True, "branches": ("main",)}, "add --can-act"),
        ({"name": "a(b)"}, "--name"),
        ({"name": "x" * 65}, "--name"),
        ({"name": "al\u202eice"}, "--name"),
    ],
)
def test_token_names_and_acting_are_checked(
    database_url: str, kwargs: dict[str, Any], message: str
) -> None:
    from gate_server.domain.auth import issue_token

    database = open_database(database_url)
    try:
        base: dict[str, Any] = {
            "workspace": "acme",
            "repository": None if kwargs.get("viewer") else "acme/kernels",
            "branches": ("main",),
            "viewer": False,
            "actor": "test",
        }
        with pytest.raises(InvalidInput, match=message.replace("(", r"\(")):
            issue_token(database, **{**base, **kwargs})
    finally:
        database.close()
