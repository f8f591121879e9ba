"""Session cookies and CSRF tokens: what is signed stays signed, and expires."""

from __future__ import annotations

from gate_server.dashboard.sessions import SESSION_MAX_AGE_S, SessionSigner

KEY = bytes(range(32))


def test_a_session_round_trips_and_expires() -> None:
    signer = SessionSigner(KEY)
    session, cookie = signer.issue("7", now=1000.0)
    assert signer.read(cookie, now=1001.0) == session
    assert signer.read(cookie, now=1000.0 + SESSION_MAX_AGE_S + 1) is None
    assert session.token_id == "7" and session.nonce


def test_a_forged_or_mangled_cookie_is_refused() -> None:
    signer = SessionSigner(KEY)
    _, cookie = signer.issue("7", now=1000.0)
    body, mac = cookie.split(".")
    other_body = SessionSigner(KEY).issue("8", now=1000.0)[1].split(".")[0]
    assert signer.read(f"{other_body}.{mac}", now=1001.0) is None  # body swapped
    assert signer.read(f"{body}.{mac[:-2]}AA", now=1001.0) is None  # MAC changed
    assert SessionSigner(bytes(32)).read(cookie, now=1001.0) is None  # another server's key
    for junk in ["", "x", "a.b.c", "." * 5, "é.é", "a" * 5000]:
        assert signer.read(junk, now=1001.0) is None


def test_csrf_tokens_bind_to_one_session_and_one_key() -> None:
    signer = SessionSigner(KEY)
    token = signer.csrf_token("nonce-1")
    assert signer.csrf_ok("nonce-1", token)
    assert not signer.csrf_ok("nonce-2", token)
    assert not signer.csrf_ok("nonce-1", None)
    assert not signer.csrf_ok(None, token)
    assert not SessionSigner(bytes(32)).csrf_ok("nonce-1", token)
    # The CSRF key is not the session key: a session MAC never passes as a CSRF token.
    _, cookie = signer.issue("7", now=1.0)
    assert token != cookie.split(".")[1]
