"""Kept profile traces over HTTP (gate_server/domain/traces.py): the CI token that uploaded a run
uploads its traces; any token that may see the run downloads them."""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from gate_server.domain.auth import check_signature
from gate_server.domain.runs import may_see
from gate_server.domain.traces import read_trace, store_trace
from gate_server.http.answers import trace_response
from gate_server.http.endpoints import authenticated, read_body
from gate_server.http.openapi import AUTH_ERRORS, error, header, json_body, operation
from gate_server.services import services


@operation(
    "put",
    {
        "summary": "Keep a profile's Chrome trace with its run (harness.keep-traces)",
        "security": [{"bearer": []}],
        "parameters": [
            header("X-Kernalin-Timestamp", "Unix seconds, within 5 minutes"),
            header(
                "X-Kernalin-Signature",
                "sha256=<hex HMAC-SHA256 of 'timestamp.body' keyed by the token>",
            ),
        ],
        "requestBody": {
            "required": True,
            "content": {
                "application/octet-stream": {"schema": {"type": "string", "format": "binary"}}
            },
        },
        "responses": {
            "201": json_body("KeptTrace", "kept"),
            "200": json_body("KeptTrace", "the same bytes were kept before"),
            "413": error("the body is too large"),
            "404": error("no run visible to this token, or its document names no such trace"),
            "409": error("the run already has other bytes under this name"),
            "422": error("not the gzip of a JSON trace"),
            **AUTH_ERRORS,
        },
    },
)
async def upload_trace(request: Request) -> Response:
    svc = services(request)
    token, secret = await authenticated(request)
    body = await read_body(request, svc.settings.max_body_bytes)
    check_signature(
        secret,
        request.headers.get("x-kernalin-timestamp"),
        request.headers.get("x-kernalin-signature"),
        body,
        tolerance_s=svc.settings.timestamp_tolerance_s,
    )
    kept = await run_in_threadpool(
        store_trace,
        svc.database,
        token,
        request.path_params["run_id"],
        request.path_params["name"],
        body,
    )
    return JSONResponse(kept, status_code=201 if kept["stored"] else 200)


@operation(
    "get",
    {
        "summary": "A kept profile trace: Chrome trace JSON, sent gzip-encoded",
        "security": [{"bearer": []}],
        "responses": {
            "200": {"description": "the trace", "content": {"application/json": {}}},
            "404": error("no such run visible to this token, or no such kept trace"),
            **AUTH_ERRORS,
        },
    },
)
async def download_trace(request: Request) -> Response:
    svc = services(request)
    token, _ = await authenticated(request)
    name = request.path_params["name"]
    body = await run_in_threadpool(
        lambda: read_trace(
            svc.database,
            request.path_params["run_id"],
            name,
            visible=lambda run: may_see(token, run),
        )
    )
    return trace_response(body, name)


routes = [
    Route("/api/v1/runs/{run_id}/traces/{name}", upload_trace, methods=["PUT"]),
    Route("/api/v1/runs/{run_id}/traces/{name}", download_trace, methods=["GET"]),
]
