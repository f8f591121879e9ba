"""GitHub Actions OIDC tokens in place of a CI token: RS256 against the issuer's JWKS.

The verifier checks signature, issuer, audience and expiry; the caller binds the claims to a
registered repository (by GitHub's repository id and name) and refuses a replayed jti.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import httpx
import jwt

ALGORITHMS = ["RS256"]
# An unknown kid triggers a refresh (GitHub rotates keys), but not more often than this, so
# a stream of forged kids cannot make us hammer the issuer.
MIN_REFRESH_INTERVAL_S = 30.0
FETCH_TIMEOUT_S = 5.0


class OidcError(Exception):
    """A token we refuse; the message says why and is safe to show the client."""


@dataclass(frozen=True)
class OidcClaims:
    repository: str
    repository_id: int
    repository_owner: str
    ref: str  # refs/heads/main, refs/pull/3/merge, ...
    sha: str
    event_name: str
    actor: str
    jti: str
    subject: str
    expires_at: float

    @property
    def branch(self) -> str | None:
        return self.ref[len("refs/heads/") :] if self.ref.startswith("refs/heads/") else None


class JwksCache:
    """The issuer's signing keys, fetched once and refreshed when a token names an unknown kid."""

    def __init__(
        self,
        issuer: str,
        *,
        http: httpx.Client | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.issuer = issuer.rstrip("/")
        self._http = http
        self._clock = clock
        self._lock = threading.Lock()
        self._keys: dict[str, Any] = {}
        self._fetched_at: float | None = None
        self.fetches = 0

    def key(self, kid: str) -> Any:
        with self._lock:
            if kid not in self._keys and self._may_refresh():
                self._refresh()
            if kid not in self._keys:
                raise OidcError(
                    f"the token's signing key {kid!r} is not one of {self.issuer}'s keys"
                )
            return self._keys[kid]

    def _may_refresh(self) -> bool:
        if self._fetched_at is None:
            return True
        return self._clock() - self._fetched_at >= MIN_REFRESH_INTERVAL_S

    def _refresh(self) -> None:
        self._fetched_at = self._clock()
        self.fetches += 1
        try:
            config = self._get_json(f"{self.issuer}/.well-known/openid-configuration")
            jwks_uri = config.get("jwks_uri") or f"{self.issuer}/.well-known/jwks"
            jwks = self._get_json(str(jwks_uri))
            keyset = jwt.PyJWKSet.from_dict(jwks)
        except (httpx.HTTPError, ValueError, jwt.PyJWTError) as e:
            # Keep the keys we had: a blip at the issuer must not lock out every upload.
            raise OidcError(f"cannot fetch the signing keys of {self.issuer}: {e}") from None
        self._keys = {k.key_id: k.key for k in keyset.keys if k.key_id}

    def _get_json(self, url: str) -> dict[str, Any]:
        if self._http is not None:
            r = self._http.get(url, timeout=FETCH_TIMEOUT_S)
        else:
            r = httpx.get(url, timeout=FETCH_TIMEOUT_S)
        r.raise_for_status()
        data = r.json()
        if not isinstance(data, dict):
            raise ValueError(f"{url} did not answer a JSON object")
        return data


class OidcVerifier:
    def __init__(
        self,
        *,
        issuer: str,
        audience: str,
        jwks: JwksCache | None = None,
        leeway_s: float = 60.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if not audience:
            raise ValueError("an OIDC audience is required (RNX_OIDC_AUDIENCE)")
        self.issuer = issuer.rstrip("/")
        self.audience = audience
        self.jwks = jwks or JwksCache(self.issuer)
        self.leeway_s = leeway_s
        self._clock = clock

    def verify(self, token: str) -> OidcClaims:
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError as e:
            raise OidcError(f"not a valid JWT: {e}") from None
        if header.get("alg") not in ALGORITHMS:
            raise OidcError(f"OIDC tokens must be signed with RS256, not {header.get('alg')!r}")
        kid = header.get("kid")
        if not isinstance(kid, str) or not kid:
            raise OidcError("the OIDC token has no key id (kid)")
        key = self.jwks.key(kid)
        try:
            # Time claims are checked below against our own clock (tests pass one in).
            claims: dict[str, Any] = jwt.decode(
                token,
                key,
                algorithms=ALGORITHMS,
                audience=self.audience,
                issuer=self.issuer,
                options={
                    "require": ["exp", "iat", "iss", "aud", "jti"],
                    "verify_exp": False,
                    "verify_iat": False,
                    "verify_nbf": False,
                },
            )
        except jwt.InvalidAudienceError:
            raise OidcError(f"the OIDC token's audience is not {self.audience!r}") from None
        except jwt.InvalidIssuerError:
            raise OidcError(f"the OIDC token was not issued by {self.issuer}") from None
        except jwt.PyJWTError as e:
            raise OidcError(f"the OIDC token is not valid: {e}") from None
        self._check_times(claims)
        return _claims(claims)

    def _check_times(self, claims: Mapping[str, Any]) -> None:
        now = self._clock()
        try:
            exp, iat = float(claims["exp"]), float(claims["iat"])
            nbf = float(claims.get("nbf", iat))
        except (TypeError, ValueError):
            raise OidcError("the OIDC token's exp, iat or nbf is not a number") from None
        if now > exp + self.leeway_s:
            raise OidcError("the OIDC token has expired; request a fresh one in the job")
        if now + self.leeway_s < min(iat, nbf):
            raise OidcError("the OIDC token is not valid yet (check the server's clock)")


def _claims(c: Mapping[str, Any]) -> OidcClaims:
    try:
        return OidcClaims(
            repository=str(c["repository"]),
            repository_id=int(c["repository_id"]),
            repository_owner=str(c.get("repository_owner", "")),
            ref=str(c.get("ref", "")),
            sha=str(c.get("sha", "")),
            event_name=str(c.get("event_name", "")),
            actor=str(c.get("actor", "")),
            jti=str(c["jti"]),
            subject=str(c.get("sub", "")),
            expires_at=float(c["exp"]),
        )
    except (KeyError, TypeError, ValueError):
        raise OidcError(
            "the OIDC token lacks GitHub's repository and repository_id claims "
            "(is it a GitHub Actions token?)"
        ) from None
