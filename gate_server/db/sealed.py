"""Secrets at rest: channel secrets (webhook URLs, SMTP passwords, signing secrets) and the
server's own keys (receipt signing key, dashboard session key) are stored encrypted with the
operator's key (RNX_SECRET_KEY or RNX_SECRET_KEY_FILE, Fernet), so a copied database file or
backup holds no usable secret.

A sealed value is "fernet:" + a Fernet token; anything else is a value stored before a key was
set (plain). The key setting may list several keys, newest first: the first seals, every one
opens, which is how a key is rotated (docs/security.md, `python -m gate_server secrets rotate`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from sqlalchemy import select, update
from sqlalchemy.engine import Connection
from sqlalchemy.sql.schema import Column, Table

from gate_server.db.schema import notify_channels, server_keys
from gate_server.errors import SettingsError

PREFIX = "fernet:"
KEY_SETTING = "RNX_SECRET_KEY"
_NO_KEY = (
    f"set {KEY_SETTING} (or {KEY_SETTING}_FILE) to the key they were encrypted with; "
    "`python -m gate_server secrets new-key` makes a key, docs/security.md says how to rotate"
)


class Sealer:
    """Seals and opens stored secrets with the operator's keys; without keys it stores them
    plain and refuses to open a sealed one."""

    def __init__(self, keys: Sequence[str] = ()) -> None:
        fernets = []
        for number, key in enumerate(keys, start=1):
            try:
                fernets.append(Fernet(key.strip().encode("ascii")))
            except (ValueError, UnicodeEncodeError):
                raise SettingsError(
                    f"{KEY_SETTING}: key {number} is not a Fernet key (32 bytes, url-safe "
                    "base64, 44 characters); make one with `python -m gate_server secrets "
                    "new-key`"
                ) from None
        self._box = MultiFernet(fernets) if fernets else None

    @property
    def has_key(self) -> bool:
        return self._box is not None

    def seal(self, plain: str) -> str:
        if self._box is None:
            return plain
        return PREFIX + self._box.encrypt(plain.encode("utf-8")).decode("ascii")

    def open(self, stored: str) -> str:
        if not stored.startswith(PREFIX):
            return stored
        if self._box is None:
            raise SettingsError(f"a stored secret is encrypted and no key is set: {_NO_KEY}")
        try:
            return self._box.decrypt(stored[len(PREFIX) :].encode("ascii")).decode("utf-8")
        except (InvalidToken, UnicodeError):
            raise SettingsError(
                f"a stored secret does not decrypt with {KEY_SETTING}: it is not the key it was "
                "encrypted with (while rotating, list the new key first and the old one after)"
            ) from None

    def reseal(self, stored: str) -> str:
        """The value sealed with the first key (plain values sealed for the first time)."""
        return self.seal(self.open(stored))


@dataclass(frozen=True)
class Sealing:
    """What start-up or a rotation did: values sealed from plain, resealed, left as they were."""

    sealed: int = 0
    resealed: int = 0


# Where secrets are stored: (table, its secret column, its key column).
_Where = tuple[Table, "Column[str]", "Column[object]"]
_COLUMNS: list[_Where] = [
    (notify_channels, notify_channels.c.secret, notify_channels.c.id),
    (server_keys, server_keys.c.secret, server_keys.c.name),
]


def _stored(conn: Connection) -> list[tuple[_Where, object, str]]:
    """Every stored secret: where it is, its row's key, its stored value."""
    return [
        (where, row, str(value))
        for where in _COLUMNS
        for row, value in conn.execute(select(where[2], where[1]))
    ]


def _replace(conn: Connection, where: _Where, row: object, old: str, new: str) -> None:
    table, column, key = where
    # Compare-and-set: a process sealing the same row at the same time leaves one sealed value.
    conn.execute(update(table).where(key == row, column == old).values({column.name: new}))


def settle(conn: Connection, sealer: Sealer, *, rotate: bool = False) -> Sealing:
    """At start-up: without a key, refuse a database that holds sealed secrets; with one, check
    every sealed value opens and seal the plain ones. rotate: reseal every value with the
    first key too."""
    sealed = resealed = 0
    for where, row, value in _stored(conn):
        is_sealed = value.startswith(PREFIX)
        if not sealer.has_key:
            if is_sealed:
                raise SettingsError(
                    f"the database holds secrets encrypted at rest ({where[0].name}) and "
                    f"{KEY_SETTING} is not set: {_NO_KEY}"
                )
            continue
        if not is_sealed:
            _replace(conn, where, row, value, sealer.seal(value))
            sealed += 1
        elif rotate:
            _replace(conn, where, row, value, sealer.reseal(value))
            resealed += 1
        else:
            sealer.open(value)  # a wrong key is found at start-up, not at the first alert
    return Sealing(sealed=sealed, resealed=resealed)
