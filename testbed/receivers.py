"""Real receivers on loopback for the alerts' tests and benchmark: an HTTP server standing in for
Slack, Teams and webhook endpoints, and an SMTP server (aiosmtpd) that requires STARTTLS and a
login, each recording what it was sent and able to fail on demand."""

from __future__ import annotations

import datetime
import ipaddress
import json
import re
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from email import message_from_bytes
from email.message import Message
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Received:
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class HttpReceiver:
    """POSTs are recorded and answered `status` (Slack answers 200 "ok", a Teams workflow 202),
    unless `fail` says otherwise for that request (its number, from 0): then 503.

    A request `hold` picks is recorded and then held unanswered until `release` is set (`held`
    is set when it arrives): a sender killed meanwhile never learns it was delivered."""

    status: int = 200
    fail: Callable[[int], bool] = lambda n: False
    hold: Callable[[int], bool] = lambda n: False
    delay_s: float = 0.0
    # The body of a refusal, from the request's path: many error pages repeat the URL.
    failure_body: Callable[[str], bytes] = lambda path: b"unavailable"
    received: list[Received] = field(default_factory=list)
    refused: int = 0
    held: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)
    _server: ThreadingHTTPServer | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _seen: int = 0

    def delivery_ids(self) -> list[str]:
        """The delivery id of each request received, in order (from X-Kernalin-Delivery, or
        the message text of Slack and Teams, which carry it as "delivery <id>")."""
        return [delivery_id_of(r) for r in self.received]

    @property
    def url(self) -> str:
        if self._server is None:
            raise RuntimeError("the receiver is not started")
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> HttpReceiver:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                length = int(self.headers.get("Content-Length") or 0)
                data = self.rfile.read(length)
                with receiver._lock:
                    number = receiver._seen
                    receiver._seen += 1
                    failed = receiver.fail(number)
                    if failed:
                        receiver.refused += 1
                    else:
                        receiver.received.append(
                            Received(self.path, {k: v for k, v in self.headers.items()}, data)
                        )
                if not failed and receiver.hold(number):
                    receiver.held.set()
                    receiver.release.wait(60)
                if receiver.delay_s:
                    time.sleep(receiver.delay_s)
                status = 503 if failed else receiver.status
                answer = receiver.failure_body(self.path) if failed else b"ok"
                try:
                    self.send_response(status)
                    self.send_header("Content-Length", str(len(answer)))
                    self.end_headers()
                    self.wfile.write(answer)
                except OSError:
                    pass  # the sender is gone (killed while held)

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()


_DELIVERY_IN_TEXT = re.compile(r"delivery ([0-9a-f-]{36})")


def delivery_id_of(received: Received) -> str:
    header = received.headers.get("X-Kernalin-Delivery")
    if header:
        return header
    found = _DELIVERY_IN_TEXT.search(received.body.decode("utf-8", "replace"))
    if found is None:
        raise AssertionError(f"no delivery id in {received.body[:200]!r}")
    return found.group(1)


def self_signed_certificate(directory: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 and localhost and its key (PEM files): the SMTP server's,
    and the CA file a client trusts for it."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / "smtp-cert.pem", directory / "smtp-key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


@dataclass
class SmtpReceiver:
    """aiosmtpd on loopback: STARTTLS required, then a login as `user`/`password` required;
    messages are recorded, except those `fail` refuses (451, try again later)."""

    directory: Path
    user: str = "alerts"
    password: str = "smtp-password"
    fail: Callable[[int], bool] = lambda n: False
    starttls: bool = True  # False: a server that offers no STARTTLS (and takes logins in clear)
    messages: list[Message] = field(default_factory=list)
    envelopes: list[tuple[str, list[str]]] = field(default_factory=list)
    logins: list[tuple[str, str]] = field(default_factory=list)
    refused: int = 0
    port: int = 0
    ca_file: Path | None = None
    _controller: Any = None
    _seen: int = 0

    def delivery_ids(self) -> list[str]:
        return [str(m["X-Kernalin-Delivery"]) for m in self.messages]

    def channel(
        self, *, password: str | None = None, to: tuple[str, ...] = ("perf@example.com",)
    ) -> Any:
        """An email channel that sends here (`password`: another than the one this takes)."""
        from gate_server.domain.alerts.channels import email_channel

        return email_channel(
            host="127.0.0.1",
            port=self.port,
            user=self.user,
            password=self.password if password is None else password,
            sender="gate@example.com",
            to=list(to),
        )

    def start(self) -> SmtpReceiver:
        import errno
        import logging
        import ssl

        from aiosmtpd.controller import Controller
        from aiosmtpd.smtp import AuthResult, LoginPassword

        from testbed.live_server import free_port

        # aiosmtpd warns on every login that an attribute it sets itself is deprecated.
        logging.getLogger("mail.log").setLevel(logging.ERROR)
        cert, key = self_signed_certificate(self.directory)
        self.ca_file = cert
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(cert, key)
        receiver = self

        def authenticator(server: Any, session: Any, envelope: Any, mechanism: str, data: Any):
            if isinstance(data, LoginPassword):
                login, password = data.login.decode(), data.password.decode()
                receiver.logins.append((login, password))
                if (login, password) == (receiver.user, receiver.password):
                    return AuthResult(success=True)
            return AuthResult(success=False, handled=False)

        class Handler:
            async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:  # noqa: N802
                number = receiver._seen
                receiver._seen += 1
                if receiver.fail(number):
                    receiver.refused += 1
                    return "451 4.3.0 try again later"
                receiver.envelopes.append((envelope.mail_from, list(envelope.rcpt_tos)))
                receiver.messages.append(message_from_bytes(envelope.content))
                return "250 OK"

        # The port was free a moment ago: should another process take it before the server binds
        # it, start again on another. A loaded machine can take more than aiosmtpd's default
        # 5 s to start its thread and answer; the wait ends as soon as it does.
        for attempt in range(3):
            self.port = free_port()
            self._controller = Controller(
                Handler(),
                hostname="127.0.0.1",
                port=self.port,
                ready_timeout=60,
                tls_context=context if self.starttls else None,
                require_starttls=self.starttls,
                authenticator=authenticator,
                auth_required=True,
                auth_require_tls=self.starttls,
            )
            try:
                self._controller.start()
            except OSError as e:
                if e.errno != errno.EADDRINUSE or attempt == 2:
                    raise
                continue
            return self
        raise AssertionError("unreachable")

    def stop(self) -> None:
        if self._controller is not None:
            self._controller.stop()


class SilentReceiver:
    """A receiver that accepts connections, reads what is sent and never answers: the hung
    webhook endpoint that must not hold up other channels' alerts."""

    def __init__(self) -> None:
        self.accepted = 0
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._held: list[socket.socket] = []
        self._stopped = threading.Event()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._listener.getsockname()[1]}"

    def start(self) -> SilentReceiver:
        def accept() -> None:
            while not self._stopped.is_set():
                try:
                    conn, _ = self._listener.accept()
                except OSError:
                    return
                self.accepted += 1
                self._held.append(conn)  # kept open, never read to the end, never answered

        threading.Thread(target=accept, daemon=True).start()
        return self

    def stop(self) -> None:
        self._stopped.set()
        self._listener.close()
        for conn in self._held:
            conn.close()
