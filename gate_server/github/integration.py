"""The GitHub integration's long-lived parts (OIDC key cache, App token cache), one per app."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gate_server.github.oidc import JwksCache, OidcVerifier
from gate_server.github.oidc_login import oidc_principal
from gate_server.github.settings import GitHubSettings
from gate_server.storage import Storage, TokenRecord
from rnx_github.app_auth import GitHubApp


@dataclass
class GitHubIntegration:
    settings: GitHubSettings
    app: GitHubApp | None = None
    oidc: OidcVerifier | None = None
    # Background GitHub writes (App mode) run here, so tests can wait for them.
    pending: list[threading.Thread] = field(default_factory=list)

    @classmethod
    def from_settings(cls, settings: GitHubSettings) -> GitHubIntegration:
        app = GitHubApp(settings.app) if settings.app is not None else None
        oidc = None
        if settings.oidc_audience:
            oidc = OidcVerifier(
                issuer=settings.oidc_issuer,
                audience=settings.oidc_audience,
                jwks=JwksCache(settings.oidc_issuer),
                leeway_s=settings.oidc_leeway_s,
            )
        return cls(settings=settings, app=app, oidc=oidc)

    def oidc_login(self, storage: Storage, token: str) -> TokenRecord:
        """For gate_server.auth.authenticate: a JWT bearer is an OIDC token."""
        if self.oidc is None:
            from gate_server.errors import ApiError

            raise ApiError(
                401,
                "oidc_disabled",
                "this server does not take OIDC tokens (RNX_OIDC_AUDIENCE=off); send a CI token",
                headers={"WWW-Authenticate": "Bearer"},
            )
        return oidc_principal(storage, self.oidc, token)


_LOCK = threading.Lock()


def integration_for(state: Any, settings: GitHubSettings) -> GitHubIntegration:
    """The integration kept on an app's state, built on first use from its settings."""
    with _LOCK:
        found = getattr(state, "github", None)
        if not isinstance(found, GitHubIntegration) or found.settings is not settings:
            found = GitHubIntegration.from_settings(settings)
            state.github = found
        return found


def oidc_login(request: Any) -> Callable[[Storage, str], TokenRecord] | None:
    """What the API's authenticate() calls for a JWT bearer (None when OIDC is off)."""
    from gate_server.services import services

    gh = integration_for(request.app.state, services(request).settings.github)
    return gh.oidc_login
