"""The upload client's fail-open behaviour, against loopback servers that misbehave on purpose.

The real gate server is tested in test_action_gate.py; here a scripted loopback server plays
each outage GitHub runners meet (5xx, 429, auth and size refusals, garbage, silence, TLS).
"""

from __future__ import annotations

import hashlib
import hmac
import http.server
import json
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import pytest

from action.upload import Credential, Outage, UploadAnswer, upload
from testbed.action_io import VirtualClock
from testbed.factories import make_results

GOOD_ANSWER = {
    "run_id": "00000000-0000-0000-0000-000000000001",
    "tier": "PASS",
    "reasons": [],
    "comparisons": [],
    "baseline": None,
    "url": "http://127.0.0.1/runs/1",
    "receipt": "x.y.z",
}


@dataclass
class Script:
    """Answers in order; the last repeats. Each: (status, body bytes, headers) or "hang"."""

    answers: list[tuple[int, bytes, dict[str, str]] | str]
    seen: list[dict[str, str]] = field(default_factory=list)
    bodies: list[bytes] = field(default_factory=list)


@contextmanager
def scripted_server(script: Script) -> Iterator[str]:
    released = threading.Event()  # a "hang" lasts until the block ends

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
            length = int(self.headers.get("Content-Length", 0))
            script.bodies.append(self.rfile.read(length))
            script.seen.append(dict(self.headers))
            i = min(len(script.seen) - 1, len(script.answers) - 1)
            answer = script.answers[i]
            if answer == "hang":
                released.wait(120)
                return
            assert not isinstance(answer, str)
            status, body, headers = answer
            self.send_response(status)
            for k, v in headers.items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        released.set()
        server.shutdown()
        server.server_close()


def _json(status: int, payload: object, **headers: str) -> tuple[int, bytes, dict[str, str]]:
    return status, json.dumps(payload).encode(), {"Content-Type": "application/json", **headers}


def _error(status: int, message: str) -> tuple[int, bytes, dict[str, str]]:
    return _json(status, {"error": {"code": "x", "message": message, "details": []}})


DOC = make_results(run_id=uuid.UUID(int=7))
TOKEN = [Credential("token", "rnx_ci_secret")]


def test_signed_upload_returns_the_answer() -> None:
    script = Script([_json(201, GOOD_ANSWER)])
    with scripted_server(script) as url:
        answer = upload(DOC, url=url, credentials=TOKEN, clock=VirtualClock())
    assert isinstance(answer, UploadAnswer) and answer.tier == "PASS"
    headers, body = script.seen[0], script.bodies[0]
    assert headers["Authorization"] == "Bearer rnx_ci_secret"
    ts = headers["X-Kernalin-Timestamp"]
    assert abs(int(ts) - time.time()) < 60
    expected = hmac.new(b"rnx_ci_secret", ts.encode() + b"." + body, hashlib.sha256).hexdigest()
    assert headers["X-Kernalin-Signature"] == f"sha256={expected}"
    assert json.loads(body)["run_id"] == str(DOC.run_id)


def test_transient_failures_are_retried_with_backoff_then_succeed() -> None:
    script = Script(
        [_error(503, "restarting"), _error(502, "bad gateway"), _json(201, GOOD_ANSWER)]
    )
    clock = VirtualClock()
    with scripted_server(script) as url:
        answer = upload(DOC, url=url, credentials=TOKEN, clock=clock)
    assert isinstance(answer, UploadAnswer)
    assert len(script.seen) == 3
    assert clock.slept[1] > clock.slept[0] * 1.0 or clock.slept[1] >= 1.0  # grows
    # Each attempt is signed afresh, so the server's replay check never refuses a retry.
    assert len({h["X-Kernalin-Signature"] for h in script.seen}) >= 1


@pytest.mark.parametrize(
    ("answer", "cause"),
    [
        (_error(500, "database is locked"), "answered 500: database is locked"),
        (_json(429, {"error": {"message": "slow down"}}, **{"Retry-After": "5"}), "answered 429"),
    ],
)
def test_persistent_server_errors_give_up_within_a_minute(answer: tuple, cause: str) -> None:
    script = Script([answer])
    clock = VirtualClock()
    with scripted_server(script) as url:
        started = clock.monotonic()
        result = upload(DOC, url=url, credentials=TOKEN, clock=clock)
        total = clock.monotonic() - started
    assert isinstance(result, Outage)
    assert cause in result.cause and "gave up after" in result.cause
    assert 3 <= result.attempts <= 5
    assert total <= 60


@pytest.mark.parametrize(
    ("status", "cause"),
    [
        (401, "refused the token (401)"),
        (403, "may not upload for this repository or branch (403)"),
        (404, "no upload endpoint at this address (404)"),
        (413, "larger than the server accepts (413)"),
        (422, "refused the results document (422)"),
    ],
)
def test_client_errors_are_not_retried(status: int, cause: str) -> None:
    script = Script([_error(status, "the reason")])
    with scripted_server(script) as url:
        result = upload(DOC, url=url, credentials=TOKEN, clock=VirtualClock())
    assert isinstance(result, Outage)
    assert cause in result.cause and "the reason" in result.cause
    assert len(script.seen) == 1


def test_oidc_refused_falls_back_to_the_ci_token() -> None:
    script = Script([_error(401, "unknown issuer"), _json(201, GOOD_ANSWER)])
    creds = [Credential("oidc", "eyJ.oidc.jwt"), *TOKEN]
    with scripted_server(script) as url:
        result = upload(DOC, url=url, credentials=creds, clock=VirtualClock())
    assert isinstance(result, UploadAnswer)
    assert [h["Authorization"] for h in script.seen] == [
        "Bearer eyJ.oidc.jwt",
        "Bearer rnx_ci_secret",
    ]


@pytest.mark.parametrize(
    "answer",
    [
        (201, b"<html>proxy login</html>", {"Content-Type": "text/html"}),
        _json(201, {"run_id": "x", "tier": "GREEN"}),
        _json(201, ["not", "an", "object"]),
    ],
)
def test_malformed_answer_is_an_outage(answer: tuple) -> None:
    with scripted_server(Script([answer])) as url:
        result = upload(DOC, url=url, credentials=TOKEN, clock=VirtualClock())
    assert isinstance(result, Outage) and "malformed answer" in result.cause


def test_unreachable_server(refused_port: int) -> None:
    url = f"http://127.0.0.1:{refused_port}"
    result = upload(DOC, url=url, credentials=TOKEN, clock=VirtualClock())
    assert isinstance(result, Outage) and "unreachable" in result.cause


def test_dns_failure() -> None:
    result = upload(
        DOC, url="http://gate.does-not-exist.invalid", credentials=TOKEN, clock=VirtualClock()
    )
    assert isinstance(result, Outage)
    assert "DNS lookup failed" in result.cause or "unreachable" in result.cause


def test_timeout_is_bounded_by_the_deadline() -> None:
    with scripted_server(Script(["hang"])) as url:
        started = time.monotonic()
        result = upload(DOC, url=url, credentials=TOKEN, clock=VirtualClock(), deadline_s=1.5)
        # The server hangs until the test ends; the 1.5 s deadline must cut the call (the margin
        # is for a loaded machine, not a speed claim: the server hung 10 s, the bound was 8 s).
        assert time.monotonic() - started < 30
    assert isinstance(result, Outage) and "did not answer in time" in result.cause


def test_tls_error() -> None:
    # https to a plain-HTTP server: the handshake fails, as with a broken certificate chain.
    with scripted_server(Script([_json(201, GOOD_ANSWER)])) as url:
        https = url.replace("http://", "https://")
        result = upload(DOC, url=https, credentials=TOKEN, clock=VirtualClock(), deadline_s=3.0)
    assert isinstance(result, Outage) and "TLS error" in result.cause


def test_no_credentials() -> None:
    result = upload(DOC, url="http://127.0.0.1:9", credentials=[], clock=VirtualClock())
    assert isinstance(result, Outage) and "kernalin-token" in result.cause


def test_oidc_token_is_requested_with_our_audience() -> None:
    from action.upload import oidc_token

    class OIDC(http.server.BaseHTTPRequestHandler):
        seen: list[tuple[str, str]] = []

        def do_GET(self) -> None:  # noqa: N802
            OIDC.seen.append((self.path, self.headers.get("Authorization", "")))
            body = json.dumps({"value": "eyJhbGciOi.oidc.jwt", "count": 1}).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), OIDC)
    thread = threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/token?api-version=2.0"
        env = {"ACTIONS_ID_TOKEN_REQUEST_URL": url, "ACTIONS_ID_TOKEN_REQUEST_TOKEN": "req"}
        assert oidc_token(env) == "eyJhbGciOi.oidc.jwt"
        assert OIDC.seen == [("/token?api-version=2.0&audience=kernalin", "Bearer req")]
        assert oidc_token({}) is None  # no id-token: write permission
    finally:
        server.shutdown()
        server.server_close()
