"""A loopback HTTP server that fails on purpose, one outage mode at a time, at the socket level.

Used by tests/reliability and benchmarks/reliability/action_faults.py. Each mode is what a runner
can meet
when the gate server (or a proxy in front of it) is down or broken: refusals, error statuses,
garbage, a body cut short, a connection accepted and never answered, an answer that trickles.
"""

from __future__ import annotations

import contextlib
import json
import socket
import socketserver
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from testbed.gate_helpers import refusing_port

_ERROR = json.dumps({"error": {"code": "x", "message": "refused on purpose", "details": []}})

# mode -> (status, extra headers, body); the socket-level modes are handled in _Handler.
STATUS_MODES: dict[str, tuple[int, dict[str, str], str]] = {
    "http-500": (500, {}, _ERROR),
    "http-502": (502, {"Content-Type": "text/html"}, "<html>Bad Gateway</html>"),
    "http-503-retry-after": (503, {"Retry-After": "2"}, _ERROR),
    "http-401": (401, {}, _ERROR),
    "http-403": (403, {}, _ERROR),
    "http-404": (404, {}, _ERROR),
    "http-413": (413, {}, _ERROR),
    "http-422": (422, {}, _ERROR),
    "http-429": (429, {"Retry-After": "1"}, _ERROR),
    "non-json-201": (201, {"Content-Type": "text/html"}, "<html>captive portal</html>"),
    "wrong-json-201": (201, {}, json.dumps({"run_id": 1, "tier": "MAYBE"})),
    "deep-json-201": (201, {}, "[" * 100_000 + "]" * 100_000),
    "deep-json-422": (422, {}, '{"error":' * 50_000 + "1" + "}" * 50_000),
}
# Accept the request, then: cut the body short and close; stall mid-body; never answer;
# answer one header line a second forever (each read is quick, the whole never ends); or
# answer plain HTTP before reading anything, which an https:// client sees as a TLS error.
SOCKET_MODES = ("truncated", "stall-mid-body", "never-answers", "trickle", "not-tls")
ALL_MODES = (*STATUS_MODES, *SOCKET_MODES)
# Modes that a plain http:// client meets (not-tls only makes sense behind https://).
HTTP_MODES = tuple(m for m in ALL_MODES if m != "not-tls")


@dataclass
class Misbehaving:
    """The running server: its URL and how many requests reached it."""

    url: str
    mode: str
    requests: int = 0
    stop: threading.Event = field(default_factory=threading.Event)


def _read_request(sock: socket.socket) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            return data
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip() or 0)
    while len(rest) < length:
        chunk = sock.recv(65536)
        if not chunk:
            break
        rest += chunk
    return head


def _response(status: int, headers: dict[str, str], body: bytes) -> bytes:
    lines = [f"HTTP/1.1 {status} Whatever"]
    merged = {"Content-Type": "application/json", **headers}
    merged["Content-Length"] = str(len(body))
    merged["Connection"] = "close"
    lines += [f"{k}: {v}" for k, v in merged.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


@contextmanager
def misbehaving_server(mode: str) -> Iterator[Misbehaving]:
    """Serve `mode` on a free loopback port until the block ends."""
    if mode not in ALL_MODES:
        raise ValueError(f"unknown mode {mode!r}; one of {', '.join(ALL_MODES)}")
    state = Misbehaving(url="", mode=mode)

    class Handler(socketserver.BaseRequestHandler):
        def handle(self) -> None:
            sock: socket.socket = self.request
            sock.settimeout(5)
            if mode == "not-tls":
                state.requests += 1
                sock.sendall(b"HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n")
                return
            try:
                _read_request(sock)
            except OSError:
                return
            state.requests += 1
            with contextlib.suppress(OSError):  # the client hung up: that is its right
                self._answer(sock)

        def _answer(self, sock: socket.socket) -> None:
            if mode in STATUS_MODES:
                status, headers, text = STATUS_MODES[mode]
                sock.sendall(_response(status, headers, text.encode()))
            elif mode == "truncated":
                full = _response(201, {}, json.dumps({"run_id": "x" * 200}).encode())
                sock.sendall(full[: len(full) - 150])
            elif mode == "stall-mid-body":
                full = _response(201, {}, json.dumps({"run_id": "x" * 200}).encode())
                sock.sendall(full[: len(full) - 150])
                state.stop.wait(120)
            elif mode == "never-answers":
                state.stop.wait(120)
            elif mode == "trickle":
                sock.sendall(b"HTTP/1.1 201 Created\r\nContent-Type: application/json\r\n")
                while not state.stop.wait(1.0):
                    sock.sendall(b"X-Slow: 1\r\n")

    class Server(socketserver.ThreadingTCPServer):
        daemon_threads = True
        allow_reuse_address = True

    server = Server(("127.0.0.1", 0), Handler)
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield state
    finally:
        state.stop.set()
        server.shutdown()
        server.server_close()


DNS_FAILURE_URL = "http://gate.nonexistent.invalid"  # .invalid never resolves (RFC 2606)


# Every outage mode the action must survive, by name: the status and socket modes above,
# plus three that need no server at all (or one that speaks the wrong protocol).
OUTAGE_MODES = ("connection-refused", "dns-failure", "tls-error", *HTTP_MODES)


@contextmanager
def outage(mode: str) -> Iterator[Misbehaving]:
    """A URL that fails in `mode`; `.requests` counts the requests that reached a server."""
    if mode == "connection-refused":
        with refusing_port() as port:  # refuses for the whole block, taken by nobody else
            yield Misbehaving(url=f"http://127.0.0.1:{port}", mode=mode)
    elif mode == "dns-failure":
        yield Misbehaving(url=DNS_FAILURE_URL, mode=mode)
    elif mode == "tls-error":
        with misbehaving_server("not-tls") as server:
            server.url = server.url.replace("http://", "https://")
            yield server
    else:
        with misbehaving_server(mode) as server:
            yield server
