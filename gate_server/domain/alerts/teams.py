"""Microsoft Teams: a Workflows webhook ("Post to a channel when a webhook request is
received") takes a message whose one attachment is an Adaptive Card
(https://learn.microsoft.com/en-us/connectors/teams/#microsoft-teams-webhook,
https://adaptivecards.io/explorer/)."""

from __future__ import annotations

from typing import Any

from gate_server.domain.alerts.message import Message

CARD_CONTENT_TYPE = "application/vnd.microsoft.card.adaptive"
CARD_SCHEMA = "http://adaptivecards.io/schemas/adaptive-card.json"
CARD_VERSION = "1.4"  # what Teams renders everywhere (desktop, web, mobile)


def _inert(text: str) -> str:
    """Text Teams renders as Markdown, with its one active construct, a link `[text](url)`,
    broken by a zero-width space: a name or reason someone chose cannot disguise a link."""
    return text.replace("](", "]\u200b(")


def card(message: Message, delivery_id: str) -> dict[str, Any]:
    body: list[dict[str, Any]] = [
        {
            "type": "TextBlock",
            "text": _inert(message.title),
            "weight": "Bolder",
            "size": "Medium",
            "wrap": True,
            # No "style": "heading": that is Adaptive Card 1.5, and the card declares 1.4
            # (tests/data/vendor/adaptive-card-1.4.json checks it).
        },
        {"type": "TextBlock", "text": _inert(message.summary), "wrap": True},
        {
            "type": "FactSet",
            "facts": [{"title": k, "value": _inert(v)} for k, v in message.facts],
        },
    ]
    # Action.OpenUrl needs an absolute URL; paths (no RNX_PUBLIC_URL) are shown as facts.
    actions = [
        {"type": "Action.OpenUrl", "title": label, "url": url}
        for label, url in message.links
        if url.startswith(("https://", "http://"))
    ]
    paths = [(label, url) for label, url in message.links if not url.startswith("http")]
    if paths:
        body.append({"type": "FactSet", "facts": [{"title": k, "value": v} for k, v in paths]})
    body.append(
        {
            "type": "TextBlock",
            "text": f"kernalin {message.event} · delivery {delivery_id}",
            "size": "Small",
            "isSubtle": True,
            "wrap": True,
        }
    )
    content: dict[str, Any] = {
        "$schema": CARD_SCHEMA,
        "type": "AdaptiveCard",
        "version": CARD_VERSION,
        "body": body,
    }
    if actions:
        content["actions"] = actions
    return content


def payload(message: Message, delivery_id: str) -> dict[str, Any]:
    return {
        "type": "message",
        "attachments": [
            {
                "contentType": CARD_CONTENT_TYPE,
                "contentUrl": None,
                "content": card(message, delivery_id),
            }
        ],
    }
