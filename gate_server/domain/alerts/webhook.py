"""The generic webhook: a JSON body signed like the server's uploads, HMAC-SHA256 over
"timestamp.body" keyed by the channel's signing secret (docs/alerts.md shows how a receiver
verifies it and deduplicates by delivery id)."""

from __future__ import annotations

import json
import time
from typing import Any

from gate_server.domain.alerts.message import Message
from gate_server.domain.auth import sign_upload

EVENT_HEADER = "X-Kernalin-Event"
DELIVERY_HEADER = "X-Kernalin-Delivery"
TIMESTAMP_HEADER = "X-Kernalin-Timestamp"
SIGNATURE_HEADER = "X-Kernalin-Signature"
FORMAT_VERSION = 1


def body(message: Message, delivery_id: str, facts: dict[str, Any]) -> bytes:
    """The JSON body: the event's facts (links absolute under RNX_PUBLIC_URL), and the message
    as text."""
    document = {
        "version": FORMAT_VERSION,
        "event": message.event,
        "delivery_id": delivery_id,
        "event_id": facts.get("event_id"),
        "title": message.title,
        "summary": message.summary,
        "text": message.text(),
        "data": {k: v for k, v in facts.items() if k not in ("event", "event_id")},
    }
    return json.dumps(document, sort_keys=True).encode("utf-8")


def headers(
    signing_secret: str, event: str, delivery_id: str, data: bytes, *, now: float | None = None
) -> dict[str, str]:
    timestamp = str(int(time.time() if now is None else now))
    return {
        "Content-Type": "application/json",
        EVENT_HEADER: event,
        DELIVERY_HEADER: delivery_id,
        TIMESTAMP_HEADER: timestamp,
        SIGNATURE_HEADER: sign_upload(signing_secret, timestamp, data),
    }
