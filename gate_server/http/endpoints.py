"""What the API's endpoints do alike: authenticate the bearer, read a bounded body, require and
parse JSON. Each refusal is an ApiError (gate_server/http/answers.py)."""

from __future__ import annotations

import functools
import json
from typing import Any

import anyio
from starlette.requests import Request

from gate_server.db.engine import run_in_event_loop
from gate_server.db.tokens import TokenRecord
from gate_server.domain.auth import authenticate, bearer_secret, looks_like_jwt
from gate_server.http.answers import ApiError
from gate_server.numbers import whole_number
from gate_server.services import services


async def authenticated(
    request: Request, limiter: anyio.CapacityLimiter | None = None
) -> tuple[TokenRecord, str]:
    """The token (a CI, viewer or OIDC token) behind the request's Authorization header, and
    its secret (it keys an upload's signature). `limiter`: the bound it waits its turn under
    (the thread pool's by default)."""
    svc = services(request)
    lookup = functools.partial(
        authenticate,
        svc.database,
        request.headers.get("authorization"),
        oidc=svc.github.oidc_login,
    )
    return await anyio.to_thread.run_sync(lookup, limiter=limiter)


async def authenticated_in_loop(
    request: Request, turns: anyio.CapacityLimiter
) -> tuple[TokenRecord, str]:
    """authenticated(), for an upload ingested in the event loop (gate_server/http/api.py): a CI
    token is looked up in the loop too, in its turn under `turns`; an OIDC token still in a
    worker thread, since checking it may fetch GitHub's keys over the network."""
    authorization = request.headers.get("authorization")
    if looks_like_jwt(bearer_secret(authorization)):
        return await authenticated(request, turns)
    async with turns:
        return await run_in_event_loop(authenticate, services(request).database, authorization)


def require_json(request: Request) -> None:
    media = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media != "application/json":
        raise ApiError(
            415,
            "unsupported_media_type",
            f"send the body as application/json (got {media or 'no Content-Type'})",
        )


async def read_body(request: Request, limit: int) -> bytes:
    """The request body, refused with 413 as soon as it passes `limit` bytes."""
    declared = whole_number(request.headers.get("content-length", ""), digits=30)
    if declared is not None and declared > limit:
        raise ApiError(
            413,
            "body_too_large",
            f"the body has {declared} bytes; this server "
            f"takes at most {limit} (RNX_MAX_BODY_BYTES)",
        )
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise ApiError(
                413,
                "body_too_large",
                f"the body passes {limit} bytes, the most this server takes (RNX_MAX_BODY_BYTES)",
            )
        chunks.append(chunk)
    return b"".join(chunks)


def parse_json(body: bytes | bytearray) -> Any:
    """The body as JSON: 400 invalid_json when it is not."""
    try:
        return json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError) as e:
        raise ApiError(400, "invalid_json", f"the body is not valid JSON: {e}") from None


def base_url(request: Request) -> str:
    return str(request.base_url).rstrip("/")
