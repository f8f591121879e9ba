"""Receipts: JWTs the server signs over a run's verdict, checkable offline with its public key."""

from __future__ import annotations

import hashlib
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519, rsa

from gate_server.db import Database
from gate_server.domain.server_keys import stored_key
from gate_server.errors import SettingsError

KEY_NAME = "receipt"


def generate_private_key_pem() -> str:
    key = ed25519.Ed25519PrivateKey.generate()
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode("ascii")


class ReceiptSigner:
    def __init__(self, private_key_pem: str):
        try:
            key = serialization.load_pem_private_key(private_key_pem.encode("ascii"), None)
        except (ValueError, TypeError) as e:
            raise SettingsError(
                f"the receipt signing key is not an unencrypted PEM private key: {e}"
            ) from None
        if isinstance(key, ed25519.Ed25519PrivateKey):
            self.algorithm = "EdDSA"
        elif isinstance(key, rsa.RSAPrivateKey):
            if key.key_size < 2048:
                raise SettingsError("an RSA receipt key must have at least 2048 bits")
            self.algorithm = "RS256"
        else:
            raise SettingsError("the receipt signing key must be Ed25519 or RSA (RS256)")
        self._key = key
        public = key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        self.public_key_pem = public.decode("ascii")
        self.kid = hashlib.sha256(public).hexdigest()[:16]

    def sign(self, claims: dict[str, Any]) -> str:
        return jwt.encode(claims, self._key, algorithm=self.algorithm, headers={"kid": self.kid})

    def public_info(self) -> dict[str, str]:
        return {"algorithm": self.algorithm, "kid": self.kid, "public_key_pem": self.public_key_pem}


def load_signer(database: Database, private_key_pem: str | None) -> ReceiptSigner:
    """The configured key, or the one kept in the database (made on first start)."""
    pem = private_key_pem or stored_key(database, KEY_NAME, generate_private_key_pem)
    return ReceiptSigner(pem)
