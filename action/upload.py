"""Upload a results document to the gate server: signed, retried within a minute, failing open.

Every way the server can be unavailable or unusable ends as an `Outage` naming its cause,
never an exception: the gate being down must not break anybody's build.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import json
import random
import ssl
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx
from pydantic import BaseModel, ConfigDict, ValidationError

from rnx.schema import ConfigComparison, Inconclusive, ResultsDocument, Tier

UPLOAD_PATH = "/api/v1/runs"
TOTAL_DEADLINE_S = 60.0
# Five attempts, 1+2+4+8 s apart (jittered): a restarting server gets ~15 s, a dead one costs
# the job no more than that; the deadline bounds slow answers on top.
MAX_ATTEMPTS = 5
OIDC_AUDIENCE = "kernalin"
RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
# Answers that no retry will change; each is reported with what the user can do about it.
_GIVE_UP = {
    401: "the server refused the token (401); check the kernalin-token secret or the OIDC trust",
    403: "the token may not upload for this repository or branch (403)",
    404: "the server has no upload endpoint at this address (404); check kernalin-url",
    413: "the results document is larger than the server accepts (413)",
    422: "the server refused the results document (422)",
}


class UploadAnswer(BaseModel):
    """The server's 201 reply; extra fields are ignored so a newer server stays compatible."""

    model_config = ConfigDict(extra="ignore", frozen=True)
    run_id: str
    tier: Tier
    reasons: list[str] = []
    comparisons: list[ConfigComparison] = []
    inconclusive: Inconclusive | None = None
    baseline: Any = None
    url: str | None = None
    receipt: str | None = None


@dataclass(frozen=True)
class Outage:
    """Why there is no verdict from the server. `kind` says what happened, since each is
    told differently: "unreachable" (no answer, or 5xx until the deadline), "refused" (the
    server answered and said no: 401, 403, 404, 413, 422, or an answer we cannot read), or
    "not-sent" (nothing to send it with)."""

    cause: str
    attempts: int = 0
    kind: str = "unreachable"


# The title and the one-line lead of each kind, for the log, annotations and the summary.
OUTAGE_TITLES = {
    "unreachable": ("gate server unavailable", "did not reach the gate server"),
    "refused": ("gate server refused the upload", "the gate server refused the upload"),
    "not-sent": ("not uploaded", "did not upload"),
}


@dataclass(frozen=True)
class Credential:
    kind: str  # "oidc" | "token"
    secret: str = field(repr=False)
    # The server spends an OIDC token on first use (a replayed jti is refused), so a retry
    # needs a fresh one: `renew` asks GitHub again. None: the secret is reusable (a CI token).
    renew: Callable[[], str | None] | None = None


@dataclass
class Clock:
    """Passed in so tests run the retry schedule without waiting."""

    monotonic: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    wall: Callable[[], float] = time.time
    rng: random.Random = field(default_factory=random.Random)


def sign(secret: str, timestamp: str, body: bytes) -> str:
    mac = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256)
    return "sha256=" + mac.hexdigest()


def oidc_token(env: Mapping[str, str], *, timeout: float = 10.0) -> str | None:
    """A GitHub Actions OIDC token when the workflow grants `id-token: write`, else None."""
    url, bearer = env.get("ACTIONS_ID_TOKEN_REQUEST_URL"), env.get("ACTIONS_ID_TOKEN_REQUEST_TOKEN")
    if not url or not bearer:
        return None
    sep = "&" if "?" in url else "?"
    try:
        r = httpx.get(
            f"{url}{sep}audience={OIDC_AUDIENCE}",
            headers={"Authorization": f"Bearer {bearer}"},
            timeout=timeout,
        )
        value = r.json().get("value") if r.status_code == 200 else None
    except (httpx.HTTPError, ValueError, AttributeError, RecursionError):
        return None
    return value if isinstance(value, str) and value else None


def error_message(response: httpx.Response) -> str:
    try:
        err = response.json().get("error", {})
        message = err.get("message") or ""
        details = err.get("details") or []
        if details and isinstance(details, list):
            first = details[0]
            message += (
                f" ({first.get('field', '')}: {first.get('problem', '')})"
                if isinstance(first, dict)
                else f" ({first})"
            )
        return str(message)[:300]
    except (ValueError, AttributeError, RecursionError):  # not JSON, or nested too deep
        return response.text[:200]


def describe_transport(err: Exception, url: str) -> str:
    text = str(err) or type(err).__name__
    if isinstance(err, httpx.TimeoutException):
        return f"the gate server at {url} did not answer in time ({type(err).__name__})"
    if isinstance(err, httpx.ConnectError):
        cause = err.__cause__ or err.__context__
        low = text.lower()
        if isinstance(cause, ssl.SSLError) or "ssl" in low or "certificate" in low:
            return f"TLS error talking to {url}: {text}"
        if (
            "name or service not known" in low
            or "nodename nor servname" in low
            or ("temporary failure in name resolution" in low)
            or "getaddrinfo" in low
        ):
            return f"DNS lookup failed for {url}: {text}"
        return f"the gate server at {url} is unreachable: {text}"
    return f"network error talking to {url}: {text}"


def upload_body(document: ResultsDocument) -> bytes:
    """The exact bytes sent (and signed): what a receipt's body_sha256 covers."""
    return document.to_json().encode()


def upload(
    document: ResultsDocument,
    *,
    url: str,
    credentials: list[Credential],
    clock: Clock | None = None,
    deadline_s: float = TOTAL_DEADLINE_S,
    max_attempts: int = MAX_ATTEMPTS,
    transport: httpx.BaseTransport | None = None,
    user_agent: str = "rnx-benchmark-action",
    bisection: str | None = None,
) -> UploadAnswer | Outage:
    """POST the document; retry transient failures with jittered backoff within `deadline_s`.
    `bisection`: the gate server's bisection this run was dispatched for (its header tells the
    server the run measures one commit and is no baseline)."""
    clock = clock or Clock()
    if not credentials:
        return Outage(
            "no credentials: set kernalin-token (KERNALIN_TOKEN outside GitHub Actions), or "
            "grant id-token: write for OIDC",
            kind="not-sent",
        )
    body = upload_body(document)
    endpoint = url.rstrip("/") + UPLOAD_PATH
    start = clock.monotonic()
    attempts = 0
    delay = 1.0
    pending = list(credentials)
    last = "no attempt was made"
    with httpx.Client(transport=transport, follow_redirects=False) as client:
        while pending:
            cred = pending[0]
            remaining = deadline_s - (clock.monotonic() - start)
            if remaining <= 0.5:
                return _gave_up(attempts, deadline_s, last)
            # A fresh timestamp per attempt: the server refuses replays of an old signature.
            timestamp = str(int(clock.wall()))
            headers = {
                "Authorization": f"Bearer {cred.secret}",
                "Content-Type": "application/json",
                "User-Agent": user_agent,
                "X-Kernalin-Timestamp": timestamp,
                "X-Kernalin-Signature": sign(cred.secret, timestamp, body),
            }
            if bisection:
                headers["X-Kernalin-Bisection"] = bisection
            attempts += 1
            retry_after: float | None = None
            try:
                limit_s = min(20.0, remaining)
                post = functools.partial(
                    client.post, endpoint, content=body, headers=headers, timeout=limit_s
                )
                response = answer_within(post, limit_s, name="rnx-upload")
            except httpx.HTTPError as e:
                last = describe_transport(e, url)
            else:
                status = response.status_code
                if status in (200, 201):
                    return _parse_answer(response, url, attempts)
                if status in (401, 403) and len(pending) > 1:
                    # The OIDC token was refused: fall back to the CI token before giving up.
                    pending.pop(0)
                    continue
                if status in _GIVE_UP:
                    message = f"{_GIVE_UP[status]}: {error_message(response)}"
                    return Outage(message, attempts, kind="refused")
                if status in RETRY_STATUSES or status >= 500:
                    last = f"the gate server answered {status}: {error_message(response)}"
                    retry_after = _retry_after(response)
                else:
                    return Outage(
                        f"unexpected answer {status} from {endpoint}: {error_message(response)}",
                        attempts,
                        kind="refused",
                    )
            wait = retry_after if retry_after is not None else delay * (0.5 + clock.rng.random())
            remaining = deadline_s - (clock.monotonic() - start)
            if attempts >= max_attempts or wait >= remaining - 0.5:
                return _gave_up(attempts, deadline_s, last)
            clock.sleep(wait)
            delay = min(delay * 2, 16.0)
            if cred.renew is not None:
                pending[0] = Credential(cred.kind, cred.renew() or cred.secret, cred.renew)
    return Outage(last, attempts)


def answer_within(
    call: Callable[[], httpx.Response], limit_s: float, *, name: str
) -> httpx.Response:
    """`call`'s whole answer within `limit_s`. httpx's timeouts bound each read, not the answer:
    a server trickling a byte a second would hold the job forever. So the call runs in a daemon
    thread (named `name`) that is abandoned (its socket with it) when the limit passes."""
    outcome: list[httpx.Response | BaseException] = []

    def run() -> None:
        try:
            outcome.append(call())
        except BaseException as e:  # handed to the caller's thread below
            outcome.append(e)

    worker = threading.Thread(target=run, name=name, daemon=True)
    worker.start()
    worker.join(limit_s)
    if not outcome:
        raise httpx.ReadTimeout(f"no complete answer within {limit_s:.0f} s")
    if isinstance(outcome[0], BaseException):
        raise outcome[0]
    return outcome[0]


def _gave_up(attempts: int, deadline_s: float, last: str) -> Outage:
    return Outage(f"gave up after {attempts} attempts (within {deadline_s:.0f}s): {last}", attempts)


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("Retry-After", "")
    try:
        return max(0.0, float(value))
    except ValueError:
        return None


def _parse_answer(response: httpx.Response, url: str, attempts: int) -> UploadAnswer | Outage:
    try:
        return UploadAnswer.model_validate(response.json())
    except (ValueError, ValidationError, RecursionError) as e:  # RecursionError: nested too deep
        snippet = (
            json.dumps(str(e))[:200]
            if not isinstance(e, ValidationError)
            else ("; ".join(f"{'.'.join(map(str, x['loc']))}: {x['msg']}" for x in e.errors()[:3]))
        )
        return Outage(
            f"malformed answer from the gate server at {url}: {snippet}", attempts, kind="refused"
        )
