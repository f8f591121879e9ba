"""Stored secrets encrypted with the operator's key (RNX_SECRET_KEY) on both engines: channel
secrets and the server's own keys never lie in the database as plain text, plain rows are
sealed once a key is set, a server without the key (or with a wrong one) refuses to start, and
`rnx secrets rotate` moves every secret to a new key."""

from __future__ import annotations

import io
import sys

import pytest
from cryptography.fernet import Fernet
from sqlalchemy import select

from gate_server.cli.main import main
from gate_server.dashboard.state import SESSION_KEY_NAME
from gate_server.db import alerts, open_database
from gate_server.db.schema import notify_channels, server_keys
from gate_server.domain.receipts import KEY_NAME, generate_private_key_pem
from gate_server.domain.server_keys import stored_key
from gate_server.errors import SettingsError
from testbed.gate_helpers import create_token

SLACK_URL = "https://hooks.slack.com/services/T0001/B0002/PlantedSecretPart?sig=SigSecret"
KEY_A = Fernet.generate_key().decode()
KEY_B = Fernet.generate_key().decode()


def _add_slack(monkeypatch: pytest.MonkeyPatch, url: str, name: str) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO(SLACK_URL))
    argv = ["notify", "add", "slack", "--workspace", "acme", "--name", name]
    assert main([*argv, "--database-url", url]) == 0


def _stored(url: str, keys: tuple[str, ...]) -> list[str]:
    database = open_database(url, keys)
    try:
        with database.read() as conn:
            found = list(conn.execute(select(notify_channels.c.secret)).scalars())
            found += list(conn.execute(select(server_keys.c.secret)).scalars())
    finally:
        database.close()
    return found


def _secrets(url: str, keys: tuple[str, ...]) -> tuple[dict[str, str], str]:
    database = open_database(url, keys)
    try:
        with database.read() as conn:
            channel = alerts.channel_secret(conn, 1, database.sealer)
        session = stored_key(database, SESSION_KEY_NAME, lambda: "never made here")
    finally:
        database.close()
    return channel, session


def test_secrets_are_stored_encrypted_and_plain_rows_are_sealed(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    create_token(database_url)
    monkeypatch.delenv("RNX_SECRET_KEY", raising=False)
    _add_slack(monkeypatch, database_url, "before")  # stored before the operator set a key
    database = open_database(database_url)
    try:
        session = stored_key(database, SESSION_KEY_NAME, lambda: "session-key-0123456789")
        receipt = stored_key(database, KEY_NAME, generate_private_key_pem)
    finally:
        database.close()
    assert any(SLACK_URL in s for s in _stored(database_url, ()))  # plain so far

    monkeypatch.setenv("RNX_SECRET_KEY", KEY_A)
    _add_slack(monkeypatch, database_url, "after")  # opening with the key sealed the old rows
    stored = _stored(database_url, (KEY_A,))
    assert len(stored) == 4 and all(s.startswith("fernet:") for s in stored)
    for plain in ("PlantedSecretPart", "SigSecret", "hooks.slack.com", session, "PRIVATE KEY"):
        assert not any(plain in s for s in stored)
    assert _secrets(database_url, (KEY_A,)) == ({"url": SLACK_URL}, session)
    database = open_database(database_url, (KEY_A,))
    try:
        assert stored_key(database, KEY_NAME, generate_private_key_pem) == receipt
    finally:
        database.close()


def test_without_the_key_or_with_a_wrong_one_the_server_refuses_to_start(
    database_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    create_token(database_url)
    monkeypatch.setenv("RNX_SECRET_KEY", KEY_A)
    _add_slack(monkeypatch, database_url, "perf")
    monkeypatch.delenv("RNX_SECRET_KEY")
    capsys.readouterr()
    assert main(["serve", "--database-url", database_url]) == 2
    err = capsys.readouterr().err.strip()
    assert "encrypted at rest" in err and "RNX_SECRET_KEY" in err and "\n" not in err
    with pytest.raises(SettingsError, match="not the key it was encrypted with"):
        open_database(database_url, (KEY_B,)).close()
    with pytest.raises(SettingsError, match="not a Fernet key"):
        open_database(database_url, ("not-a-key",)).close()
    assert _secrets(database_url, (KEY_A,))[0] == {"url": SLACK_URL}  # nothing was changed


def test_rotation_moves_every_secret_to_the_new_key(
    database_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    create_token(database_url)
    monkeypatch.setenv("RNX_SECRET_KEY", KEY_A)
    _add_slack(monkeypatch, database_url, "perf")
    session = _secrets(database_url, (KEY_A,))[1]  # made now, sealed with A

    monkeypatch.delenv("RNX_SECRET_KEY")
    assert main(["secrets", "rotate", "--database-url", database_url]) == 2
    assert "RNX_SECRET_KEY" in capsys.readouterr().err

    monkeypatch.setenv("RNX_SECRET_KEY", f"{KEY_B}, {KEY_A}")  # the new key first
    assert main(["secrets", "rotate", "--database-url", database_url]) == 0
    assert "2 stored secrets encrypted with the first key" in capsys.readouterr().out
    assert _secrets(database_url, (KEY_B,)) == ({"url": SLACK_URL}, session)
    with pytest.raises(SettingsError, match="not the key"):
        open_database(database_url, (KEY_A,)).close()


def test_new_key_prints_a_usable_key(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["secrets", "new-key"]) == 0
    key = capsys.readouterr().out.strip()
    assert Fernet(key.encode()).decrypt(Fernet(key.encode()).encrypt(b"x")) == b"x"
