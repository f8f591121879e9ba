"""What request handlers share, built once when the app starts and kept on the app's state."""

from __future__ import annotations

from dataclasses import dataclass, field

from starlette.requests import Request

from gate_server.dashboard.state import DashboardState
from gate_server.db import Database, open_database
from gate_server.domain.alerts.traffic import ChannelTraffic
from gate_server.domain.receipts import ReceiptSigner, load_signer
from gate_server.domain.stored_documents import StoredDocuments
from gate_server.github.integration import GitHubIntegration
from gate_server.settings import ServerSettings


@dataclass(frozen=True)
class Services:
    settings: ServerSettings
    # Uploads reach it in the event loop, where its statements are awaited
    # (gate_server/http/api.py).
    database: Database
    signer: ReceiptSigner  # signs receipts
    github: GitHubIntegration  # webhook secret, OIDC verifier, GitHub App (each when set)
    dashboard: DashboardState  # session signer and run-summary cache
    # Baseline documents parsed once per process, not on every upload that is gated with them.
    documents: StoredDocuments
    # Which alert channels may be sent to now (one send each at a time, hung ones parked).
    traffic: ChannelTraffic = field(default_factory=ChannelTraffic)

    @classmethod
    def start(cls, settings: ServerSettings) -> Services:
        """Open (and migrate) the database and build everything the handlers use."""
        database = open_database(settings.database_url, settings.secret_keys)
        try:
            return cls(
                settings=settings,
                database=database,
                signer=load_signer(database, settings.receipt_key_pem),
                github=GitHubIntegration.from_settings(settings),
                dashboard=DashboardState.load(database, settings.summary_cache_mb << 20),
                documents=StoredDocuments(settings.document_cache_mb * 1024 * 1024),
            )
        except BaseException:
            database.close()
            raise

    def close(self) -> None:
        """Close what start() opened. In the event loop, through run_in_event_loop
        (gate_server/db/engine.py): the database's awaited pool awaits its connections' closing."""
        self.github.close()
        self.database.close()


def services(request: Request) -> Services:
    found: Services = request.app.state.services
    return found
