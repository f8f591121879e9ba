"""`rnx mcp`: the MCP server a local coding agent starts over stdio. It offers the gate
server's tools and resources (forwarded to KERNALIN_URL/mcp with the agent token in
KERNALIN_TOKEN) and one tool of its own, `benchmark`: `rnx check` on the agent's working tree,
within a budget, its progress sent as MCP progress notifications."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import httpx
from mcp import ClientSession, types
from mcp.client.streamable_http import streamable_http_client
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from pydantic import AnyUrl

from rnx.errors import UserError

MAX_BUDGET_S = 3600
MAX_WORKLOADS = 20
# Seconds of the budget kept for stopping `rnx check` (at most a quarter of the budget): its
# SIGTERM comes this long before the budget ends, so the answer comes within the budget.
STOP_GRACE_S = 3.0
BENCHMARK = types.Tool(
    name="benchmark",
    description=(
        "Benchmark the working tree's workloads against the merge-base with the base branch "
        "(paired mode, in a git worktree) and gate them as CI would: the verdict, reasons and "
        "table. Runs on this machine, within budget_s seconds; needs the benchmark scope."
    ),
    inputSchema={
        "type": "object",
        "properties": {
            "workloads": {
                "type": "array",
                "items": {"type": "string", "maxLength": 500},
                "maxItems": MAX_WORKLOADS,
                "description": "workload paths in the repository (default: kernalin.yml's)",
            },
            "base": {"type": "string", "maxLength": 200, "default": "main"},
            "budget_s": {"type": "number", "minimum": 1, "maximum": MAX_BUDGET_S, "default": 600},
            "samples": {"type": "integer", "minimum": 8, "maximum": 10000},
            "processes": {"type": "integer", "minimum": 1, "maximum": 64},
        },
    },
    annotations=types.ToolAnnotations(readOnlyHint=True, openWorldHint=False),
)


def _check_command(arguments: dict[str, Any]) -> list[str]:
    """`rnx check --json` for the tool's arguments; paths go after `--`, so none is an option."""
    command = [sys.executable, "-m", "rnx_cli", "check", "--json"]
    base = str(arguments.get("base") or "main")
    if base.startswith("-") or not base.strip():
        raise ValueError(f"base {base[:60]!r}: a branch name")
    command += ["--base", base]
    for name in ("samples", "processes"):
        if arguments.get(name) is not None:
            command += [f"--{name}", str(int(arguments[name]))]
    workloads = [str(w) for w in arguments.get("workloads") or []]
    return [*command, "--", *workloads[:MAX_WORKLOADS]]


async def run_check(root: Path, arguments: dict[str, Any], report: Any) -> types.CallToolResult:
    """`rnx check` in a child process, killed when the budget is spent; `report(done, message)`
    is called for each line of its progress."""
    budget = float(arguments.get("budget_s") or 600)
    if not 1 <= budget <= MAX_BUDGET_S:
        return _error(f"budget_s: 1 to {MAX_BUDGET_S} seconds")
    try:
        command = _check_command(arguments)
    except ValueError as e:
        return _error(str(e))
    started = time.monotonic()
    grace = min(STOP_GRACE_S, budget / 4)
    worktrees_before = _base_worktrees(root)
    # A session of its own: the harness's worker processes go with it when the budget is spent.
    process = await anyio.open_process(
        command, cwd=root, stdin=subprocess.DEVNULL, start_new_session=True
    )
    out = bytearray()
    last = ""

    async def read_out() -> None:
        if process.stdout is not None:
            async for chunk in process.stdout:
                out.extend(chunk)

    async def read_progress() -> None:
        nonlocal last
        if process.stderr is None:
            return
        buffered = b""
        async for chunk in process.stderr:
            buffered += chunk
            *lines, buffered = buffered.split(b"\n")
            for line in lines:
                last = line.decode("utf-8", "replace").strip()[:300]
                if last:
                    await report(min(time.monotonic() - started, budget), budget, last)

    try:
        with anyio.move_on_after(budget - grace) as scope:
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(read_out)
                tasks.start_soon(read_progress)
                await process.wait()
    finally:
        # Killed, if it has not stopped, with part of the grace left for the answer itself.
        killed = await _stop(process, grace * 0.6)
        if killed:  # it could not remove its checkout of the merge-base itself
            for path in _base_worktrees(root) - worktrees_before:
                _git_quiet(root, "worktree", "remove", "--force", path)
    if scope.cancelled_caught:
        return _error(f"budget_exhausted: the check did not finish within {budget:.0f} s")
    try:
        answer = json.loads(out)
    except ValueError:
        return _error(f"rnx check failed (exit {process.returncode}): {last}")
    lines = [f"{answer['tier']} (exit {answer['exit_code']} in CI, gate.mode {answer['mode']})"]
    for each in answer["workloads"]:
        lines += [f"{each['workload']}: {each['tier']}"]
        lines += [f"- {reason}" for reason in each["reasons"][:10]]
    return types.CallToolResult(
        content=[types.TextContent(type="text", text="\n".join(lines))], structuredContent=answer
    )


async def _stop(process: anyio.abc.Process, grace: float) -> bool:
    """Let `rnx check` remove its worktree and stop its workers (SIGTERM), then kill what is
    left of its session; its pipes are closed while the event loop still runs. True when it
    had to be killed."""
    killed = False
    if process.returncode is None:
        process.terminate()
        with anyio.move_on_after(grace):
            await process.wait()
        killed = process.returncode is None
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    await process.aclose()
    return killed


def _git_quiet(root: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, timeout=60)
    return done.stdout


def _base_worktrees(root: Path) -> set[str]:
    """The checkouts of a merge-base that `rnx check` made (action/paired.py: rnx-base-*)."""
    listed = _git_quiet(root, "worktree", "list", "--porcelain").splitlines()
    paths = (line.removeprefix("worktree ") for line in listed if line.startswith("worktree "))
    return {p for p in paths if Path(p).match("rnx-base-*/base")}


def _error(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], isError=True)


@asynccontextmanager
async def gate_session(url: str, token: str) -> AsyncIterator[ClientSession]:
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        httpx.AsyncClient(headers=headers, timeout=httpx.Timeout(30, read=300)) as http,
        streamable_http_client(f"{url.rstrip('/')}/mcp", http_client=http) as (read, write, _),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


def build(gate: ClientSession, root: Path) -> Server[Any, Any]:
    server: Server[Any, Any] = Server("kernalin")

    @server.list_tools()
    async def list_tools() -> list[types.Tool]:
        remote = [t for t in (await gate.list_tools()).tools if t.name != "start_benchmark"]
        return [*remote, BENCHMARK]

    @server.call_tool(validate_input=True)
    async def call_tool(name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        if name != BENCHMARK.name:
            return await gate.call_tool(name, arguments)
        # The benchmark scope is the gate's to check: it refuses (and audits) a token without.
        workloads = arguments.get("workloads") or []
        allowed = await gate.call_tool("start_benchmark", {"workloads": workloads})
        if allowed.isError:
            return allowed
        context = server.request_context
        token = context.meta.progressToken if context.meta else None

        async def report(done: float, total: float, message: str) -> None:
            if token is not None:
                await context.session.send_progress_notification(token, done, total, message)

        return await run_check(root, arguments, report)

    @server.list_resources()
    async def list_resources() -> list[types.Resource]:
        return list((await gate.list_resources()).resources)

    @server.read_resource()
    async def read_resource(uri: AnyUrl) -> str:
        found = await gate.read_resource(uri)
        return "".join(getattr(c, "text", "") for c in found.contents)

    return server


def check_gate(url: str, token: str) -> None:
    """One request before the session: an unreachable server or a refused token is one line
    naming the problem, not a stack of the SDK's tasks."""
    try:
        answer = httpx.post(
            f"{url.rstrip('/')}/mcp",
            json={"jsonrpc": "2.0", "id": 0, "method": "ping"},
            headers={
                "Authorization": f"Bearer {token}",
                "Accept": "application/json, text/event-stream",
            },
            timeout=30,
        )
    except httpx.HTTPError as e:
        raise UserError(f"cannot reach the gate server at {url} (KERNALIN_URL): {e}") from None
    if answer.status_code >= 400:
        try:
            message = str(answer.json()["error"]["message"])
        except (ValueError, KeyError, TypeError):
            message = f"HTTP {answer.status_code} from {url}/mcp"
        raise UserError(f"the gate server refused KERNALIN_TOKEN: {message[:300]}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="rnx mcp",
        description="The MCP server for a coding agent, over stdio (docs/agents.md). Reads "
        "KERNALIN_URL and KERNALIN_TOKEN (an agent token: rnx token create --agent).",
    )
    parser.add_argument("--root", default=".", help="the repository's working tree (default .)")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    url, token = os.environ.get("KERNALIN_URL", ""), os.environ.get("KERNALIN_TOKEN", "")
    if not url.startswith(("http://", "https://")):
        raise UserError("set KERNALIN_URL to the gate server, e.g. https://gate.example.com")
    if not token.startswith("rnx_agent_"):
        raise UserError("set KERNALIN_TOKEN to an agent token (rnx token create --agent NAME)")
    root = Path(args.root).resolve()
    check_gate(url, token)

    async def serve() -> None:
        async with gate_session(url, token) as gate, stdio_server() as (read, write):
            server = build(gate, root)
            await server.run(read, write, server.create_initialization_options())

    anyio.run(serve)
    return 0
