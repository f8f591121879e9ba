"""The four kinds of channel: what each needs (checked when it is added), what of it may be shown,
and sending one event's message to one channel."""

from __future__ import annotations

import http.client
import ipaddress
import json
import re
import secrets
import smtplib
import ssl
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from gate_server.domain.alerts import email, failures, slack, teams, webhook
from gate_server.domain.alerts.message import absolute_links, compose
from gate_server.errors import InvalidInput

SLACK, TEAMS, EMAIL, WEBHOOK = "slack", "teams", "email", "webhook"
KINDS = (SLACK, TEAMS, EMAIL, WEBHOOK)
HTTP_TIMEOUT_S = 10.0  # Slack and Teams answer within a second or two
_SIGNING_PREFIX = "rnx_whsec_"
_EMAIL = re.compile(r"^[^@\s,<>]+@[^@\s,<>]+\.[^@\s,<>]+$|^[^@\s,<>]+@localhost$")
_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,60}$")


class DeliveryFailed(Exception):
    """A send that did not go through; the message never holds the channel's secrets."""


@dataclass(frozen=True)
class ChannelSpec:
    """A channel to store: `config` may be shown, `secret` never; `shown` stands for it."""

    kind: str
    config: dict[str, Any]
    secret: dict[str, Any] = field(repr=False)
    shown: str


def check_name(name: str) -> str:
    if not _NAME.match(name):
        raise InvalidInput(
            f"channel name {name!r}: use 1 to 60 letters, digits, '.', '_' and '-' only"
        )
    return name


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_url(url: str, what: str) -> str:
    """An https URL (http only to this machine, for a local relay or a test receiver)."""
    url = url.strip()
    parts = urlsplit(url)
    host = parts.hostname or ""
    if not host or parts.scheme not in ("https", "http"):
        raise InvalidInput(f"the {what} must be a URL like https://example.com/hook")
    if parts.scheme == "http" and not _loopback(host):
        raise InvalidInput(
            f"the {what} must use https:// (http:// is taken only for 127.0.0.1 or localhost)"
        )
    return url


def _shown_url(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc.rsplit('@', 1)[-1]}/… (the rest is secret)"


def slack_channel(url: str) -> ChannelSpec:
    url = check_url(url, "Slack incoming-webhook URL")
    return ChannelSpec(SLACK, {}, {"url": url}, _shown_url(url))


def teams_channel(url: str) -> ChannelSpec:
    url = check_url(url, "Teams workflow webhook URL")
    return ChannelSpec(TEAMS, {}, {"url": url}, _shown_url(url))


def webhook_channel(url: str) -> ChannelSpec:
    """A generic webhook; its signing secret is made here and shown to the admin once."""
    url = check_url(url, "webhook URL")
    signing = _SIGNING_PREFIX + secrets.token_urlsafe(32)
    return ChannelSpec(WEBHOOK, {}, {"url": url, "signing_secret": signing}, _shown_url(url))


def email_channel(
    *, host: str, port: int, user: str | None, password: str | None, sender: str, to: list[str]
) -> ChannelSpec:
    if not host.strip() or any(c.isspace() for c in host.strip()):
        raise InvalidInput(f"--smtp-host {host!r} must be a host name, e.g. smtp.example.com")
    if not 1 <= port <= 65_535:
        raise InvalidInput(f"--smtp-port {port} must be a TCP port (587 for STARTTLS)")
    addresses = [a.strip() for a in to if a.strip()]
    for address in [sender, *addresses]:
        if not _EMAIL.match(address):
            raise InvalidInput(f"{address!r} is not an email address like team@example.com")
    if not addresses:
        raise InvalidInput("--to needs at least one address, e.g. --to perf@example.com")
    if user and not password:
        raise InvalidInput(
            "--smtp-user needs its password: give it on standard input or with --secret-file"
        )
    config = {"host": host.strip(), "port": port, "user": user, "sender": sender, "to": addresses}
    shown = f"smtp://{user + '@' if user else ''}{host.strip()}:{port} -> {', '.join(addresses)}"
    return ChannelSpec(EMAIL, config, {"password": password} if password else {}, shown)


def check_email(spec: ChannelSpec) -> None:
    """Connect to the email channel's SMTP server, upgrade with STARTTLS (its certificate
    verified) and log in, sending nothing; InvalidInput naming what failed and the fix."""
    try:
        email.send(None, spec.config, spec.secret.get("password"))
    except (OSError, ValueError, smtplib.SMTPException) as e:
        where = f"{spec.config['host']}:{spec.config['port']}"
        fix = (
            "; for an internal CA, point SSL_CERT_FILE at its PEM bundle for `rnx notify add` "
            "and `rnx serve` alike"
            if isinstance(e, ssl.SSLCertVerificationError)
            else ""
        )
        raise InvalidInput(
            f"the SMTP server {where} failed the check: {failures.smtp(e)}{fix} "
            "(--no-check adds the channel without it)"
        ) from None


def _post(url: str, content: bytes, headers: dict[str, str]) -> None:
    """POST with http.client, not httpx: httpx logs each request's URL at INFO, and here the
    URL is the secret. Redirects are not followed (a redirect is a failure)."""
    parts = urlsplit(url)
    target = parts.path or "/"
    if parts.query:
        target += "?" + parts.query
    conn: http.client.HTTPConnection
    if parts.scheme == "https":
        context = ssl.create_default_context()
        conn = http.client.HTTPSConnection(
            parts.hostname or "", parts.port, timeout=HTTP_TIMEOUT_S, context=context
        )
    else:
        conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=HTTP_TIMEOUT_S)
    try:
        conn.request("POST", target, body=content, headers=headers)
        answer = conn.getresponse()
        text = answer.read(200).decode("utf-8", "replace")
    except (OSError, http.client.HTTPException) as e:
        raise DeliveryFailed(failures.transport(e)) from None
    finally:
        conn.close()
    if not 200 <= answer.status < 300:
        raise DeliveryFailed(failures.http_status(answer.status, text))


def _send(
    kind: str,
    config: dict[str, Any],
    secret: dict[str, Any],
    facts: dict[str, Any],
    did: str,
    public_url: str | None,
) -> None:
    message = compose(facts, public_url)
    if kind == SLACK:
        data = json.dumps(slack.payload(message, did)).encode()
        _post(secret["url"], data, {"Content-Type": "application/json"})
    elif kind == TEAMS:
        data = json.dumps(teams.payload(message, did)).encode()
        _post(secret["url"], data, {"Content-Type": "application/json"})
    elif kind == WEBHOOK:
        links = absolute_links(facts.get("links") or {}, public_url)
        data = webhook.body(message, did, {**facts, "links": links})
        signed = webhook.headers(secret["signing_secret"], facts["event"], did, data)
        _post(secret["url"], data, signed)
    elif kind == EMAIL:
        try:
            email.send(email.compose(message, did, config), config, secret.get("password"))
        except (OSError, ValueError, smtplib.SMTPException) as e:
            raise DeliveryFailed(failures.smtp(e)) from None
    else:
        raise DeliveryFailed(f"unknown channel kind {kind!r}")


def send(
    kind: str,
    config: dict[str, Any],
    secret: dict[str, Any],
    facts: dict[str, Any],
    delivery_id: str,
    *,
    public_url: str | None,
) -> None:
    """Send one event (its stored facts) to one channel, links absolute under `public_url`;
    DeliveryFailed, in words of our own (gate_server/domain/alerts/failures.py), when it does not go
    through."""
    _send(kind, config, secret, facts, delivery_id, public_url)
