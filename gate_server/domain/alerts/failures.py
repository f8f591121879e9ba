"""Why a delivery failed, in words of our own: never the receiver's reply, never its URL.

A receiver's error page may repeat the request's URL, and the URL of a Slack or Teams hook
(path and query: `?sig=...`) is the channel's secret; so what is kept and shown (dashboard,
`rnx notify list`, the log, the outbox rows, the channel-failing alert) is a fixed text chosen
by the kind of failure: the HTTP status and its standard phrase, or the transport's failure.
"""

from __future__ import annotations

import http
import http.client
import smtplib
import socket
import ssl

# Slack answers these exact words for a hook it refuses (api.slack.com, incoming webhooks'
# errors): naming one tells the admin what to fix and holds nothing of the URL.
SLACK_ERRORS = frozenset(
    {
        "invalid_payload",
        "user_not_found",
        "channel_not_found",
        "channel_is_archived",
        "action_prohibited",
        "posting_to_general_channel_denied",
        "too_many_attachments",
        "no_service",
        "no_service_id",
        "no_team",
        "team_disabled",
        "invalid_token",
    }
)


def http_status(status: int, reply: str) -> str:
    """A non-2xx answer: its status and standard phrase (and a known Slack error word)."""
    try:
        phrase = http.HTTPStatus(status).phrase
    except ValueError:
        phrase = "non-standard status"
    word = reply.strip()
    known = f" ({word})" if word in SLACK_ERRORS else ""
    return f"HTTP {status} {phrase}{known}"


TIMEOUT = "no answer in time (timeout)"


def transport(error: BaseException) -> str:
    """A request that got no usable answer: what kind of failure, in fixed words."""
    if isinstance(error, (TimeoutError, socket.timeout)):
        return TIMEOUT
    if isinstance(error, ssl.SSLCertVerificationError):
        return "TLS: the receiver's certificate is not trusted (docs/alerts.md: SSL_CERT_FILE)"
    if isinstance(error, ssl.SSLError):
        return "TLS handshake failed"
    if isinstance(error, socket.gaierror):
        return "the host name does not resolve (DNS)"
    if isinstance(error, ConnectionRefusedError):
        return "connection refused"
    if isinstance(error, (ConnectionResetError, ConnectionAbortedError, BrokenPipeError)):
        return "the connection was closed by the receiver"
    if isinstance(error, http.client.HTTPException):
        return "not a well-formed HTTP answer"
    if isinstance(error, OSError):
        return f"network error ({type(error).__name__})"
    return f"delivery error ({type(error).__name__})"


def smtp(error: BaseException) -> str:
    """An SMTP failure: its kind and the server's reply code, never the reply's text."""
    if isinstance(error, smtplib.SMTPAuthenticationError):
        return f"SMTP: login refused (code {error.smtp_code})"
    if isinstance(error, smtplib.SMTPRecipientsRefused):
        return f"SMTP: {len(error.recipients)} recipient(s) refused"
    if isinstance(error, smtplib.SMTPSenderRefused):
        return f"SMTP: sender refused (code {error.smtp_code})"
    if isinstance(error, smtplib.SMTPNotSupportedError):
        return "SMTP: the server does not offer STARTTLS (alerts are never sent in clear text)"
    if isinstance(error, smtplib.SMTPServerDisconnected):
        return "SMTP: the server closed the connection"
    if isinstance(error, smtplib.SMTPResponseException):
        return f"SMTP: refused (code {error.smtp_code})"
    if isinstance(error, smtplib.SMTPException):
        return f"SMTP error ({type(error).__name__})"
    if isinstance(error, OSError):  # before ValueError: a TLS verify error is both
        return transport(error)
    if isinstance(error, ValueError):
        return "SMTP: the message could not be built"
    return transport(error)
