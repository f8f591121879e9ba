"""Email: a plain-text message sent over SMTP, always upgraded with STARTTLS (the server's
certificate verified) and logged in when the channel has a user."""

from __future__ import annotations

import smtplib
import ssl
from email.message import EmailMessage
from email.utils import formatdate
from typing import Any

from gate_server.domain.alerts.message import Message

SMTP_TIMEOUT_S = 20.0


def compose(message: Message, delivery_id: str, config: dict[str, Any]) -> EmailMessage:
    mail = EmailMessage()
    # One line: a header never carries a line break from a name someone chose.
    mail["Subject"] = " ".join(f"[kernalin] {message.title}".split())
    mail["From"] = config["sender"]
    mail["To"] = ", ".join(config["to"])
    mail["Date"] = formatdate(usegmt=True)
    # The delivery id makes the Message-ID: a mail sent twice after a crash is one message to
    # clients that thread by it, and a receiver can deduplicate by the header.
    mail["Message-ID"] = f"<{delivery_id}@kernalin>"
    mail["X-Kernalin-Event"] = message.event
    mail["X-Kernalin-Delivery"] = delivery_id
    mail.set_content(message.text() + f"\n--\nkernalin {message.event}, delivery {delivery_id}\n")
    return mail


def send(mail: EmailMessage | None, config: dict[str, Any], password: str | None) -> None:
    """Send over SMTP with STARTTLS (never in clear text); raises OSError or smtplib's errors.
    mail None: only connect, upgrade and log in (the check when a channel is added). The
    certificate is checked against the system's CAs, or SSL_CERT_FILE's for an internal CA."""
    context = ssl.create_default_context()
    with smtplib.SMTP(config["host"], int(config["port"]), timeout=SMTP_TIMEOUT_S) as smtp:
        smtp.ehlo()
        smtp.starttls(context=context)  # SMTPNotSupportedError when the server offers none
        smtp.ehlo()
        if config.get("user"):
            smtp.login(config["user"], password or "")
        if mail is not None:
            smtp.send_message(mail)
