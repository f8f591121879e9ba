"""The ASGI app factory, create_app: routes from each part, the error handlers, and the shared
services (database, keys, GitHub integration, dashboard state) built once at startup."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import MutableHeaders, QueryParams
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gate_server.db.engine import run_in_event_loop
from gate_server.http import api, autosync, bisections, change_points, health, mcp, traces
from gate_server.http.answers import EXCEPTION_HANDLERS, error_response
from gate_server.http.dashboard.acting import routes as acting_routes
from gate_server.http.dashboard.github_sign_in import routes as github_sign_in_routes
from gate_server.http.dashboard.routes import routes as dashboard_routes
from gate_server.http.github_routes import routes as github_routes
from gate_server.http.openapi import openapi_document
from gate_server.jobs.handlers import HANDLERS, LANES
from gate_server.jobs.worker import OutboxWorker
from gate_server.services import Services
from gate_server.settings import ServerSettings, load_settings
from rnx import __version__


class NoSniff:
    """Every answer, JSON included, tells browsers not to guess its content type."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def send_with_header(message: Message) -> None:
            if message["type"] == "http.response.start":
                MutableHeaders(scope=message).setdefault("X-Content-Type-Options", "nosniff")
            await send(message)

        await self.app(scope, receive, send_with_header if scope["type"] == "http" else send)


# Request headers larger than this, all together, are refused with 431. `rnx serve` lets its
# HTTP parser take up to MAX_PARSED_HEADER_BYTES so such a request is read whole and answered;
# past that the parser itself refuses it (400) and closes the connection.
MAX_HEADER_BYTES = 64 * 1024
MAX_PARSED_HEADER_BYTES = 1024 * 1024


class HeaderLimit:
    """431 in the one error shape for headers over MAX_HEADER_BYTES."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            size = sum(len(k) + len(v) + 4 for k, v in scope["headers"])
            if size > MAX_HEADER_BYTES:
                response = error_response(
                    431,
                    "headers_too_large",
                    f"the request's headers have {size} bytes; this server takes at most "
                    f"{MAX_HEADER_BYTES}",
                    headers={"Connection": "close"},
                )
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


class QueryText:
    """400 in the one error shape for a query parameter holding a NUL character: no stored value
    holds one, and PostgreSQL refuses to compare text with it (a 500 in every query it reached).
    One check here keeps every page and endpoint, present and future, from passing it on."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            params = QueryParams(scope.get("query_string", b""))
            bad = [name for name, value in params.multi_items() if "\x00" in name + value]
            if bad:
                response = error_response(
                    400,
                    "invalid_parameter",
                    f"the query parameter {bad[0]!r} holds a NUL character; remove it",
                    [{"field": name, "problem": "holds a NUL character"} for name in bad],
                )
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


def create_app(settings: ServerSettings | None = None) -> Starlette:
    """The ASGI app: the API, the GitHub webhook and PR accept API, and the dashboard."""
    settings = settings or load_settings()
    routes: list[BaseRoute] = [
        *health.routes,
        *api.routes,
        *change_points.routes,
        *traces.routes,
        *bisections.routes,
        *autosync.routes,
        *github_routes,
        *dashboard_routes,
        *acting_routes,
        *github_sign_in_routes,
    ]

    async def openapi(request: Request) -> Response:
        return JSONResponse(openapi_document(request.app.routes, version=__version__))

    routes.append(Route("/openapi.json", openapi, methods=["GET"], include_in_schema=False))
    # The MCP endpoint for coding agents (docs/agents.md); its sessions live in the lifespan.
    mcp_app, mcp_sessions = mcp.build(settings)
    routes.append(Route("/mcp", mcp_app, include_in_schema=False))

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        svc = await run_in_threadpool(Services.start, settings)
        app.state.services = svc
        worker = OutboxWorker(
            svc,
            HANDLERS,
            poll_s=settings.outbox_poll_ms / 1000,
            lease_s=settings.outbox_lease_s,
            lanes=LANES,
        )
        worker.start()
        app.state.outbox_worker = worker
        try:
            async with mcp_sessions.run():
                yield
        finally:
            await worker.stop()
            await run_in_event_loop(svc.close)

    return Starlette(
        routes=routes,
        middleware=[Middleware(NoSniff), Middleware(HeaderLimit), Middleware(QueryText)],
        exception_handlers=EXCEPTION_HANDLERS,
        lifespan=lifespan,
    )
