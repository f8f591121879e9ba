"""A bare Starlette app that answers an upload without doing anything with it.

benchmarks/server/server_load.py measures the gate server's uploads per second beside this app's,
with
the same bodies, client and threads, so the ratio says what the server's own work costs on a
machine whose speed changes from minute to minute. Run it as uvicorn does:
`python -m uvicorn benchmarks.server.echo_app:app --port N`.
"""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route


async def upload(request: Request) -> JSONResponse:
    data = await request.body()
    return JSONResponse({"bytes": len(data)}, status_code=201)


app = Starlette(routes=[Route("/api/v1/runs", upload, methods=["POST"])])
