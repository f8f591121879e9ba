"""What the dashboard keeps per server process: its session signer, the run-summary cache and
the hardware comparisons lately worked out."""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field

from gate_server.dashboard.hardware import Comparisons
from gate_server.dashboard.sessions import SessionSigner
from gate_server.dashboard.views import SummaryCache
from gate_server.db import Database
from gate_server.domain.server_keys import stored_key

# The HMAC key of the session cookies is kept in the database, so every server process
# accepts every other's cookies.
SESSION_KEY_NAME = "dashboard-session"


@dataclass(frozen=True)
class DashboardState:
    signer: SessionSigner
    summaries: SummaryCache = field(default_factory=SummaryCache)
    comparisons: Comparisons = field(default_factory=Comparisons)  # /hardware's, kept

    @classmethod
    def load(cls, database: Database, summary_cache_bytes: int = 64 << 20) -> DashboardState:
        key = stored_key(database, SESSION_KEY_NAME, lambda: secrets.token_hex(32))
        return cls(SessionSigner(bytes.fromhex(key)), SummaryCache(summary_cache_bytes))
