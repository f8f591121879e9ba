"""The server's settings: read from RNX_* environment variables here and nowhere else."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from gate_server.github.settings import GitHubSettings, load_github_settings
from rnx.config import GateSettings
from rnx.errors import UserError

DEFAULT_DATABASE_FILE = "rnx-gate.db"


def default_database_url() -> str:
    return f"sqlite:///{Path.cwd() / DEFAULT_DATABASE_FILE}"


@dataclass(frozen=True)
class ServerSettings:
    database_url: str = field(default_factory=default_database_url)
    # PEM text of an Ed25519 or RSA private key that signs receipts; None: the server generates
    # one on first start and keeps it in the database, so every process signs with the same key.
    receipt_key_pem: str | None = None
    max_body_bytes: int = 16 * 1024 * 1024
    max_samples: int = 500_000  # all samples of one document, both sides, all configurations
    timestamp_tolerance_s: int = 300
    # Where users reach the server (for run links in answers); None: taken from each request.
    public_url: str | None = None
    # The gate's thresholds are the server's, never the client's.
    gate: GateSettings = field(default_factory=GateSettings)
    baseline_history: int = 5  # the newest baseline run plus up to this many earlier ones
    resamples: int = 2000
    seed: int = 0
    # Webhook secret, OIDC trust and GitHub App mode (gate_server/github/settings.py).
    github: GitHubSettings = field(default_factory=GitHubSettings)

    def with_database(self, url: str) -> ServerSettings:
        return replace(self, database_url=url)


def _int(env: Mapping[str, str], name: str, default: int, *, minimum: int = 1) -> int:
    raw = env.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise UserError(
            f"{name}={raw!r} is not a whole number; set it like {name}={default}"
        ) from None
    if value < minimum:
        raise UserError(f"{name}={value} must be at least {minimum}")
    return value


def _gate(env: Mapping[str, str]) -> GateSettings:
    names = {
        "RNX_BLOCK_THRESHOLD": "block-threshold",
        "RNX_ROPE": "rope",
        "RNX_PROBABILITY": "probability",
    }
    values = {key: env[name] for name, key in names.items() if env.get(name, "").strip()}
    try:
        return GateSettings.model_validate(values)
    except ValueError as e:
        raise UserError(
            f"bad gate threshold in the environment ({', '.join(names)}): {e}".splitlines()[0]
        ) from None


def _receipt_key(env: Mapping[str, str]) -> str | None:
    if env.get("RNX_RECEIPT_KEY", "").strip():
        return env["RNX_RECEIPT_KEY"]
    path = env.get("RNX_RECEIPT_KEY_FILE", "").strip()
    if not path:
        return None
    try:
        return Path(path).read_text(encoding="ascii")
    except (OSError, UnicodeDecodeError) as e:
        raise UserError(f"cannot read RNX_RECEIPT_KEY_FILE={path}: {e}") from None


def load_settings(env: Mapping[str, str] | None = None) -> ServerSettings:
    """Build the settings from the environment; a bad value is a UserError naming the variable."""
    env = os.environ if env is None else env
    public_url = env.get("RNX_PUBLIC_URL", "").strip().rstrip("/") or None
    if public_url and not public_url.startswith(("http://", "https://")):
        raise UserError(f"RNX_PUBLIC_URL={public_url!r} must start with http:// or https://")
    return ServerSettings(
        database_url=env.get("RNX_DATABASE_URL", "").strip() or default_database_url(),
        receipt_key_pem=_receipt_key(env),
        max_body_bytes=_int(env, "RNX_MAX_BODY_BYTES", ServerSettings.max_body_bytes),
        max_samples=_int(env, "RNX_MAX_SAMPLES", ServerSettings.max_samples),
        timestamp_tolerance_s=_int(
            env, "RNX_TIMESTAMP_TOLERANCE_S", ServerSettings.timestamp_tolerance_s
        ),
        public_url=public_url,
        gate=_gate(env),
        baseline_history=_int(
            env, "RNX_BASELINE_HISTORY", ServerSettings.baseline_history, minimum=0
        ),
        resamples=_int(env, "RNX_RESAMPLES", ServerSettings.resamples, minimum=100),
        seed=_int(env, "RNX_SEED", ServerSettings.seed, minimum=0),
        github=load_github_settings(env),
    )
