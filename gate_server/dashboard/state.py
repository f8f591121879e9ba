"""What the dashboard keeps per server process: its session signer and the run-summary cache."""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field

from gate_server.dashboard.sessions import SessionSigner
from gate_server.dashboard.views import SummaryCache
from gate_server.db import Database
from gate_server.server_keys import stored_key

# The HMAC key of the session cookies is kept in the database, so every server process
# accepts every other's cookies.
SESSION_KEY_NAME = "dashboard-session"


@dataclass(frozen=True)
class DashboardState:
    signer: SessionSigner
    summaries: SummaryCache = field(default_factory=SummaryCache)

    @classmethod
    def load(cls, database: Database) -> DashboardState:
        key = stored_key(database, SESSION_KEY_NAME, lambda: secrets.token_hex(32))
        return cls(SessionSigner(bytes.fromhex(key)))
