"""Signed session cookies and CSRF tokens for the dashboard (HMAC-SHA256, no server state)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
from dataclasses import dataclass
from typing import Any

SESSION_COOKIE = "rnx_session"
# Set before sign-in so the login form itself is CSRF-protected (double submit, signed).
PRELOGIN_COOKIE = "rnx_login"
SESSION_MAX_AGE_S = 12 * 3600
# Signing in with GitHub: the browser's half of the OAuth `state` (its nonce), and how long
# the round trip through GitHub may take.
OAUTH_COOKIE = "rnx_oauth"
OAUTH_MAX_AGE_S = 600


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def derive_key(master: bytes, purpose: str) -> bytes:
    """A key for one purpose only, so a session MAC can never pass as anything else."""
    return hmac.new(master, f"rnx-dashboard:{purpose}".encode(), hashlib.sha256).digest()


@dataclass(frozen=True)
class Session:
    """What the cookie holds: which viewer token signed in, until when, and a CSRF binding.

    The token itself is never in the cookie; only the id of its stored row, so revoking the
    token ends every session made with it (the routes look the token up on each request).
    """

    token_id: str
    expires_at: int
    nonce: str


@dataclass(frozen=True)
class OAuthState:
    """What the `state` GitHub hands back carries: where to go after signing in, and which
    workspace was asked for (None: whichever one the person may see)."""

    next: str
    workspace: str | None


def _signed(key: bytes, data: dict[str, object]) -> str:
    """BODY.MAC: the JSON `data` in base64url, and its HMAC-SHA256 under `key`."""
    body = _b64(json.dumps(data, separators=(",", ":")).encode())
    return f"{body}.{_b64(hmac.new(key, body.encode(), hashlib.sha256).digest())}"


def _verified(key: bytes, token: str | None, max_chars: int) -> dict[str, Any] | None:
    """The JSON object a BODY.MAC token carries, or None when it is absent, too long, forged
    or not an object. Bytes, not str, are compared: compare_digest refuses non-ASCII text, and
    a token is attacker input."""
    if not token or len(token) > max_chars or token.count(".") != 1:
        return None
    body, mac = token.split(".")
    expected = _b64(hmac.new(key, body.encode(), hashlib.sha256).digest())
    if not hmac.compare_digest(mac.encode(), expected.encode()):
        return None
    try:
        data = json.loads(_unb64(body))
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


class SessionSigner:
    def __init__(self, master_key: bytes):
        self._session_key = derive_key(master_key, "session")
        self._csrf_key = derive_key(master_key, "csrf")
        self._oauth_key = derive_key(master_key, "oauth-state")

    def oauth_state(self, wanted: OAuthState, nonce: str, *, now: float) -> str:
        """The OAuth `state`: signed, expiring, and bound to the browser's nonce (a cookie), so
        a callback someone else started (login CSRF) or replayed later signs nobody in."""
        data: dict[str, object] = {"n": nonce, "e": int(now) + OAUTH_MAX_AGE_S, "x": wanted.next}
        if wanted.workspace:
            data["w"] = wanted.workspace
        return _signed(self._oauth_key, data)

    def read_oauth_state(
        self, state: str | None, nonce: str | None, *, now: float
    ) -> OAuthState | None:
        """The state GitHub handed back, or None when it is forged, expired, malformed, or was
        not started by this browser (its nonce cookie differs)."""
        data = _verified(self._oauth_key, state, 2048)
        if data is None or not nonce:
            return None
        try:
            fresh = int(data["e"]) > now
            mine = hmac.compare_digest(str(data["n"]).encode(), nonce.encode())
            wanted = OAuthState(str(data["x"]), str(data["w"]) if data.get("w") else None)
        except (ValueError, KeyError, TypeError):
            return None
        return wanted if fresh and mine else None

    def issue(self, token_id: str, *, now: float) -> tuple[Session, str]:
        session = Session(str(token_id), int(now) + SESSION_MAX_AGE_S, secrets.token_urlsafe(16))
        data = {"t": session.token_id, "e": session.expires_at, "n": session.nonce}
        return session, _signed(self._session_key, data)

    def read(self, cookie: str | None, *, now: float) -> Session | None:
        """The session in a cookie, or None when it is absent, forged, malformed or expired."""
        data = _verified(self._session_key, cookie, 1024)
        if data is None:
            return None
        try:
            session = Session(str(data["t"]), int(data["e"]), str(data["n"]))
        except (ValueError, KeyError, TypeError):
            return None
        return session if session.expires_at > now else None

    def csrf_token(self, binding: str) -> str:
        """The form token for a session nonce (or a pre-login nonce): a MAC nobody else can make."""
        return _b64(hmac.new(self._csrf_key, binding.encode(), hashlib.sha256).digest())

    def csrf_ok(self, binding: str | None, submitted: str | None) -> bool:
        if not binding or not submitted:
            return False
        return hmac.compare_digest(self.csrf_token(binding).encode(), submitted.encode())


def new_nonce() -> str:
    return secrets.token_urlsafe(16)
