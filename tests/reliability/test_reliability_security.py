"""Security review, as tests: no secret in logs or pages, replayed uploads, CSRF on the
dashboard's forms, its security headers, and a database outage answered as one (503)."""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Iterator

import pytest
from sqlalchemy.exc import OperationalError
from starlette.testclient import TestClient

from gate_server.asgi import create_app
from gate_server.db import Database, runs
from gate_server.db import audit as audit_log
from gate_server.settings import ServerSettings
from testbed.factories import body, make_results
from testbed.gate_helpers import create_token, signed_headers

REPO = "acme/kernels"


@pytest.fixture
def app_client(database_url: str) -> Iterator[TestClient]:
    settings = ServerSettings(database_url=database_url, public_url="http://testserver")
    with TestClient(create_app(settings)) as c:
        yield c


def _login(client: TestClient, secret: str) -> TestClient:
    form = client.get("/login")
    csrf = re.search(r'name="csrf" value="([^"]+)"', form.text)
    assert csrf, form.text[:500]
    r = client.post(
        "/login",
        data={"csrf": csrf.group(1), "next": "/", "token": secret},
        headers={"Origin": "http://testserver"},
        follow_redirects=False,
    )
    assert r.status_code == 303, r.text[:300]
    return client


def test_no_secret_in_logs_answers_or_pages(
    app_client: TestClient, database_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    ci = create_token(database_url).secret
    viewer = create_token(database_url, viewer=True).secret
    doc = make_results(repository=REPO)
    raw = body(doc)
    headers = signed_headers(ci, raw)
    signature = headers["X-Kernalin-Signature"]
    seen: list[str] = []
    seen.append(app_client.post("/api/v1/runs", content=raw, headers=headers).text)
    # Refusals: a near-miss token, a wrong signature, a viewer uploading, a CI token browsing.
    seen.append(
        app_client.post("/api/v1/runs", content=raw, headers=signed_headers(ci + "x", raw)).text
    )
    bad = {**signed_headers(ci, raw), "X-Kernalin-Signature": "sha256=" + "0" * 64}
    seen.append(app_client.post("/api/v1/runs", content=raw, headers=bad).text)
    seen.append(
        app_client.post("/api/v1/runs", content=raw, headers=signed_headers(viewer, raw)).text
    )
    seen.append(app_client.get("/", headers={"Authorization": f"Bearer {ci}"}).text)
    seen.append(
        app_client.get(f"/api/v1/runs/{doc.run_id}", headers={"Authorization": f"Bearer {ci}"}).text
    )
    # A wrong token pasted into the sign-in form, then the right one.
    form = app_client.get("/login")
    csrf = re.search(r'name="csrf" value="([^"]+)"', form.text)
    assert csrf
    seen.append(
        app_client.post(
            "/login",
            data={"csrf": csrf.group(1), "next": "/", "token": viewer + "x"},
            headers={"Origin": "http://testserver"},
        ).text
    )
    _login(app_client, viewer)
    for page in ("/", f"/repos/{REPO}", f"/runs/{doc.run_id}", "/audit"):
        r = app_client.get(page)
        assert r.status_code == 200, page
        seen.append(r.text)
    storage = Database(database_url)
    try:
        with storage.read() as conn:
            audit = str(audit_log.entries(conn))
    finally:
        storage.close()
    logs = "\n".join(f"{r.getMessage()} {r.exc_text or ''}" for r in caplog.records)
    for secret in (ci, viewer, ci[7:], viewer[9:], signature[7:]):
        for where, text in (("logs", logs), ("audit log", audit), *(("page", s) for s in seen)):
            assert secret not in text, f"a secret ({secret[:12]}...) appears in the {where}"
    assert "PRIVATE KEY" not in logs + audit + "".join(seen)


def test_a_replayed_upload_gets_the_stored_answer_and_nothing_more(
    app_client: TestClient, database_url: str
) -> None:
    ci = create_token(database_url).secret
    raw = body(make_results(repository=REPO))
    headers = signed_headers(ci, raw)
    first = app_client.post("/api/v1/runs", content=raw, headers=headers)
    replay = app_client.post("/api/v1/runs", content=raw, headers=headers)
    assert first.status_code == 201 and replay.status_code == 200
    assert replay.json() == first.json()
    # The captured signature does not carry over to other bytes, nor past 5 minutes.
    other = body(make_results(repository=REPO, seed=9, slowdown=0.5))
    forged = app_client.post("/api/v1/runs", content=other, headers=headers)
    assert forged.status_code == 401 and forged.json()["error"]["code"] == "bad_signature"
    stale = signed_headers(ci, other, timestamp=int(time.time()) - 301)
    late = app_client.post("/api/v1/runs", content=other, headers=stale)
    assert late.status_code == 401 and late.json()["error"]["code"] == "stale_timestamp"
    storage = Database(database_url)
    try:
        with storage.read() as conn:
            assert runs.count(conn) == 1
            actions = [
                e["action"] for e in audit_log.entries(conn) if e["action"].startswith("run.")
            ]
    finally:
        storage.close()
    assert actions == ["run.upload", "run.upload.replay"]


def test_dashboard_forms_refuse_cross_site_posts(app_client: TestClient, database_url: str) -> None:
    viewer = create_token(database_url, viewer=True).secret
    # Sign-in without the form's token, or from another origin: refused, no session cookie.
    form = app_client.get("/login")
    csrf = re.search(r'name="csrf" value="([^"]+)"', form.text)
    assert csrf
    for data, origin in (
        ({"next": "/", "token": viewer}, "http://testserver"),
        ({"csrf": "forged", "next": "/", "token": viewer}, "http://testserver"),
        ({"csrf": csrf.group(1), "next": "/", "token": viewer}, "https://evil.example"),
    ):
        r = app_client.post("/login", data=data, headers={"Origin": origin}, follow_redirects=False)
        assert r.status_code == 403 and "rnx_session" not in r.headers.get("set-cookie", "")
    # Signed in: sign-out needs the session's CSRF token and our origin.
    _login(app_client, viewer)
    for data, origin in (({}, "http://testserver"), ({"csrf": "x"}, "http://testserver")):
        r = app_client.post(
            "/logout", data=data, headers={"Origin": origin}, follow_redirects=False
        )
        assert r.status_code == 403, r.text[:200]
    page = app_client.get("/")
    assert page.status_code == 200  # still signed in
    token = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert token
    r = app_client.post(
        "/logout", data={"csrf": token.group(1)}, headers={"Origin": "https://evil.example"}
    )
    assert r.status_code == 403


@pytest.mark.parametrize("page", ["/login", "/", "/repos/acme/kernels", "/audit", "/runs/nope"])
def test_dashboard_pages_carry_the_security_headers(
    app_client: TestClient, database_url: str, page: str
) -> None:
    viewer = create_token(database_url, viewer=True).secret
    create_token(database_url)  # so acme/kernels exists
    r = app_client.get(
        page, headers={"Authorization": f"Bearer {viewer}"} if page != "/login" else {}
    )
    csp = r.headers.get("content-security-policy", "")
    assert "frame-ancestors 'none'" in csp and "default-src 'none'" in csp, (page, csp)
    assert "script-src" not in csp or "'unsafe-inline'" not in csp
    assert r.headers.get("x-content-type-options") == "nosniff"
    assert r.headers.get("x-frame-options") == "DENY"
    assert r.headers.get("cache-control") == "no-store"


@pytest.mark.parametrize(
    ("method", "path"),
    [("GET", "/healthz"), ("GET", "/openapi.json"), ("POST", "/api/v1/runs"), ("GET", "/nope")],
)
def test_json_answers_carry_nosniff_too(app_client: TestClient, method: str, path: str) -> None:
    r = app_client.request(method, path, content=b"{")
    assert r.headers.get("x-content-type-options") == "nosniff", (path, r.status_code)


def test_a_database_outage_is_a_503_with_retry_after_not_a_500(
    app_client: TestClient, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression: a PostgreSQL restart under the server answered uploads with 500s that read
    as a server bug; it is a transient outage, so 503 with Retry-After (the action retries)."""
    ci = create_token(database_url).secret
    raw = body(make_results(repository=REPO))
    storage: Database = app_client.app.state.services.database  # type: ignore[attr-defined]

    def down(*args: object, **kwargs: object) -> object:
        raise OperationalError("SELECT 1", {}, ConnectionRefusedError("connection refused"))

    monkeypatch.setattr(storage, "read", down)
    monkeypatch.setattr(storage, "write", down)
    r = app_client.post("/api/v1/runs", content=raw, headers=signed_headers(ci, raw))
    assert r.status_code == 503, r.text
    assert r.headers["retry-after"] == "2"
    assert r.json()["error"]["code"] == "database_unavailable"
