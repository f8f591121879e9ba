"""Who may open the dashboard, in-process on SQLite and PostgreSQL: sign-in, cookies, CSRF."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import replace
from urllib.parse import quote

import pytest
from starlette.testclient import TestClient

from gate_server.asgi import create_app
from gate_server.db import Database
from gate_server.domain.auth import revoke_token
from gate_server.settings import ServerSettings
from testbed.factories import body, make_results
from testbed.gate_helpers import Token, signed_headers

PAGES = ["/", "/repos/acme/kernels", "/audit"]


@pytest.fixture
def web(server_settings: ServerSettings) -> Iterator[TestClient]:
    """The app in-process, as a browser reaches it: no redirects followed, http://testserver."""
    with TestClient(create_app(server_settings), follow_redirects=False) as c:
        yield c


@pytest.fixture
def run_id(web: TestClient, ci_token: Callable[..., Token]) -> str:
    token = ci_token()
    data = body(make_results(n=12))
    answer = web.post("/api/v1/runs", content=data, headers=signed_headers(token.secret, data))
    assert answer.status_code == 201, answer.text
    assert answer.json()["url"] == f"http://gate.test/runs/{answer.json()['run_id']}"
    return str(answer.json()["run_id"])


def csrf_from(html: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', html)
    assert found, html
    return found.group(1)


def login(web: TestClient, secret: str, *, next_path: str = "/") -> tuple[int, str, str]:
    """(status, location, set-cookie) of a sign-in through the real form."""
    form = web.get(f"/login?next={quote(next_path, safe='')}")
    assert form.status_code == 200
    response = web.post(
        "/login",
        data={"csrf": csrf_from(form.text), "token": secret, "next": next_path},
        headers={"Origin": "http://testserver"},
    )
    return (
        response.status_code,
        response.headers.get("location", ""),
        response.headers.get("set-cookie", ""),
    )


def test_anonymous_visitors_are_sent_to_login(web: TestClient, run_id: str) -> None:
    for path in [*PAGES, f"/runs/{run_id}"]:
        response = web.get(path)
        assert response.status_code == 303, path
        assert response.headers["location"].startswith("/login?next=")
        assert response.text == ""
        assert "frame-ancestors 'none'" in response.headers["content-security-policy"]


def test_a_viewer_bearer_token_opens_every_page_with_security_headers(
    web: TestClient, run_id: str, viewer_token: Callable[..., Token]
) -> None:
    viewer = viewer_token()
    for path in [*PAGES, f"/runs/{run_id}"]:
        response = web.get(path, headers={"Authorization": f"Bearer {viewer.secret}"})
        assert response.status_code == 200, (path, response.text[:500])
        assert response.headers["content-type"].startswith("text/html")
        csp = response.headers["content-security-policy"]
        assert "default-src 'none'" in csp and "script-src" not in csp  # no script at all
        assert response.headers["x-content-type-options"] == "nosniff"
        assert response.headers["cache-control"] == "no-store"
        assert viewer.secret not in response.text and "<script" not in response.text


def test_ci_and_unknown_tokens_never_open_the_dashboard(
    web: TestClient, run_id: str, ci_token: Callable[..., Token]
) -> None:
    ci = ci_token()
    response = web.get("/", headers={"Authorization": f"Bearer {ci.secret}"})
    assert response.status_code == 403 and "CI token cannot open the dashboard" in response.text
    assert "acme/kernels" not in response.text
    response = web.get(f"/runs/{run_id}", headers={"Authorization": "Bearer rnx_view_nope"})
    assert response.status_code == 401 and run_id not in response.text
    status, _, cookie = login(web, ci.secret)
    assert status == 403 and cookie.startswith("rnx_login=")  # a fresh form, no session


def test_sign_in_sets_a_safe_cookie_and_sign_out_needs_the_form(
    web: TestClient, run_id: str, viewer_token: Callable[..., Token]
) -> None:
    viewer = viewer_token()
    status, location, cookie = login(web, viewer.secret, next_path=f"/runs/{run_id}")
    assert (status, location) == (303, f"/runs/{run_id}")
    assert cookie.startswith("rnx_session=")
    flags = cookie.lower()
    assert "httponly" in flags and "samesite=lax" in flags and "path=/" in flags
    assert "secure" not in flags  # plain http on loopback; see the https test below
    assert viewer.secret not in cookie
    assert web.get(f"/runs/{run_id}").status_code == 200

    # Sign-out is a POST with the page's CSRF token; without it, or from elsewhere, refused.
    page = web.get("/")
    assert web.post("/logout", data={"csrf": "x"}).status_code == 403
    refused = web.post(
        "/logout", data={"csrf": csrf_from(page.text)}, headers={"Origin": "https://evil.test"}
    )
    assert refused.status_code == 403
    out = web.post("/logout", data={"csrf": csrf_from(page.text)})
    assert out.status_code == 303 and 'rnx_session=""' in out.headers["set-cookie"]
    web.cookies.clear()
    assert web.get("/").status_code == 303


def test_sign_in_refuses_forged_forms_and_open_redirects(
    web: TestClient, viewer_token: Callable[..., Token]
) -> None:
    viewer = viewer_token()
    web.get("/login")
    no_csrf = web.post("/login", data={"token": viewer.secret, "csrf": "forged"})
    assert no_csrf.status_code == 403 and "set-cookie" not in no_csrf.headers
    form = web.get("/login")
    cross_site = web.post(
        "/login",
        data={"csrf": csrf_from(form.text), "token": viewer.secret},
        headers={"Origin": "https://evil.test"},
    )
    assert cross_site.status_code == 403 and "rnx_session" not in str(cross_site.headers)
    for target in ["//evil.test/x", "https://evil.test", "/\\evil.test", "/\t/evil.test"]:
        status, location, _ = login(web, viewer.secret, next_path=target)
        assert (status, location) == (303, "/"), target


def test_cookies_are_secure_over_https_or_behind_an_https_public_url(
    server_settings: ServerSettings, viewer_token: Callable[..., Token]
) -> None:
    viewer = viewer_token()
    # Behind a TLS-terminating proxy the request arrives as http; RNX_PUBLIC_URL says https.
    behind_proxy = replace(server_settings, public_url="https://gate.example.com")
    with TestClient(create_app(behind_proxy), follow_redirects=False) as web:
        assert "; secure" in web.get("/login").headers["set-cookie"].lower()
    # Served over https itself.
    direct = replace(server_settings, public_url=None)
    with TestClient(
        create_app(direct), base_url="https://testserver", follow_redirects=False
    ) as web:
        form = web.get("/login")
        response = web.post(
            "/login",
            data={"csrf": csrf_from(form.text), "token": viewer.secret},
            headers={"Origin": "https://testserver"},
        )
        assert response.status_code == 303, response.text
        assert "; secure" in response.headers["set-cookie"].lower()


def test_revoking_the_viewer_token_ends_its_sessions(
    web: TestClient, database_url: str, viewer_token: Callable[..., Token]
) -> None:
    viewer = viewer_token()
    assert login(web, viewer.secret)[0] == 303
    assert web.get("/").status_code == 200
    storage = Database(database_url)
    try:
        revoke_token(storage, viewer.id, actor="test")
    finally:
        storage.close()
    assert web.get("/").status_code == 303


def test_a_tampered_session_cookie_is_anonymous(
    web: TestClient, viewer_token: Callable[..., Token]
) -> None:
    viewer = viewer_token()
    login(web, viewer.secret)
    cookie = web.cookies["rnx_session"]
    body_part, mac = cookie.split(".")
    web.cookies.clear()
    web.cookies.set("rnx_session", f"{body_part}x.{mac}")
    assert web.get("/").status_code == 303


def test_another_workspace_sees_none_of_this_one(
    web: TestClient, run_id: str, viewer_token: Callable[..., Token]
) -> None:
    other = viewer_token(workspace="globex")
    headers = {"Authorization": f"Bearer {other.secret}"}
    run = web.get(f"/runs/{run_id}", headers=headers)
    assert run.status_code == 404 and "acme" not in run.text.replace(run_id, "")
    assert web.get("/repos/acme/kernels", headers=headers).status_code == 404
    overview = web.get("/", headers=headers)
    assert overview.status_code == 200 and "acme/kernels" not in overview.text
    assert "acme/kernels" not in web.get("/audit", headers=headers).text


def test_sign_in_takes_only_a_small_urlencoded_form(
    web: TestClient, viewer_token: Callable[..., Token]
) -> None:
    viewer = viewer_token()
    form = web.get("/login")
    fields = {"csrf": csrf_from(form.text), "token": viewer.secret}
    huge = web.post("/login", data={**fields, "pad": "x" * 100_000})
    assert huge.status_code == 400 and "set-cookie" not in huge.headers
    as_json = web.post("/login", json=fields)
    assert as_json.status_code == 400 and "set-cookie" not in as_json.headers
    assert web.post("/login", data=fields).status_code == 303  # the same fields, as a form
