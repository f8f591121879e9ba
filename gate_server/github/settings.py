"""The GitHub integration's settings, from RNX_* environment variables (read here only)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from gate_server.github.oidc import DEFAULT_ISSUER
from rnx.errors import UserError
from rnx_github.app_auth import AppCredentials
from rnx_github.client import DEFAULT_API_URL

DEFAULT_AUDIENCE = "kernalin"


@dataclass(frozen=True)
class GitHubSettings:
    # The webhook answers 503 until a secret is set: an unverifiable webhook is never acted on.
    webhook_secret: str | None = None
    # The audience the action asks GitHub for (action/upload.py); RNX_OIDC_AUDIENCE=off turns
    # OIDC uploads off.
    oidc_issuer: str = DEFAULT_ISSUER
    oidc_audience: str | None = DEFAULT_AUDIENCE
    oidc_leeway_s: int = 60
    # App mode is off unless both the App id and its private key are set.
    app: AppCredentials | None = None
    api_url: str = DEFAULT_API_URL


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
        raise UserError(f"cannot read {name}_FILE={path}: {e}") from None


def _url(env: Mapping[str, str], name: str, default: str) -> str:
    value = env.get(name, "").strip().rstrip("/") or default
    if not value.startswith(("https://", "http://")):
        raise UserError(f"{name}={value!r} must be a URL starting with https://")
    return value


def _audience(raw: str) -> str | None:
    value = raw.strip() or DEFAULT_AUDIENCE
    return None if value.lower() == "off" else value


def load_github_settings(env: Mapping[str, str] | None = None) -> GitHubSettings:
    env = os.environ if env is None else env
    api_url = _url(env, "RNX_GITHUB_API_URL", DEFAULT_API_URL)
    app_id = env.get("RNX_GITHUB_APP_ID", "").strip()
    key = _secret(env, "RNX_GITHUB_APP_PRIVATE_KEY")
    if bool(app_id) != bool(key):
        raise UserError(
            "GitHub App mode needs both RNX_GITHUB_APP_ID and RNX_GITHUB_APP_PRIVATE_KEY "
            "(or RNX_GITHUB_APP_PRIVATE_KEY_FILE); set both, or neither to turn it off"
        )
    if app_id and not app_id.isdigit():
        raise UserError(f"RNX_GITHUB_APP_ID={app_id!r} must be the App's numeric id")
    if key and "PRIVATE KEY" not in key:
        raise UserError("RNX_GITHUB_APP_PRIVATE_KEY must be the App's PEM private key")
    leeway_raw = env.get("RNX_OIDC_LEEWAY_S", "").strip() or "60"
    if not leeway_raw.isdigit() or int(leeway_raw) > 300:
        raise UserError(f"RNX_OIDC_LEEWAY_S={leeway_raw!r} must be whole seconds, at most 300")
    return GitHubSettings(
        webhook_secret=_secret(env, "RNX_GITHUB_WEBHOOK_SECRET"),
        oidc_issuer=_url(env, "RNX_OIDC_ISSUER", DEFAULT_ISSUER),
        oidc_audience=_audience(env.get("RNX_OIDC_AUDIENCE", "")),
        oidc_leeway_s=int(leeway_raw),
        app=AppCredentials(app_id, key, api_url) if app_id and key else None,
        api_url=api_url,
    )
