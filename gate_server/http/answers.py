"""What the server answers: an Answer (status and JSON body), ApiError for a refused request,
and the one JSON error shape, {"error": {"code", "message", "details"}}, produced here only
(the exception handlers below turn every error into it)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from sqlalchemy.exc import InternalError, OperationalError
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from gate_server.errors import (
    Conflict,
    Forbidden,
    InvalidInput,
    Malformed,
    NotFound,
    RateLimited,
    Refused,
    TooLarge,
    Unauthenticated,
    UpstreamFailed,
)

log = logging.getLogger("gate_server")

# PostgreSQL's SQLSTATE for a write in a read-only transaction (a hot standby answers it too).
READ_ONLY_SQLSTATE = "25006"

_HTTP_CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "body_too_large",
    415: "unsupported_media_type",
    422: "invalid_request",
}


@dataclass(frozen=True)
class Answer:
    """A handled request's answer: its HTTP status and JSON body."""

    status: int
    body: dict[str, Any]


class ApiError(Exception):
    """A request the server refuses; turned into the JSON error shape in one place."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        details: list[Any] | None = None,
        headers: dict[str, str] | None = None,
    ):
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.details = details or []
        self.headers = headers


def error_response(
    status: int,
    code: str,
    message: str,
    details: list[Any] | None = None,
    headers: dict[str, str] | None = None,
) -> JSONResponse:
    body = {"error": {"code": code, "message": message, "details": details or []}}
    return JSONResponse(body, status_code=status, headers=headers)


async def _api_error(request: Request, exc: ApiError) -> Response:
    return error_response(exc.status, exc.code, exc.message, exc.details, exc.headers)


# What each kind of refusal from the core is over HTTP: the one place its errors meet status
# codes (a subclass answers as its nearest listed kind: AmbiguousRepository as a Conflict).
REFUSAL_STATUS: dict[type[Refused], int] = {
    Malformed: 400,
    Unauthenticated: 401,
    Forbidden: 403,
    NotFound: 404,
    Conflict: 409,
    TooLarge: 413,
    InvalidInput: 422,
    RateLimited: 429,
    UpstreamFailed: 502,
}


def refusal_response(exc: Refused) -> JSONResponse:
    """A refusal of the core as the JSON error shape, with the headers its kind calls for."""
    status = next((REFUSAL_STATUS[k] for k in type(exc).__mro__ if k in REFUSAL_STATUS), 400)
    headers = None
    if isinstance(exc, Unauthenticated):
        headers = {"WWW-Authenticate": "Bearer"}
    elif isinstance(exc, RateLimited):
        headers = {"Retry-After": str(exc.retry_after_s)}
    return error_response(status, exc.code, exc.message, exc.details, headers)


async def _refused(request: Request, exc: Refused) -> Response:
    return refusal_response(exc)


async def _http_exception(request: Request, exc: HTTPException) -> Response:
    code = _HTTP_CODES.get(exc.status_code, "http_error")
    message = exc.detail if isinstance(exc.detail, str) else code
    if exc.status_code == 404:
        message = f"nothing at {request.url.path}; see /openapi.json for the API's routes"
    elif exc.status_code == 405:
        message = f"{request.method} is not allowed on {request.url.path}"
    headers = dict(exc.headers) if exc.headers else None
    return error_response(exc.status_code, code, message, headers=headers)


async def _server_error(request: Request, exc: Exception) -> Response:
    log.exception("unhandled error on %s %s", request.method, request.url.path)
    return error_response(500, "internal_error", "the server failed; the error is in its log")


def takes_no_writes(exc: BaseException) -> bool:
    """The database answers but cannot store: PostgreSQL read-only (a standby after a
    failover, default_transaction_read_only), SQLite on a read-only file or a full disk."""
    orig = getattr(exc, "orig", None)
    if getattr(orig, "sqlstate", None) == READ_ONLY_SQLSTATE:
        return True
    text = str(orig or exc).lower()
    return "readonly database" in text or "disk is full" in text or "disk i/o error" in text


async def _database_unavailable(request: Request, exc: Exception) -> Response:
    # The database went away (a restart, a failover, the network) or takes no writes: a retry
    # may succeed, so say that (503 + Retry-After, which the action honours) instead of a 500
    # that reads as a bug.
    first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    log.warning("database unavailable on %s %s: %s", request.method, request.url.path, first)
    if takes_no_writes(exc):
        return error_response(
            503,
            "database_read_only",
            "the server's database takes no writes now (read-only, a standby, or a full disk); "
            "retry later",
            headers={"Retry-After": "30"},
        )
    return error_response(
        503,
        "database_unavailable",
        "the server's database does not answer; retry in a few seconds",
        headers={"Retry-After": "2"},
    )


async def _database_error(request: Request, exc: Exception) -> Response:
    if takes_no_writes(exc):
        return await _database_unavailable(request, exc)
    return await _server_error(request, exc)


EXCEPTION_HANDLERS: dict[Any, Any] = {
    ApiError: _api_error,
    Refused: _refused,
    HTTPException: _http_exception,
    OperationalError: _database_unavailable,
    InternalError: _database_error,
    Exception: _server_error,
}


def trace_response(body: bytes, name: str) -> Response:
    """The stored gzip bytes as the JSON file they hold: a browser inflates them and saves
    the file under its name (Perfetto and chrome://tracing open it as it is)."""
    return Response(
        body,
        media_type="application/json",
        headers={
            "Content-Encoding": "gzip",
            "Content-Disposition": f'attachment; filename="{name}"',
            "Cache-Control": "private, max-age=86400",
        },
    )
