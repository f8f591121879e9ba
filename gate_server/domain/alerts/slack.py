"""Slack: an incoming webhook's JSON, `text` (the fallback notifications show) and `blocks`
(https://api.slack.com/messaging/webhooks, https://api.slack.com/reference/block-kit/blocks)."""

from __future__ import annotations

from typing import Any

from gate_server.domain.alerts.message import Message

_HEADER_CHARS = 150  # Slack's limit for a header block's text
_FIELD_CHARS = 2000  # a section field's text
_TEXT_CHARS = 3000  # a section's text
_MAX_FIELDS = 10  # fields per section


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _escape(text: str) -> str:
    """mrkdwn's three control characters (https://api.slack.com/reference/surfaces/formatting)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _link(label: str, url: str) -> str:
    # Slack links only absolute URLs; a path (no RNX_PUBLIC_URL) is shown as text.
    if url.startswith(("https://", "http://")):
        return f"<{url}|{_escape(label)}>"
    return f"{_escape(label)}: {_escape(url)}"


def payload(message: Message, delivery_id: str) -> dict[str, Any]:
    fields = [
        {"type": "mrkdwn", "text": _clip(f"*{_escape(k)}*\n{_escape(v)}", _FIELD_CHARS)}
        for k, v in message.facts[:_MAX_FIELDS]
    ]
    blocks: list[dict[str, Any]] = [
        {
            "type": "header",
            "text": {"type": "plain_text", "text": _clip(message.title, _HEADER_CHARS)},
        },
        {
            "type": "section",
            "text": {"type": "mrkdwn", "text": _clip(_escape(message.summary), _TEXT_CHARS)},
        },
        {"type": "section", "fields": fields},
    ]
    links: list[str] = []
    for label, url in message.links:
        # Whole links only (a clipped one breaks Slack's <url|label>): those that fit the text.
        if len(" | ".join([*links, _link(label, url)])) <= _TEXT_CHARS:
            links.append(_link(label, url))
    if links:
        blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": " | ".join(links)}})
    blocks.append(
        {
            "type": "context",
            "elements": [
                {"type": "mrkdwn", "text": f"kernalin {message.event} · delivery {delivery_id}"}
            ],
        }
    )
    # `text` is what notifications show, and Slack parses it as mrkdwn too: escaped like the
    # blocks, a branch named `release/<!channel>` mentions nobody and `<url|label>` links nothing.
    return {"text": _escape(f"{message.title}: {message.summary}"), "blocks": blocks}
