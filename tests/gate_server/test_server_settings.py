"""Settings come from RNX_* variables in one place; bad values name the variable."""

from __future__ import annotations

from pathlib import Path

import pytest

from gate_server.domain.receipts import ReceiptSigner, generate_private_key_pem
from gate_server.errors import SettingsError
from gate_server.settings import ServerSettings, load_settings
from stats import MIN_RESAMPLES


def test_defaults(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    s = load_settings({})
    assert s.database_url == f"sqlite:///{Path(tmp_path) / 'rnx-gate.db'}"
    assert s.gate.block_threshold == 0.25 and s.gate.rope == 0.02
    assert s.timestamp_tolerance_s == 300 and s.receipt_key_pem is None


def test_values_from_the_environment(tmp_path):
    key = tmp_path / "key.pem"
    key.write_text(generate_private_key_pem())
    s = load_settings(
        {
            "RNX_DATABASE_URL": "postgresql+psycopg://u@h/db",
            "RNX_BLOCK_THRESHOLD": "10%",
            "RNX_ROPE": "0.05",
            "RNX_MAX_BODY_BYTES": "1000",
            "RNX_PUBLIC_URL": "https://gate.example.com/",
            "RNX_RECEIPT_KEY_FILE": str(key),
        }
    )
    assert s.database_url == "postgresql+psycopg://u@h/db"
    assert s.gate.block_threshold == pytest.approx(0.10) and s.gate.rope == 0.05
    assert s.max_body_bytes == 1000
    assert s.public_url == "https://gate.example.com"
    assert ReceiptSigner(s.receipt_key_pem or "").algorithm == "EdDSA"


@pytest.mark.parametrize(
    ("env", "named"),
    [
        ({"RNX_MAX_BODY_BYTES": "big"}, "RNX_MAX_BODY_BYTES"),
        ({"RNX_MAX_SAMPLES": "0"}, "RNX_MAX_SAMPLES"),
        ({"RNX_ROPE": "2"}, "RNX_ROPE"),
        ({"RNX_PUBLIC_URL": "gate.example.com"}, "RNX_PUBLIC_URL"),
        ({"RNX_RECEIPT_KEY_FILE": "/nonexistent/key.pem"}, "RNX_RECEIPT_KEY_FILE"),
        ({"RNX_RESAMPLES": "100"}, f"RNX_RESAMPLES=100 must be at least {MIN_RESAMPLES}"),
        ({"RNX_RESAMPLES": "1999"}, "RNX_RESAMPLES"),
        ({"RNX_PORT": "eighty"}, "RNX_PORT='eighty' is not a whole number"),
        ({"RNX_PORT": "70000"}, "RNX_PORT=70000 must be at most 65535"),
        ({"RNX_BASELINE_HISTORY": "-1"}, "RNX_BASELINE_HISTORY"),
    ],
)
def test_bad_values_name_the_variable(env, named):
    with pytest.raises(SettingsError, match=named):
        load_settings(env)


def test_the_resamples_bound_is_the_statistics_own():
    """The statistics refuse fewer than MIN_RESAMPLES; the settings say so before any upload."""
    assert load_settings({"RNX_RESAMPLES": str(MIN_RESAMPLES)}).resamples == MIN_RESAMPLES
    assert ServerSettings().resamples >= MIN_RESAMPLES
    with pytest.raises(SettingsError, match="RNX_RESAMPLES"):
        ServerSettings(resamples=MIN_RESAMPLES - 1)  # settings built in code are checked too


def test_rsa_keys_sign_rs256_and_junk_is_refused():
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    pem = (
        rsa.generate_private_key(public_exponent=65537, key_size=2048)
        .private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        .decode()
    )
    assert ReceiptSigner(pem).algorithm == "RS256"
    with pytest.raises(SettingsError, match="PEM private key"):
        ReceiptSigner("not a key")


def test_no_secret_is_in_the_settings_repr():
    """Settings end up in tracebacks and log lines: their repr holds no secret."""
    from cryptography.fernet import Fernet

    from gate_server.github.integration import GitHubIntegration

    secret_key = Fernet.generate_key().decode()
    app_key = "-----BEGIN PRIVATE KEY-----\nSWEEPappKey\n-----END PRIVATE KEY-----\n"
    s = load_settings(
        {
            "RNX_DATABASE_URL": "postgresql+psycopg://u:SWEEPdbPassword@h/db",
            "RNX_RECEIPT_KEY": generate_private_key_pem(),
            "RNX_GITHUB_WEBHOOK_SECRET": "SWEEPwebhook",
            "RNX_GITHUB_APP_ID": "12",
            "RNX_GITHUB_APP_PRIVATE_KEY": app_key,
            "RNX_SECRET_KEY": secret_key,
        }
    )
    shown = repr(s) + str(s) + repr(s.github_app) + repr(GitHubIntegration(webhook_secret="W1"))
    for secret in (
        "SWEEPdbPassword",
        "PRIVATE KEY",
        "SWEEPwebhook",
        "SWEEPappKey",
        secret_key,
        "W1",
    ):
        assert secret not in shown
    assert "oidc_audience='kernalin'" in shown  # the rest is still there to read
