"""The server's one clock: timezone-aware UTC, which is what every stored time is."""

from __future__ import annotations

from datetime import datetime, timezone


def utcnow() -> datetime:
    return datetime.now(timezone.utc)
