"""The server process's settings: one model, read from the RNX_* environment here and nowhere else.

Bounds come from what uses the value (the statistics' own minimum of resamples, TCP's ports);
a bad value is a SettingsError naming the variable, which `rnx serve` prints as one line.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path

from gate_server.errors import SettingsError
from gate_server.numbers import whole_number
from rnx.config import GateSettings
from rnx_github.app_auth import AppCredentials
from rnx_github.client import DEFAULT_API_URL
from stats import MIN_RESAMPLES

DEFAULT_DATABASE_FILE = "rnx-gate.db"
DEFAULT_OIDC_AUDIENCE = "kernalin"
DEFAULT_WEB_URL = "https://github.com"

# GitHub Actions' OIDC issuer (RNX_OIDC_ISSUER overrides it, for a test issuer).
DEFAULT_ISSUER = "https://token.actions.githubusercontent.com"


def default_database_url() -> str:
    return f"sqlite:///{Path.cwd() / DEFAULT_DATABASE_FILE}"


# Whole-number settings: field -> (variable, least, most). Checked for values from the
# environment and for settings built in code alike.
_WHOLE_NUMBERS: dict[str, tuple[str, int, int | None]] = {
    "port": ("RNX_PORT", 1, 65_535),
    "max_body_bytes": ("RNX_MAX_BODY_BYTES", 1, None),
    "max_samples": ("RNX_MAX_SAMPLES", 1, None),
    "timestamp_tolerance_s": ("RNX_TIMESTAMP_TOLERANCE_S", 1, None),
    "baseline_history": ("RNX_BASELINE_HISTORY", 0, None),
    # The statistics refuse fewer resamples (stats.MIN_RESAMPLES): a server started with fewer
    # would answer every upload that has a baseline with a 500.
    "resamples": ("RNX_RESAMPLES", MIN_RESAMPLES, None),
    "seed": ("RNX_SEED", 0, None),
    "oidc_leeway_s": ("RNX_OIDC_LEEWAY_S", 0, 300),
    # The outbox worker (gate_server/jobs/worker.py): how often an idle one looks for due jobs, and
    # how long a claimed job is its own before another process may take it over.
    "outbox_poll_ms": ("RNX_OUTBOX_POLL_MS", 10, 60_000),
    "outbox_lease_s": ("RNX_OUTBOX_LEASE_S", 1, 86_400),
    # Parsed baseline documents kept in memory per process (gate_server/domain/stored_documents.py).
    "document_cache_mb": ("RNX_DOCUMENT_CACHE_MB", 0, None),
    # The dashboard's run summaries kept in memory per process (gate_server/dashboard/views.py).
    "summary_cache_mb": ("RNX_SUMMARY_CACHE_MB", 0, None),
    # Bisection of change points in App mode (gate_server/domain/bisection/, docs/bisection.md):
    # workflow runs dispatched at once per repository, and measurements per bisection (0: off).
    "bisect_in_flight": ("RNX_BISECT_IN_FLIGHT", 1, 100),
    "bisect_budget": ("RNX_BISECT_BUDGET", 0, 100),
    # Auto-sync in App mode (gate_server/domain/autosync/, docs/auto-sync.md): its own dispatches in
    # flight per repository (0: off), a baseline run at least every N commits of a linked
    # branch (0: never for that reason; compare-commits counts at most 250), and how long a
    # push's head waits for the run of the push's own workflow before it is dispatched.
    "autosync_in_flight": ("RNX_AUTOSYNC_IN_FLIGHT", 0, 100),
    "autosync_every": ("RNX_AUTOSYNC_EVERY", 0, 250),
    "autosync_wait_s": ("RNX_AUTOSYNC_WAIT_S", 0, 86_400),
}


@dataclass(frozen=True)
class ServerSettings:
    # repr=False on every field that can hold a secret (a database password, keys, the webhook
    # secret): settings end up in tracebacks and logs, secrets never.
    database_url: str = field(default_factory=default_database_url, repr=False)
    # Where `rnx serve` listens (its --host / --port flags override these).
    host: str = "127.0.0.1"
    port: int = 8000
    # PEM text of an Ed25519 or RSA private key that signs receipts; None: the server generates
    # one on first start and keeps it in the database, so every process signs with the same key.
    receipt_key_pem: str | None = field(default=None, repr=False)
    max_body_bytes: int = 16 * 1024 * 1024
    max_samples: int = 500_000  # all samples of one document, both sides, all configurations
    timestamp_tolerance_s: int = 300
    # Where users reach the server (for run links in answers); None: taken from each request.
    public_url: str | None = None
    # The gate's thresholds are the server's, never the client's.
    gate: GateSettings = field(default_factory=GateSettings)
    baseline_history: int = 5  # the newest baseline run plus up to this many earlier ones
    resamples: int = MIN_RESAMPLES
    seed: int = 0
    # The GitHub webhook answers 503 until a secret is set: an unverifiable delivery is never
    # acted on.
    github_webhook_secret: str | None = field(default=None, repr=False)
    # OIDC uploads: the audience the action asks GitHub for (action/upload.py); None (the
    # variable set to "off") turns OIDC uploads off.
    oidc_issuer: str = DEFAULT_ISSUER
    oidc_audience: str | None = DEFAULT_OIDC_AUDIENCE
    oidc_leeway_s: int = 60
    # GitHub App mode: off unless both the App id and its private key are set.
    github_app: AppCredentials | None = None
    github_api_url: str = DEFAULT_API_URL
    # Signing in to the dashboard with GitHub (gate_server/github/oauth.py): the App's OAuth
    # client; None: people sign in with viewer tokens only. GitHub's web host, where people
    # authorize (GitHub Enterprise Server: https://HOST).
    github_oauth: OAuthClient | None = None
    github_web_url: str = DEFAULT_WEB_URL
    outbox_poll_ms: int = 1000
    outbox_lease_s: int = 300
    document_cache_mb: int = 256  # 0: parse every baseline document on every upload
    summary_cache_mb: int = 64  # 0: read each run's document on every page view
    # Look for change points in baseline history after every baseline run
    # (gate_server/domain/change_points.py).
    detect_changes: bool = True
    bisect_in_flight: int = 2
    bisect_budget: int = 8  # 0 turns bisection off
    # The repository's benchmark workflow file that bisection dispatches (`rnx init` writes it).
    bisect_workflow: str = "kernalin.yml"
    autosync_in_flight: int = 2  # 0 turns auto-sync off
    autosync_every: int = 20
    autosync_wait_s: int = 3600
    # Keys that encrypt stored secrets (gate_server/db/sealed.py), newest first; () keeps them
    # plain.
    secret_keys: tuple[str, ...] = field(default=(), repr=False)

    def __post_init__(self) -> None:
        for f in fields(self):
            if f.name in _WHOLE_NUMBERS:
                _check_bounds(f.name, getattr(self, f.name))
        if self.github_oauth is not None and (self.github_app is None or not self.public_url):
            # The callback GitHub redirects to must be the public URL, and only the App's
            # installations can say what a person may read.
            raise SettingsError(
                "signing in with GitHub (RNX_GITHUB_OAUTH_CLIENT_ID) needs GitHub App mode "
                "(RNX_GITHUB_APP_ID and RNX_GITHUB_APP_PRIVATE_KEY) and RNX_PUBLIC_URL; set "
                "them, or unset RNX_GITHUB_OAUTH_CLIENT_ID"
            )


def _check_bounds(name: str, value: int) -> None:
    variable, least, most = _WHOLE_NUMBERS[name]
    if value < least:
        raise SettingsError(f"{variable}={value} must be at least {least}")
    if most is not None and value > most:
        raise SettingsError(f"{variable}={value} must be at most {most}")


def _whole_numbers(env: Mapping[str, str]) -> dict[str, int]:
    """The whole-number settings the environment sets (bounds are checked by ServerSettings)."""
    out = {}
    for name, (variable, _, _) in _WHOLE_NUMBERS.items():
        raw = env.get(variable, "").strip()
        if not raw:
            continue
        try:
            out[name] = int(raw)
        except ValueError:
            default = getattr(ServerSettings, name)
            raise SettingsError(
                f"{variable}={raw!r} is not a whole number; set it like {variable}={default}"
            ) from None
        _check_bounds(name, out[name])
    return out


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
        raise SettingsError(
            f"bad gate threshold in the environment ({', '.join(names)}): {e}".splitlines()[0]
        ) from None


def _secret(env: Mapping[str, str], name: str) -> str | None:
    """A secret given inline (NAME) or as a file (NAME_FILE), as container secrets usually are."""
    inline = env.get(name, "")
    if inline.strip():
        return inline
    path = env.get(f"{name}_FILE", "").strip()
    if not path:
        return None
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise SettingsError(f"cannot read {name}_FILE={path}: {e}") from None


def secret_keys(env: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """RNX_SECRET_KEY (or RNX_SECRET_KEY_FILE): Fernet keys separated by commas or whitespace,
    the one that encrypts first; every command that opens the database needs them."""
    found = _secret(os.environ if env is None else env, "RNX_SECRET_KEY") or ""
    return tuple(k for k in found.replace(",", " ").split() if k)


def _url(env: Mapping[str, str], name: str, default: str | None) -> str | None:
    value = env.get(name, "").strip().rstrip("/") or default
    if value is not None and not value.startswith(("https://", "http://")):
        raise SettingsError(f"{name}={value!r} must be a URL starting with https:// or http://")
    return value


@dataclass(frozen=True)
class OAuthClient:
    """The GitHub App's OAuth client (its settings page: "Client ID", "Client secrets")."""

    client_id: str
    client_secret: str = field(repr=False)


def _github_oauth(env: Mapping[str, str]) -> OAuthClient | None:
    client_id = env.get("RNX_GITHUB_OAUTH_CLIENT_ID", "").strip()
    secret = (_secret(env, "RNX_GITHUB_OAUTH_CLIENT_SECRET") or "").strip()
    if bool(client_id) != bool(secret):
        raise SettingsError(
            "signing in with GitHub needs both RNX_GITHUB_OAUTH_CLIENT_ID and "
            "RNX_GITHUB_OAUTH_CLIENT_SECRET (or RNX_GITHUB_OAUTH_CLIENT_SECRET_FILE); set both, "
            "or neither to turn it off"
        )
    if client_id and not re.fullmatch(r"[A-Za-z0-9._-]{1,100}", client_id):
        raise SettingsError(f"RNX_GITHUB_OAUTH_CLIENT_ID={client_id!r} is not a client id")
    return OAuthClient(client_id, secret) if client_id else None


def _github_app(env: Mapping[str, str], api_url: str) -> AppCredentials | None:
    app_id = env.get("RNX_GITHUB_APP_ID", "").strip()
    key = _secret(env, "RNX_GITHUB_APP_PRIVATE_KEY")
    if bool(app_id) != bool(key):
        raise SettingsError(
            "GitHub App mode needs both RNX_GITHUB_APP_ID and RNX_GITHUB_APP_PRIVATE_KEY "
            "(or RNX_GITHUB_APP_PRIVATE_KEY_FILE); set both, or neither to turn it off"
        )
    if not app_id or not key:
        return None
    if whole_number(app_id) is None:
        raise SettingsError(f"RNX_GITHUB_APP_ID={app_id!r} must be the App's numeric id")
    if "PRIVATE KEY" not in key:
        raise SettingsError("RNX_GITHUB_APP_PRIVATE_KEY must be the App's PEM private key")
    return AppCredentials(app_id, key, api_url)


def _oidc_audience(env: Mapping[str, str]) -> str | None:
    value = env.get("RNX_OIDC_AUDIENCE", "").strip() or DEFAULT_OIDC_AUDIENCE
    return None if value.lower() == "off" else value


def _on_off(env: Mapping[str, str], name: str, *, default: bool) -> bool:
    raw = env.get(name, "").strip().lower()
    if not raw:
        return default
    if raw in ("on", "true", "1", "yes"):
        return True
    if raw in ("off", "false", "0", "no"):
        return False
    raise SettingsError(f"{name}={raw!r} must be on or off")


def load_settings(env: Mapping[str, str] | None = None) -> ServerSettings:
    """The settings from the environment; a bad value is a SettingsError naming the variable."""
    env = os.environ if env is None else env
    api_url = _url(env, "RNX_GITHUB_API_URL", DEFAULT_API_URL) or DEFAULT_API_URL
    return ServerSettings(
        database_url=(_secret(env, "RNX_DATABASE_URL") or "").strip() or default_database_url(),
        host=env.get("RNX_HOST", "").strip() or ServerSettings.host,
        receipt_key_pem=_secret(env, "RNX_RECEIPT_KEY"),
        public_url=_url(env, "RNX_PUBLIC_URL", None),
        gate=_gate(env),
        github_webhook_secret=_secret(env, "RNX_GITHUB_WEBHOOK_SECRET"),
        oidc_issuer=_url(env, "RNX_OIDC_ISSUER", DEFAULT_ISSUER) or DEFAULT_ISSUER,
        oidc_audience=_oidc_audience(env),
        github_app=_github_app(env, api_url),
        github_api_url=api_url,
        github_oauth=_github_oauth(env),
        github_web_url=_url(env, "RNX_GITHUB_WEB_URL", DEFAULT_WEB_URL) or DEFAULT_WEB_URL,
        detect_changes=_on_off(env, "RNX_DETECT_CHANGES", default=True),
        bisect_workflow=env.get("RNX_BISECT_WORKFLOW", "").strip() or "kernalin.yml",
        secret_keys=secret_keys(env),
        **_whole_numbers(env),
    )
