"""The GitHub integration's long-lived parts (OIDC key cache, App token cache), one per app."""

from __future__ import annotations

from dataclasses import dataclass, field

from gate_server.db import Database
from gate_server.db.tokens import TokenRecord
from gate_server.errors import Unauthenticated
from gate_server.github.oidc import JwksCache, OidcVerifier
from gate_server.github.oidc_login import oidc_principal
from gate_server.settings import ServerSettings
from rnx_github.app_auth import GitHubApp


@dataclass(frozen=True)
class GitHubIntegration:
    webhook_secret: str | None = field(default=None, repr=False)  # None: the webhook answers 503
    app: GitHubApp | None = None  # None: App mode is off
    oidc: OidcVerifier | None = None  # None: OIDC uploads are off

    @classmethod
    def from_settings(cls, settings: ServerSettings) -> GitHubIntegration:
        app = GitHubApp(settings.github_app) if settings.github_app is not None else None
        oidc = None
        if settings.oidc_audience:
            oidc = OidcVerifier(
                issuer=settings.oidc_issuer,
                audience=settings.oidc_audience,
                jwks=JwksCache(settings.oidc_issuer),
                leeway_s=settings.oidc_leeway_s,
            )
        return cls(webhook_secret=settings.github_webhook_secret, app=app, oidc=oidc)

    def oidc_login(self, database: Database, token: str) -> TokenRecord:
        """For gate_server.domain.auth.authenticate: a JWT bearer is an OIDC token."""
        if self.oidc is None:
            raise Unauthenticated(
                "this server does not take OIDC tokens (RNX_OIDC_AUDIENCE=off); send a CI token",
                code="oidc_disabled",
            )
        return oidc_principal(database, self.oidc, token)

    def close(self) -> None:
        if self.app is not None:
            self.app.close()
