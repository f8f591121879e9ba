"""OIDC verification against a JWKS served on loopback, with a key pair generated here."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterator

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from gate_server.domain.auth import looks_like_jwt
from gate_server.github.oidc import JwksCache, OidcError, OidcVerifier
from testbed.oidc_issuer import OidcIssuer

AUDIENCE = "https://gate.example"


@pytest.fixture(scope="module")
def issuer() -> Iterator[OidcIssuer]:
    server = OidcIssuer()
    yield server
    server.close()


class Clock:
    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def verifier(
    issuer: OidcIssuer, *, clock: Clock | None = None, leeway_s: float = 60
) -> OidcVerifier:
    mono = clock or Clock(1000.0)
    return OidcVerifier(
        issuer=issuer.url,
        audience=AUDIENCE,
        jwks=JwksCache(issuer.url, clock=mono),
        leeway_s=leeway_s,
        clock=clock or time.time,
    )


def test_a_valid_token_gives_githubs_claims(issuer: OidcIssuer) -> None:
    token = issuer.token(ref="refs/heads/main")
    assert looks_like_jwt(token)
    claims = verifier(issuer).verify(token)
    assert claims.repository == "Codertocat/Hello-World"
    assert claims.repository_id == 186853002
    assert claims.branch == "main"
    assert claims.event_name == "push"


def test_keys_are_cached_and_refreshed_on_an_unknown_kid(issuer: OidcIssuer) -> None:
    mono = Clock(1000.0)
    v = OidcVerifier(issuer=issuer.url, audience=AUDIENCE, jwks=JwksCache(issuer.url, clock=mono))
    v.verify(issuer.token())
    v.verify(issuer.token())
    assert v.jwks.fetches == 1
    issuer.rotate()  # GitHub publishes a new key
    mono.t += 60
    v.verify(issuer.token())
    assert v.jwks.fetches == 2
    # A forged kid right after a refresh does not make us fetch again.
    forged = issuer.token()
    header = {"alg": "RS256", "kid": "no-such-key", "typ": "JWT"}
    parts = forged.split(".")
    parts[0] = base64.urlsafe_b64encode(json.dumps(header).encode()).rstrip(b"=").decode()
    with pytest.raises(OidcError, match="not one of"):
        v.verify(".".join(parts))
    assert v.jwks.fetches == 2


def test_wrong_audience_issuer_and_signature_are_refused(issuer: OidcIssuer) -> None:
    v = verifier(issuer)
    with pytest.raises(OidcError, match="audience"):
        v.verify(issuer.token(audience="https://other.example"))
    with pytest.raises(OidcError, match="not issued by"):
        v.verify(issuer.token(issuer="https://token.actions.githubusercontent.com"))
    stranger = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    with pytest.raises(OidcError, match="not valid"):
        v.verify(issuer.token(key=stranger))  # right kid, wrong key


def test_expiry_has_a_small_leeway(issuer: OidcIssuer) -> None:
    now = time.time()
    token = issuer.token(issued_at=now - 400, lifetime_s=300)  # expired 100 s ago
    with pytest.raises(OidcError, match="expired"):
        verifier(issuer, clock=Clock(now)).verify(token)
    token = issuer.token(issued_at=now - 330, lifetime_s=300)  # expired 30 s ago
    assert verifier(issuer, clock=Clock(now)).verify(token).repository_id == 186853002
    with pytest.raises(OidcError, match="not valid yet"):
        verifier(issuer, clock=Clock(now)).verify(issuer.token(issued_at=now + 600))


def test_other_algorithms_and_missing_claims_are_refused(issuer: OidcIssuer) -> None:
    v = verifier(issuer)
    hs = jwt.encode(
        {"repository_id": 1},
        "secret-of-32-bytes-or-more-xxxxxxxx",
        algorithm="HS256",
        headers={"kid": issuer.current_kid},
    )
    with pytest.raises(OidcError, match="RS256"):
        v.verify(hs)
    with pytest.raises(OidcError, match="repository"):
        v.verify(issuer.token(drop=("repository_id",)))
    with pytest.raises(OidcError, match="jti"):
        v.verify(issuer.token(drop=("jti",)))
    with pytest.raises(OidcError, match="not a valid JWT"):
        v.verify("eyJhbGciOi.not.jwt")


def test_an_unreachable_issuer_is_a_clear_refusal() -> None:
    v = OidcVerifier(issuer="http://127.0.0.1:9", audience=AUDIENCE)
    token = jwt.encode(
        {"a": 1},
        rsa.generate_private_key(public_exponent=65537, key_size=2048),
        algorithm="RS256",
        headers={"kid": "k"},
    )
    with pytest.raises(OidcError, match="cannot fetch the signing keys"):
        v.verify(token)
