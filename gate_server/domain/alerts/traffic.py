"""Which channels this process may send to now: at most one send per channel at a time, and a
channel whose last send got no answer in time is parked for PARK_S. So a receiver that accepts
connections and never answers costs one timeout per park, not one per queued alert, and holds
up one delivery lane while the others send to every other channel.

Kept in memory: each server process learns of a hung receiver by its own first timeout."""

from __future__ import annotations

import threading
import time
from datetime import datetime, timedelta

from gate_server.clock import utcnow

PARK_S = 60.0


class ChannelTraffic:
    def __init__(self, park_s: float = PARK_S) -> None:
        self.park_s = park_s
        self._lock = threading.Lock()
        self._sending: set[int] = set()
        self._parked: dict[int, float] = {}  # channel id -> time.monotonic() it may send again

    def enter(self, channel_id: int) -> str | None:
        """None: send now (call leave() after); else why not, in fixed words."""
        with self._lock:
            until = self._parked.get(channel_id, 0.0)
            now = time.monotonic()
            if now < until:
                again: datetime = utcnow() + timedelta(seconds=until - now)
                return (
                    "not tried: the channel's last send got no answer in time; "
                    f"sends resume at {again.isoformat(timespec='seconds')}"
                )
            if channel_id in self._sending:
                return "not tried yet: another send to the channel is under way"
            self._sending.add(channel_id)
            return None

    def leave(self, channel_id: int, *, timed_out: bool) -> None:
        with self._lock:
            self._sending.discard(channel_id)
            if timed_out:
                self._parked[channel_id] = time.monotonic() + self.park_s
            else:
                self._parked.pop(channel_id, None)
