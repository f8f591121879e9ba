"""The JSON API under /api/v1: thin routes that parse the request, call runs.py and answer."""

from __future__ import annotations

import json
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from gate_server.auth import authenticate, check_signature
from gate_server.errors import ApiError
from gate_server.github.app_mode import after_upload as github_after_upload
from gate_server.github.integration import oidc_login
from gate_server.openapi import error, json_body, operation
from gate_server.runs import accept_run, check_accept_scope, get_run, ingest_run
from gate_server.services import services

MAX_ACCEPT_BODY = 64 * 1024

_AUTH_ERRORS = {
    "401": error("missing, unknown or revoked token"),
    "403": error("the token may not do this"),
}


def _require_json(request: Request) -> None:
    media = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media != "application/json":
        raise ApiError(
            415,
            "unsupported_media_type",
            f"send the body as application/json (got {media or 'no Content-Type'})",
        )


async def read_body(request: Request, limit: int) -> bytes:
    """The request body, refused with 413 as soon as it passes `limit` bytes."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
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


def _base_url(request: Request) -> str:
    return str(request.base_url).rstrip("/")


@operation(
    "post",
    {
        "summary": "Upload a signed results document; the server re-gates it from the samples",
        "security": [{"bearer": []}],
        "parameters": [
            {
                "name": "X-Kernalin-Timestamp",
                "in": "header",
                "required": True,
                "schema": {"type": "string"},
                "description": "Unix seconds, within 5 minutes",
            },
            {
                "name": "X-Kernalin-Signature",
                "in": "header",
                "required": True,
                "schema": {"type": "string"},
                "description": "sha256=<hex HMAC-SHA256 of 'timestamp.body' keyed by the token>",
            },
        ],
        "requestBody": {
            "required": True,
            "content": {
                "application/json": {"schema": {"$ref": "#/components/schemas/ResultsDocument"}}
            },
        },
        "responses": {
            "201": json_body("UploadAnswer", "stored and gated"),
            "200": json_body("UploadAnswer", "the same run_id and bytes again: the stored answer"),
            "400": error("the body is not JSON"),
            **_AUTH_ERRORS,
            "409": error("run_id already used with a different document"),
            "413": error("the body is too large"),
            "415": error("the body is not application/json"),
            "422": error("not a valid results document, or too many samples"),
        },
    },
)
async def upload_run(request: Request) -> Response:
    svc = services(request)
    token, secret = await run_in_threadpool(
        authenticate, svc.storage, request.headers.get("authorization"), oidc=oidc_login(request)
    )
    _require_json(request)
    body = await read_body(request, svc.settings.max_body_bytes)
    signature = request.headers.get("x-kernalin-signature")
    check_signature(
        secret,
        request.headers.get("x-kernalin-timestamp"),
        signature,
        body,
        tolerance_s=svc.settings.timestamp_tolerance_s,
    )
    assert signature is not None
    answer = await run_in_threadpool(
        ingest_run,
        svc.storage,
        svc.settings,
        svc.signer,
        token,
        body,
        signature.strip(),
        _base_url(request),
    )
    # App mode: the server posts the PR's comment and status itself (gate_server/github).
    task = github_after_upload(request, answer.status, answer.body)
    return JSONResponse(answer.body, status_code=answer.status, background=task)


@operation(
    "get",
    {
        "summary": "A stored run and its verdict (?document=true adds the uploaded document)",
        "security": [{"bearer": []}],
        "parameters": [
            {"name": "document", "in": "query", "required": False, "schema": {"type": "boolean"}}
        ],
        "responses": {
            "200": json_body("RunView", "the run"),
            **_AUTH_ERRORS,
            "404": error("no such run visible to this token"),
        },
    },
)
async def read_run(request: Request) -> Response:
    svc = services(request)
    token, _ = await run_in_threadpool(
        authenticate, svc.storage, request.headers.get("authorization"), oidc=oidc_login(request)
    )
    with_document = request.query_params.get("document", "").lower() in ("1", "true", "yes")
    view = await run_in_threadpool(
        get_run, svc.storage, token, request.path_params["run_id"], with_document=with_document
    )
    return JSONResponse(view)


def _accept_reason(body: bytes) -> str:
    try:
        data: Any = json.loads(body)
    except (ValueError, RecursionError) as e:
        raise ApiError(400, "invalid_json", f"the body is not valid JSON: {e}") from None
    if not isinstance(data, dict) or not isinstance(data.get("reason"), str):
        raise ApiError(
            422,
            "missing_reason",
            'send {"reason": "why this run is the new normal"}',
            [{"field": "reason", "problem": "required string"}],
        )
    return str(data["reason"])


@operation(
    "post",
    {
        "summary": "Accept a run: it becomes the baseline for its base branch and environment",
        "security": [{"bearer": []}],
        "requestBody": {
            "required": True,
            "content": {
                "application/json": {
                    "schema": {
                        "type": "object",
                        "required": ["reason"],
                        "properties": {"reason": {"type": "string", "minLength": 1}},
                    }
                }
            },
        },
        "responses": {
            "200": json_body("Acceptance", "accepted (or already accepted)"),
            "400": error("the body is not JSON"),
            **_AUTH_ERRORS,
            "404": error("no such run visible to this token"),
            "413": error("the body is too large"),
            "415": error("the body is not application/json"),
            "422": error("no reason given"),
        },
    },
)
async def accept(request: Request) -> Response:
    svc = services(request)
    token, _ = await run_in_threadpool(
        authenticate, svc.storage, request.headers.get("authorization"), oidc=oidc_login(request)
    )
    run_id = request.path_params["run_id"]
    await run_in_threadpool(check_accept_scope, svc.storage, token, run_id)
    _require_json(request)
    reason = _accept_reason(await read_body(request, MAX_ACCEPT_BODY))
    result = await run_in_threadpool(
        lambda: accept_run(
            svc.storage,
            run_id,
            actor=f"token:{token.id}",
            reason=reason,
            via="api",
            token_id=token.id,
        )
    )
    return JSONResponse(result)


@operation(
    "get",
    {
        "summary": "The public key that verifies receipts (rnx receipt verify --url)",
        "responses": {"200": json_body("ReceiptKey", "algorithm, key id and PEM public key")},
    },
)
async def receipt_key(request: Request) -> Response:
    return JSONResponse(services(request).signer.public_info())


routes = [
    Route("/api/v1/runs", upload_run, methods=["POST"]),
    Route("/api/v1/runs/{run_id}", read_run, methods=["GET"]),
    Route("/api/v1/runs/{run_id}/accept", accept, methods=["POST"]),
    Route("/api/v1/receipt-key", receipt_key, methods=["GET"]),
]
