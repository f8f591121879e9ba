"""The gate server's MCP endpoint, /mcp (streamable HTTP, the official `mcp` SDK): an agent
token is checked and rate-limited before the SDK sees a request; each tool checks its scope,
runs one function of gate_server/http/mcp_tools.py in a worker thread and is audited as
"agent <name> for <user>"."""

from __future__ import annotations

import logging
from collections.abc import Callable
from importlib import resources
from typing import Any

import anyio
import yaml
from mcp.server.fastmcp import Context, FastMCP
from mcp.server.fastmcp.exceptions import ToolError
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gate_server.db import audit
from gate_server.domain.agents import (
    ACCEPT,
    BENCHMARK,
    READ,
    UPLOAD,
    Agent,
    RateLimit,
    authenticate_agent,
)
from gate_server.domain.agents import require_scope as check_scope
from gate_server.errors import GateServerError, Refused
from gate_server.http import mcp_tools
from gate_server.http.answers import ApiError, error_response, refusal_response
from gate_server.http.endpoints import parse_json, read_body
from gate_server.http.mcp_tools import Answer
from gate_server.services import Services, services
from gate_server.settings import ServerSettings

# Calls one agent token may make a minute, per server process: far above what an agent reading
# verdicts needs, far below what would crowd out CI's uploads.
CALLS_PER_MINUTE = 120
_AGENT = "rnx.agent"  # where the ASGI scope carries the authenticated agent to the tools
_READ_ONLY = ToolAnnotations(readOnlyHint=True, openWorldHint=False)
_WRITE = ToolAnnotations(readOnlyHint=False, destructiveHint=False, openWorldHint=False)
GUIDE = "reading-a-verdict.txt"


class AgentAuth:
    """Refuse a request without a valid agent token (the JSON error shape, 401/403/429) before
    the MCP session manager reads it: /mcp is never anonymous. A POST's body is read here,
    bounded, and refused (400/413) unless it is JSON: the SDK answers 500 to bytes that are
    not UTF-8."""

    def __init__(self, app: ASGIApp, limit: RateLimit, max_body: int) -> None:
        self.app = app
        self.limit = limit
        self.max_body = max_body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        database = services(request).database
        header = request.headers.get("authorization")
        try:
            agent = await anyio.to_thread.run_sync(authenticate_agent, database, header)
            self.limit.take(agent.token.id)
            if request.method == "POST":
                body = await read_body(request, self.max_body)
                parse_json(body)
                receive = _replay(body, receive)
        except ApiError as e:
            response = error_response(e.status, e.code, e.message, headers=e.headers)
            await response(scope, receive, send)
            return
        except Refused as e:
            await refusal_response(e)(scope, receive, send)
            return
        scope[_AGENT] = agent
        await self.app(scope, receive, send)


def _replay(body: bytes, receive: Receive) -> Receive:
    """The body, read already, handed to the SDK as its first message; then the client's own
    messages (its disconnect, which ends a response stream)."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if sent:
            return await receive()
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replay


def _audited(
    svc: Services, agent: Agent, tool: str, arguments: dict[str, Any], outcome: str
) -> None:
    shown = {k: v[:200] if isinstance(v, str) else v for k, v in arguments.items()}
    with svc.database.write() as conn:
        audit.record(
            conn,
            actor=agent.actor,
            token_id=agent.token.id,
            action=f"agent.{tool}",
            subject=f"repository:{agent.token.repository}",
            details={"arguments": shown, "outcome": outcome},
        )


def _tool_code(e: Exception) -> str:
    """The code a tool's refusal carries: the one the tool gave it, else `invalid_argument`
    (the core's own checks of a value, a NotFound of a name the agent passed, ...)."""
    given = vars(e).get("code")  # set on the instance only where a code was given
    return given if isinstance(given, str) else "invalid_argument"


async def _call(
    ctx: Context[Any, Any, Any],
    tool: str,
    scope: str,
    arguments: dict[str, Any],
    work: Callable[[Services, Agent], Answer],
) -> CallToolResult:
    """Check the scope, do the work in a worker thread, audit it, answer data and text."""
    request = ctx.request_context.request
    if not isinstance(request, Request) or not isinstance(request.scope.get(_AGENT), Agent):
        raise ToolError("no agent token on this request")
    svc, agent = services(request), request.scope[_AGENT]

    def run() -> Answer:
        check_scope(svc.database, agent, scope, tool)
        try:
            answer = work(svc, agent)
        except (ApiError, GateServerError) as e:
            _audited(svc, agent, tool, arguments, f"refused: {_tool_code(e)}")
            raise
        _audited(svc, agent, tool, arguments, "done")
        return answer

    try:
        answer = await anyio.to_thread.run_sync(run)
    except (ApiError, GateServerError) as e:
        raise ToolError(f"{_tool_code(e)}: {e}") from None
    return CallToolResult(
        content=[TextContent(type="text", text=answer.text)], structuredContent=answer.data
    )


def _register_reads(mcp: FastMCP) -> None:
    @mcp.tool(annotations=_READ_ONLY)
    async def run_verdict(
        ctx: Context[Any, Any, Any],
        run_id: str = "",
        pull_request: int | None = None,
        branch: str = "",
    ) -> CallToolResult:
        """The verdict (PASS/WARN/BLOCK), reasons and per-configuration table of one run: give
        run_id, or pull_request (its newest run), or branch (its newest run)."""
        args = {"run_id": run_id, "pull_request": pull_request, "branch": branch}
        return await _call(
            ctx,
            "run_verdict",
            READ,
            args,
            lambda s, a: mcp_tools.run_verdict(s, a, run_id, pull_request, branch),
        )

    @mcp.tool(annotations=_READ_ONLY)
    async def baselines(
        ctx: Context[Any, Any, Any],
        branch: str,
        environment: str,
        workload: str,
        documents: bool = False,
    ) -> CallToolResult:
        """The baseline runs an upload of this branch, environment key and workload path
        would be compared with now; documents=true adds their results documents (samples
        included) and the server's thresholds, to gate against them locally."""
        args = {"branch": branch, "environment": environment, "workload": workload}
        return await _call(
            ctx,
            "baselines",
            READ,
            {**args, "documents": documents},
            lambda s, a: mcp_tools.baselines(s, a, branch, environment, workload, documents),
        )


def _register_history(mcp: FastMCP) -> None:
    @mcp.tool(annotations=_READ_ONLY)
    async def history(
        ctx: Context[Any, Any, Any], branch: str, environment: str, workload: str, limit: int = 50
    ) -> CallToolResult:
        """A baseline branch's history for one environment and workload: each run's median
        per configuration (ns), and the change points found in it."""
        args = {"branch": branch, "environment": environment, "workload": workload, "limit": limit}
        return await _call(
            ctx,
            "history",
            READ,
            args,
            lambda s, a: mcp_tools.history(s, a, branch, environment, workload, limit),
        )

    @mcp.tool(annotations=_READ_ONLY)
    async def change_points(ctx: Context[Any, Any, Any], status: str = "open") -> CallToolResult:
        """The repository's change points (regressions in baseline history): open,
        acknowledged or resolved."""
        return await _call(
            ctx,
            "change_points",
            READ,
            {"status": status},
            lambda s, a: mcp_tools.open_change_points(s, a, status),
        )

    @mcp.tool(annotations=_READ_ONLY)
    async def compare_runs(
        ctx: Context[Any, Any, Any], base_run_id: str, head_run_id: str
    ) -> CallToolResult:
        """Gate one stored run (head) against another (base) with the server's thresholds."""
        args = {"base_run_id": base_run_id, "head_run_id": head_run_id}
        return await _call(
            ctx,
            "compare_runs",
            READ,
            args,
            lambda s, a: mcp_tools.compare_runs(s, a, base_run_id, head_run_id),
        )

    @mcp.tool(annotations=_READ_ONLY)
    async def compare_hardware(
        ctx: Context[Any, Any, Any], branch: str, workload: str, environments: list[str]
    ) -> CallToolResult:
        """One workload's newest baseline on 2-6 environments (keys; the first is the
        baseline): time, throughput, the ratio to the baseline and, where prices are set,
        cost per million items."""
        args = {"branch": branch, "workload": workload, "environments": environments[:6]}
        return await _call(
            ctx,
            "compare_hardware",
            READ,
            args,
            lambda s, a: mcp_tools.compare_hardware(s, a, branch, workload, environments),
        )

    @mcp.tool(annotations=_READ_ONLY)
    async def environments(ctx: Context[Any, Any, Any]) -> CallToolResult:
        """The environments (hardware and software keys) with baselines in this repository,
        per branch and workload, with their hourly prices where set."""
        return await _call(ctx, "environments", READ, {}, mcp_tools.environments)


def _register_writes(mcp: FastMCP) -> None:
    @mcp.tool(annotations=_WRITE)
    async def upload(ctx: Context[Any, Any, Any], document: dict[str, Any]) -> CallToolResult:
        """Store and gate a results document (what `rnx bench` writes), as CI's upload
        would; needs the upload scope."""
        run_id = str(document.get("run_id", ""))[:60]
        return await _call(
            ctx,
            "upload",
            UPLOAD,
            {"run_id": run_id},
            lambda s, a: mcp_tools.upload(s, a, document),
        )

    @mcp.tool(annotations=_WRITE)
    async def accept(ctx: Context[Any, Any, Any], run_id: str, reason: str) -> CallToolResult:
        """Accept a run's slowdown: it becomes the baseline of its base branch. Needs the
        accept scope, which only a code owner grants; the reason is kept in the audit log."""
        return await _call(
            ctx,
            "accept",
            ACCEPT,
            {"run_id": run_id, "reason": reason},
            lambda s, a: mcp_tools.accept(s, a, run_id, reason),
        )


def _register_benchmark(mcp: FastMCP) -> None:
    @mcp.tool(annotations=_WRITE)
    async def start_benchmark(
        ctx: Context[Any, Any, Any], workloads: list[str] | None = None
    ) -> CallToolResult:
        """Check the benchmark scope and record that a local benchmark starts: `rnx mcp` calls
        it before its `benchmark` tool measures the agent's working tree."""
        shown = [w[:200] for w in (workloads or [])[:20]]
        return await _call(
            ctx,
            "start_benchmark",
            BENCHMARK,
            {"workloads": shown},
            lambda s, a: Answer({"allowed": True}, "the benchmark scope is granted"),
        )


def _register_resources(mcp: FastMCP, settings: ServerSettings) -> None:
    @mcp.resource("kernalin://gate", mime_type="application/yaml")
    def gate_in_force() -> str:
        """The gate: section in force on this server: its thresholds override kernalin.yml's."""
        gate = settings.gate.model_dump(by_alias=True, mode="json", exclude_none=True)
        return yaml.safe_dump({"gate": gate}, sort_keys=False)

    @mcp.resource("kernalin://docs/reading-a-verdict", mime_type="text/plain")
    def reading_a_verdict() -> str:
        """How to read a verdict: tiers, reasons, the per-configuration table."""
        return resources.files("gate_server.http").joinpath(GUIDE).read_text(encoding="utf-8")


def build(settings: ServerSettings) -> tuple[ASGIApp, StreamableHTTPSessionManager]:
    """The /mcp ASGI app and its session manager (the app's lifespan runs it)."""
    # The SDK's constructor sets up logging as if it owned the process (logging.basicConfig
    # with rich's handler, which wraps lines); here it is a guest: the server's log stays as is.
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    mcp = FastMCP(
        "kernalin",
        instructions="The kernalin performance gate: verdicts, baselines, history, change "
        "points of one repository; upload and accept where the token's scopes allow.",
        stateless_http=True,
        log_level="WARNING",  # the SDK logs every request at INFO otherwise
        streamable_http_path="/mcp",
        max_request_body_size=settings.max_body_bytes,
        # Requests carry a bearer token, never a cookie: another site cannot make a browser
        # send one, so DNS rebinding gains nothing, and the server answers on any host name.
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )
    root.handlers[:] = handlers
    root.setLevel(level)
    _register_reads(mcp)
    _register_history(mcp)
    _register_writes(mcp)
    _register_benchmark(mcp)
    _register_resources(mcp, settings)
    mcp.streamable_http_app()  # makes the session manager
    manager = mcp.session_manager

    async def handle(scope: Scope, receive: Receive, send: Send) -> None:
        await manager.handle_request(scope, receive, send)

    return AgentAuth(handle, RateLimit(CALLS_PER_MINUTE), settings.max_body_bytes), manager
