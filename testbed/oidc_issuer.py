"""GitHub's OIDC issuer stood in for on loopback: a key pair made here, its JWKS over HTTP."""

from __future__ import annotations

import json
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm


class OidcIssuer:
    def __init__(self) -> None:
        self.keys: dict[str, rsa.RSAPrivateKey] = {}
        self.requests: list[str] = []
        self.request_token = "actions-id-token-request-token"
        self.job_claims: dict[str, Any] = {}  # claims of the tokens /actions-token hands out
        self.issued: list[str] = []  # the tokens /actions-token handed out
        self.rotate()
        issuer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
                issuer.requests.append(self.path)
                if self.path == "/.well-known/openid-configuration":
                    body = {"issuer": issuer.url, "jwks_uri": f"{issuer.url}/.well-known/jwks"}
                elif self.path == "/.well-known/jwks":
                    body = issuer.jwks()
                elif self.path.startswith("/actions-token"):
                    # GitHub's ACTIONS_ID_TOKEN_REQUEST_URL: a job's bearer buys an ID token.
                    if self.headers.get("Authorization") != f"Bearer {issuer.request_token}":
                        self.send_error(401)
                        return
                    query = parse_qs(urlparse(self.path).query)
                    audience = query.get("audience", [""])[0]
                    body = {"value": issuer.token(audience=audience, **issuer.job_claims)}
                    issuer.issued.append(body["value"])
                else:
                    self.send_error(404)
                    return
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def rotate(self) -> str:
        """A new signing key (GitHub rotates its keys); returns its kid."""
        kid = uuid.uuid4().hex[:16]
        self.keys[kid] = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.current_kid = kid
        return kid

    def jwks(self) -> dict[str, Any]:
        keys = []
        for kid, key in self.keys.items():
            jwk = json.loads(RSAAlgorithm.to_jwk(key.public_key()))
            jwk.update({"kid": kid, "use": "sig", "alg": "RS256"})
            keys.append(jwk)
        return {"keys": keys}

    def token(
        self,
        *,
        audience: str = "https://gate.example",
        repository: str = "Codertocat/Hello-World",
        repository_id: int = 186853002,
        ref: str = "refs/heads/master",
        sha: str = "ec26c3e57ca3a959ca5aad62de7213c562f8c821",
        event_name: str = "push",
        lifetime_s: int = 300,
        issued_at: float | None = None,
        kid: str | None = None,
        key: rsa.RSAPrivateKey | None = None,
        issuer: str | None = None,
        drop: tuple[str, ...] = (),
        jti: str | None = None,
        actor: str = "Codertocat",
    ) -> str:
        """A token shaped like GitHub's (same claim names), signed by this issuer."""
        now = time.time() if issued_at is None else issued_at
        kid = kid or self.current_kid
        claims: dict[str, Any] = {
            "jti": jti or str(uuid.uuid4()),
            "sub": f"repo:{repository}:ref:{ref}",
            "aud": audience,
            "ref": ref,
            "sha": sha,
            "repository": repository,
            "repository_owner": repository.split("/")[0],
            "repository_id": str(repository_id),
            "actor": actor,
            "event_name": event_name,
            "iss": issuer or self.url,
            "nbf": int(now) - 5,
            "iat": int(now),
            "exp": int(now) + lifetime_s,
        }
        for name in drop:
            claims.pop(name, None)
        return jwt.encode(claims, key or self.keys[kid], algorithm="RS256", headers={"kid": kid})

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
