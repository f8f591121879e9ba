"""The JSON API under /api/v1: thin routes that parse the request, call the core and answer."""

from __future__ import annotations

import functools
from typing import Any

import anyio
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from gate_server.db.engine import run_in_event_loop
from gate_server.domain.accepts import MAX_ACCEPT_BODY, accept_run, check_accept_scope, check_reason
from gate_server.domain.auth import actor_of, check_signature
from gate_server.domain.baseline_reads import MAX_PARAMETER, REQUIRED, read_baseline
from gate_server.domain.runs import get_run
from gate_server.domain.uploads import answered, ingest_run
from gate_server.github.workload_check import check_before_accept
from gate_server.http.answers import Answer, ApiError
from gate_server.http.app_mode import after_upload as github_after_upload
from gate_server.http.endpoints import (
    authenticated,
    authenticated_in_loop,
    base_url,
    parse_json,
    read_body,
    require_json,
)
from gate_server.http.openapi import (
    ACCEPT_REASON,
    BODY_ERRORS,
    NOT_BLANK,
    endpoint,
    error,
    header,
    json_body,
    query,
)
from gate_server.numbers import whole_number
from gate_server.services import Services, services

# Uploads one server process ingests at once. Re-gating is CPU-bound Python, which holds the
# GIL: uploads ingested side by side only trade it. Two let one compute while the other waits
# on PostgreSQL's round trips. In worker threads, 2 against 1 served 16% more uploads/s on a
# 2-core machine, 4-11% on 16 cores, and 40 at once 7% fewer than 1 (docs/results.md,
# "Uploads at once in one server process").
UPLOADS_AT_ONCE = 2
# Uploads are ingested in the event loop's own thread, their CI tokens looked up there too
# (gate_server/db/engine.py run_in_event_loop), where worker threads did it before. Handing the
# GIL between the loop and the workers cost 9-28% of the server's CPU per upload. In the loop,
# PostgreSQL's statements are awaited, so a second upload computes meanwhile. Only there, and
# only for documents up to LOOP_BODY_BYTES: SQLite's statements block the thread that runs them
# (another writer's lock, a flush), and parsing and re-gating a large document is seconds of
# Python; either in the loop stalls every other request, /healthz and /readyz included
# (benchmarks/reliability/health_under_uploads.py; docs/server.md, "Uploads in the event loop").
LOOP_BODY_BYTES = 1024 * 1024  # larger uploads are ingested in a worker thread on any database


def _in_loop(svc: Services, body_bytes: int = 0) -> bool:
    return svc.database.awaited and body_bytes <= LOOP_BODY_BYTES


def _upload_slots(request: Request) -> anyio.CapacityLimiter:
    """The bound on uploads being ingested, made in the app's event loop on first use."""
    state = request.app.state
    slots = getattr(state, "upload_slots", None)
    if slots is None:
        slots = state.upload_slots = anyio.CapacityLimiter(UPLOADS_AT_ONCE)
    return slots


BISECTION_HEADER = "x-kernalin-bisection"  # the action sends it for a dispatched bisection run


def bisection_of(request: Request) -> int | None:
    """The bisection an upload measures a commit for (its header), or None without one."""
    value = request.headers.get(BISECTION_HEADER)
    if value is None or not value.strip():
        return None
    number = whole_number(value.strip())
    if number is None or number < 1:
        raise ApiError(
            422,
            "invalid_request",
            f"{BISECTION_HEADER}: {value[:40]!r} is not a bisection id; send the number the "
            "server's dispatch gave as the workflow's `bisection` input, or no header",
        )
    return number


@endpoint(
    "post",
    "Upload a signed results document; the server re-gates it from the samples",
    bearer=True,
    parameters=[
        header("X-Kernalin-Timestamp", "Unix seconds, within 5 minutes"),
        header(
            "X-Kernalin-Signature",
            "sha256=<hex HMAC-SHA256 of 'timestamp.body' keyed by the token>",
        ),
    ],
    body={"$ref": "#/components/schemas/ResultsDocument"},
    responses={
        "201": json_body("UploadAnswer", "stored and gated"),
        "200": json_body("UploadAnswer", "the same run_id and bytes again: the stored answer"),
        **BODY_ERRORS,
        "409": error("run_id already used with a different document"),
        "415": error("the body is not application/json"),
        "422": error("not a valid results document, or too many samples"),
    },
)
async def upload_run(request: Request) -> Response:
    svc = services(request)
    slots = _upload_slots(request)
    # In its turn too: a token lookup beside an upload being ingested only trades the GIL.
    if _in_loop(svc):
        token, secret = await authenticated_in_loop(request, slots)
    else:
        token, secret = await authenticated(request, slots)
    require_json(request)
    body = await read_body(request, svc.settings.max_body_bytes)
    signature = check_signature(
        secret,
        request.headers.get("x-kernalin-timestamp"),
        request.headers.get("x-kernalin-signature"),
        body,
        tolerance_s=svc.settings.timestamp_tolerance_s,
    )
    in_loop = _in_loop(svc, len(body))
    ingest = functools.partial(
        ingest_run,
        svc.database,
        svc.settings,
        svc.signer,
        token,
        body,
        signature,
        base_url(request),
        documents=svc.documents,
        bisection=bisection_of(request),
    )
    if in_loop:
        async with slots:
            ingested = await run_in_event_loop(ingest)
    else:
        ingested = await anyio.to_thread.run_sync(ingest, limiter=slots)
    answer = Answer(201 if ingested.stored else 200, ingested.body)
    # App mode: the server posts the PR's comment and status itself (gate_server/github).
    task = github_after_upload(svc, answer)
    return JSONResponse(answer.body, status_code=answer.status, background=task)


@endpoint(
    "get",
    "A stored run and its verdict (?document=true adds the uploaded document)",
    bearer=True,
    parameters=[query("document", "boolean")],
    responses={
        "200": json_body("RunView", "the run"),
        "404": error("no such run visible to this token"),
    },
)
async def read_run(request: Request) -> Response:
    database = services(request).database
    token, _ = await authenticated(request)
    with_document = request.query_params.get("document", "").lower() in ("1", "true", "yes")
    view = await run_in_threadpool(
        get_run, database, token, request.path_params["run_id"], with_document=with_document
    )
    return JSONResponse(answered(view, base_url(request)))


def _accept_reason(body: bytes) -> str:
    data: Any = parse_json(body)
    if not isinstance(data, dict) or not isinstance(data.get("reason"), str):
        raise ApiError(
            422,
            "missing_reason",
            'send {"reason": "why this run is the new normal"}',
            [{"field": "reason", "problem": "required string"}],
        )
    return check_reason(str(data["reason"]))


@endpoint(
    "post",
    "Accept a run: it becomes the baseline for its base branch, environment and workload",
    bearer=True,
    body={"type": "object", "required": ["reason"], "properties": {"reason": ACCEPT_REASON}},
    responses={
        "200": json_body("Acceptance", "accepted (or already accepted)"),
        **BODY_ERRORS,
        "404": error("no such run visible to this token"),
        "409": error("App mode: GitHub says the run's workload is not the file at its commit"),
        "415": error("the body is not application/json"),
        "422": error("no reason given"),
        "502": error("App mode: GitHub could not be asked about the run's workload"),
    },
)
async def accept(request: Request) -> Response:
    svc = services(request)
    database = svc.database
    token, _ = await authenticated(request)
    run_id = request.path_params["run_id"]
    run = await run_in_threadpool(check_accept_scope, database, token, run_id)
    require_json(request)
    reason = _accept_reason(await read_body(request, MAX_ACCEPT_BODY))
    await run_in_threadpool(check_before_accept, svc.github.app, database, run)
    result = await run_in_threadpool(
        lambda: accept_run(
            database, run_id, actor=actor_of(token), reason=reason, via="api", token_id=token.id
        )
    )
    return JSONResponse(result)


@endpoint(
    "get",
    "The public key that verifies receipts (rnx receipt verify --url)",
    responses={"200": json_body("ReceiptKey", "algorithm, key id and PEM public key")},
)
async def receipt_key(request: Request) -> Response:
    return JSONResponse(services(request).signer.public_info())


@endpoint(
    "get",
    "The baseline runs an upload would be compared with now, for adaptive sampling (CI tokens)",
    bearer=True,
    parameters=[
        query("repository", "string", max_length=MAX_PARAMETER),
        *(
            query(name, "string", pattern=NOT_BLANK, max_length=MAX_PARAMETER, required=True)
            for name in REQUIRED
        ),
    ],
    responses={
        "200": json_body("Baseline", "the baseline documents, newest first (none yet: empty)"),
        "422": error("a parameter is missing, too long, or the workload path is refused"),
    },
)
async def baselines(request: Request) -> Response:
    svc = services(request)
    token, _ = await authenticated(request)
    answer = await run_in_threadpool(
        lambda: read_baseline(
            svc.database,
            token,
            request.query_params,
            history=svc.settings.baseline_history,
            gate=svc.settings.gate,
        )
    )
    # A sync iterator: Starlette reads each chunk (a database read) in a worker thread.
    return StreamingResponse(answer.chunks(svc.database), media_type="application/json")


routes = [
    Route("/api/v1/runs", upload_run, methods=["POST"]),
    Route("/api/v1/runs/{run_id}", read_run, methods=["GET"]),
    Route("/api/v1/runs/{run_id}/accept", accept, methods=["POST"]),
    Route("/api/v1/baselines", baselines, methods=["GET"]),
    Route("/api/v1/receipt-key", receipt_key, methods=["GET"]),
]
