"""Signing in to the dashboard with GitHub, on SQLite and PostgreSQL, against the GitHub fake
(GitHub's authorize page, token exchange, /user and collaborator permissions over loopback):
who may see and act is what GitHub says of every repository of a workspace; the state is
signed, bound to the browser, expiring and spent once; the user token is never kept."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
import uvicorn
from cryptography.hazmat.primitives.asymmetric import rsa
from starlette.testclient import TestClient

from gate_server.asgi import create_app
from gate_server.errors import SettingsError
from gate_server.settings import OAuthClient, ServerSettings, load_settings
from rnx_github.app_auth import AppCredentials
from testbed.fakes import fake_github
from testbed.fakes.github_endpoints import extras, install_app, private_pem
from testbed.gate_helpers import create_token

pytest_plugins = ["tests.dashboard.dashboard_site"]  # the browser fixture

CLIENT = OAuthClient("Iv1.0123456789abcdef", "oauth-client-secret-never-shown")
PUBLIC = "http://testserver"  # the TestClient's own host: GitHub redirects back to it
KERNELS, OTHER = "acme/kernels", "acme/other"


@pytest.fixture
def github(app_key: rsa.RSAPrivateKey) -> Iterator[tuple[str, fake_github.State]]:
    with fake_github.serve() as (url, state):
        install_app(state, app_key, {KERNELS: 7, OTHER: 8})
        extras(state).oauth_client = (CLIENT.client_id, CLIENT.client_secret)
        yield url, state


@pytest.fixture
def client(
    database_url: str, github: tuple[str, fake_github.State], app_key: rsa.RSAPrivateKey
) -> Iterator[TestClient]:
    url = github[0]
    # Two repositories in workspace acme (the CI tokens register them); main is their baseline.
    create_token(database_url, repository=KERNELS, branches=("main",))
    create_token(database_url, repository=OTHER, branches=("main", "release/*"))
    settings = ServerSettings(
        database_url=database_url,
        public_url=PUBLIC,
        github_app=AppCredentials("314", private_pem(app_key), url),
        github_api_url=url,
        github_oauth=CLIENT,
        github_web_url=url,
        oidc_audience=None,
    )
    with TestClient(create_app(settings)) as c:
        yield c


def _permit(state: fake_github.State, login: str, kernels: str, other: str) -> None:
    found = extras(state)
    found.permissions[(KERNELS, login)] = kernels
    found.permissions[(OTHER, login)] = other
    found.oauth_user = login


def _through_github(client: TestClient, start: str = "/login/github?next=/audit") -> Any:
    """The browser's round trip: our redirect to GitHub, GitHub's back to the callback."""
    to_github = client.get(start, follow_redirects=False)
    assert to_github.status_code == 303, to_github.text
    back = httpx.get(to_github.headers["location"], follow_redirects=False)
    assert back.status_code == 302, back.text
    callback = back.headers["location"]
    assert callback.startswith(f"{PUBLIC}/login/github/callback?")
    return client.get(callback.removeprefix(PUBLIC), follow_redirects=False)


def test_a_reader_of_every_repository_signs_in_and_is_named_in_the_audit_log(
    client: TestClient, github: tuple[str, fake_github.State]
) -> None:
    _permit(github[1], "octocat", "read", "triage")
    login_page = client.get("/login").text
    assert 'href="/login/github?next=/"' in login_page and "Sign in with GitHub" in login_page
    done = _through_github(client)
    assert done.status_code == 303 and done.headers["location"] == "/audit"
    audit = client.get("/audit").text
    assert "github:octocat" in audit and "dashboard.login" in audit
    # A reader, not an actor: no acknowledge form on the overview.
    assert "act-form" not in client.get("/").text
    # The user token GitHub issued is nowhere in what the server kept or showed.
    (user_token,) = [t for t, tok in github[1].tokens.items() if t.startswith("ghu_")]
    assert user_token not in audit
    assert CLIENT.client_secret not in repr(client.app.state.services.settings)


def test_a_writer_may_act_on_the_baseline_branches_the_ci_tokens_name(
    client: TestClient,
    github: tuple[str, fake_github.State],
    database_url: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    _permit(github[1], "hubot", "write", "admin")
    assert _through_github(client).status_code == 303
    from gate_server.db import open_database, tokens

    db = open_database(database_url)
    try:
        with db.read() as conn:
            (signed,) = [t for t in tokens.all_tokens(conn) if t.github_login == "hubot"]
    finally:
        db.close()
    assert signed.kind == "viewer" and signed.can_act
    assert signed.branches == ["main", "release/*"]
    from gate_server.cli.main import _print_tokens

    _print_tokens([signed], as_json=False)
    assert "github:hubot" in capsys.readouterr().out  # what `rnx token list` shows
    # Signing in again reuses the row and brings its rights up to date (write was taken away).
    _permit(github[1], "hubot", "read", "admin")
    client.cookies.clear()
    assert _through_github(client).status_code == 303
    db = open_database(database_url)
    try:
        with db.read() as conn:
            again = [t for t in tokens.all_tokens(conn) if t.github_login == "hubot"]
    finally:
        db.close()
    assert [t.id for t in again] == [signed.id] and not again[0].can_act


def test_reading_one_repository_of_two_is_not_enough(
    client: TestClient, github: tuple[str, fake_github.State]
) -> None:
    _permit(github[1], "outsider", "read", "none")
    refused = _through_github(client)
    assert refused.status_code == 403
    assert "may not see any workspace" in refused.text
    assert "rnx_session" not in refused.headers.get("set-cookie", "")


def test_an_admin_revocation_is_not_undone_by_signing_in_again(
    client: TestClient, github: tuple[str, fake_github.State], database_url: str
) -> None:
    _permit(github[1], "octocat", "read", "read")
    assert _through_github(client).status_code == 303
    from gate_server.db import open_database, tokens
    from gate_server.domain.auth import revoke_token

    db = open_database(database_url)
    try:
        with db.read() as conn:
            (row,) = [t for t in tokens.all_tokens(conn) if t.github_login == "octocat"]
        revoke_token(db, row.id, actor="admin")
    finally:
        db.close()
    # The session of the revoked row ends at once, and a new sign-in is refused.
    assert client.get("/", follow_redirects=False).status_code in (302, 303, 401)
    client.cookies.clear()
    refused = _through_github(client)
    assert refused.status_code == 403 and "revoked" in refused.text


def test_the_state_is_bound_to_the_browser_and_spent_once(
    client: TestClient, github: tuple[str, fake_github.State]
) -> None:
    _permit(github[1], "octocat", "read", "read")
    to_github = client.get("/login/github", follow_redirects=False)
    callback = httpx.get(to_github.headers["location"], follow_redirects=False).headers["location"]
    path = callback.removeprefix(PUBLIC)
    # Another browser (no nonce cookie) brought the callback: login CSRF, refused.
    stranger = TestClient(client.app)  # no `with`: the app has started already
    assert stranger.get(path, follow_redirects=False).status_code == 403
    # A forged state: refused before GitHub is asked anything.
    query = parse_qs(urlsplit(callback).query)
    forged = client.get(
        f"/login/github/callback?code={query['code'][0]}&state=eyJ4IjoiLyJ9.AAAA",
        follow_redirects=False,
    )
    assert forged.status_code == 403
    assert extras(github[1]).oauth_exchanges == []
    # Its own browser: signed in, and the nonce spent; the same callback again is refused.
    assert client.get(path, follow_redirects=False).status_code == 303
    assert client.get(path, follow_redirects=False).status_code == 403


def test_a_declined_or_replayed_code_signs_nobody_in(
    client: TestClient, github: tuple[str, fake_github.State]
) -> None:
    extras(github[1]).oauth_user = None  # the person clicks "Cancel" on GitHub
    declined = _through_github(client)
    assert declined.status_code == 403 and "(access_denied)" in declined.text
    # A code GitHub issued once, brought back with a fresh state of this very browser.
    _permit(github[1], "octocat", "read", "read")
    to_github = client.get("/login/github", follow_redirects=False)
    first = httpx.get(to_github.headers["location"], follow_redirects=False).headers["location"]
    assert client.get(first.removeprefix(PUBLIC), follow_redirects=False).status_code == 303
    client.cookies.clear()
    again = client.get("/login/github", follow_redirects=False)
    state = parse_qs(urlsplit(again.headers["location"]).query)["state"][0]
    code = parse_qs(urlsplit(first).query)["code"][0]
    replayed = client.get(
        "/login/github/callback", params={"code": code, "state": state}, follow_redirects=False
    )
    assert replayed.status_code == 403 and "(bad_verification_code)" in replayed.text
    assert "rnx_session" not in replayed.headers.get("set-cookie", "")


def test_someone_who_may_see_several_workspaces_chooses_one(
    client: TestClient, github: tuple[str, fake_github.State], database_url: str
) -> None:
    create_token(database_url, workspace="globex", repository="globex/fast", branches=("main",))
    extras(github[1]).app.installations["globex/fast"] = 9  # type: ignore[union-attr]
    extras(github[1]).permissions[("globex/fast", "octocat")] = "read"
    _permit(github[1], "octocat", "read", "read")
    choice = _through_github(client)
    assert choice.status_code == 200 and "Choose a workspace" in choice.text
    assert 'href="/login/github?workspace=globex&amp;next=/audit"' in choice.text
    done = _through_github(client, "/login/github?workspace=globex&next=/")
    assert done.status_code == 303
    assert "globex" in client.get("/").text


def test_settings_refuse_half_a_client_or_one_without_app_mode(tmp_path: Any) -> None:
    base = {"RNX_DATABASE_URL": f"sqlite:///{tmp_path / 'x.db'}"}
    with pytest.raises(SettingsError, match="RNX_GITHUB_OAUTH_CLIENT_SECRET"):
        load_settings({**base, "RNX_GITHUB_OAUTH_CLIENT_ID": "Iv1.abc"})
    secret_file = tmp_path / "secret"
    secret_file.write_text("s3cret\n")
    env = {
        **base,
        "RNX_GITHUB_OAUTH_CLIENT_ID": "Iv1.abc",
        "RNX_GITHUB_OAUTH_CLIENT_SECRET_FILE": str(secret_file),
    }
    with pytest.raises(SettingsError, match="needs GitHub App mode"):
        load_settings(env)
    with pytest.raises(SettingsError, match="not a client id"):
        load_settings({**env, "RNX_GITHUB_OAUTH_CLIENT_ID": "<script>"})


def test_without_a_client_the_github_button_is_absent_and_its_route_says_why(
    database_url: str,
) -> None:
    with TestClient(create_app(ServerSettings(database_url=database_url))) as c:
        assert "Sign in with GitHub" not in c.get("/login").text
        off = c.get("/login/github", follow_redirects=False)
        assert off.status_code == 404 and "RNX_GITHUB_OAUTH_CLIENT_ID" in off.text
        assert c.get("/login/github/callback?code=x&state=y").status_code == 403


def test_the_audit_entry_of_a_sign_in_is_json_with_the_workspace(
    client: TestClient, github: tuple[str, fake_github.State], database_url: str
) -> None:
    _permit(github[1], "octocat", "read", "read")
    _through_github(client)
    from gate_server.db import audit, open_database

    db = open_database(database_url)
    try:
        with db.read() as conn:
            entries = [e for e in audit.entries(conn) if e["action"] == "dashboard.login"]
    finally:
        db.close()
    (entry,) = entries
    assert entry["actor"] == "github:octocat"
    details = (
        entry["details"] if isinstance(entry["details"], dict) else json.loads(entry["details"])
    )
    assert details == {"workspace": "acme", "via": "github", "can_act": False}


@contextmanager
def _live(settings_for: Any) -> Iterator[str]:
    """The server in this process on a loopback port bound first, so RNX_PUBLIC_URL (the
    callback GitHub redirects the browser to) can name it before the server starts."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    server = uvicorn.Server(uvicorn.Config(create_app(settings_for(url)), log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60  # a loaded machine, not a speed claim
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the server did not start"
        time.sleep(0.02)
    try:
        yield url
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


def test_a_person_signs_in_with_github_in_a_real_browser(
    browser: Any,
    github: tuple[str, fake_github.State],
    app_key: rsa.RSAPrivateKey,
    tmp_path: Any,
) -> None:
    """Chromium clicks "Sign in with GitHub", passes GitHub (the fake's authorize page agrees
    as hubot), and lands on the page it asked for, signed in by name and allowed to act; at
    1280 and 390 px the header with the name fits the page."""
    database_url = f"sqlite:///{tmp_path / 'browser.db'}"
    create_token(database_url, repository=KERNELS, branches=("main",))
    create_token(database_url, repository=OTHER, branches=("main",))
    _permit(github[1], "hubot", "write", "write")

    def settings_for(url: str) -> ServerSettings:
        return ServerSettings(
            database_url=database_url,
            public_url=url,
            github_app=AppCredentials("314", private_pem(app_key), github[0]),
            github_api_url=github[0],
            github_oauth=CLIENT,
            github_web_url=github[0],
            oidc_audience=None,
        )

    with _live(settings_for) as url:
        for width in (1280, 390):
            context = browser.new_context(viewport={"width": width, "height": 900}, base_url=url)
            page = context.new_page()
            page.set_default_timeout(60_000)
            try:
                page.goto("/audit")
                assert "/login" in page.url
                page.click("text=Sign in with GitHub")
                page.wait_for_url(f"{url}/audit")
                header = page.locator(".topbar .who").inner_text()
                assert "github:hubot" in header and "acme" in header
                assert "dashboard.login" in page.locator("main").inner_text()
                wide = page.evaluate("document.documentElement.scrollWidth")
                assert wide <= width, f"the page is {wide} px wide at {width} px"
            finally:
                context.close()
