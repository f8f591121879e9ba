"""/healthz (the process answers) and /readyz (it can reach its database)."""

from __future__ import annotations

from sqlalchemy.exc import SQLAlchemyError
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from gate_server.http.answers import error_response, log
from gate_server.http.openapi import error, operation
from gate_server.services import services


@operation("get", {"summary": "The process is up", "responses": {"200": {"description": "ok"}}})
async def healthz(request: Request) -> Response:
    return JSONResponse({"status": "ok"})


@operation(
    "get",
    {
        "summary": "The database answers, its schema is current, and it takes writes",
        "responses": {"200": {"description": "ready"}, "503": error("the database is unreachable")},
    },
)
async def readyz(request: Request) -> Response:
    database = services(request).database
    try:
        await run_in_threadpool(database.ping)
    except SQLAlchemyError as e:
        log.warning("readyz: database unreachable: %s", e)
        return error_response(503, "database_unavailable", "the database does not answer")
    # Ready means "can store an upload": a database that answers reads but takes no writes
    # (read-only, a standby after a failover, a full disk) is not.
    try:
        await run_in_threadpool(database.probe_write)
    except SQLAlchemyError as e:
        log.warning("readyz: database takes no writes: %s", str(e).splitlines()[0])
        return error_response(503, "database_read_only", "the database answers but takes no writes")
    return JSONResponse({"status": "ready", "database": database.dialect})


routes = [
    Route("/healthz", healthz, methods=["GET"]),
    Route("/readyz", readyz, methods=["GET"]),
]
