"""`rnx mcp` over stdio, started and driven by the `mcp` SDK's own stdio client, forwarding to
the real gate server on loopback; its `benchmark` tool runs `rnx check` on a git checkout of
examples/attention.py (a 2x slower edit BLOCKs, the unchanged tree never does, the budget holds)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from gate_server.clock import utcnow
from gate_server.db import alerts, audit, open_database
from gate_server.domain.agents import issue_agent_token
from testbed.live_server import LiveServer
from tests.rnx_cli.conftest import ROOT, slow_down

FAST = {"samples": 16, "processes": 2}
# The gate tests that measure (seconds each) run on SQLite only; the forwarding of the gate's
# tools is what runs on both databases.
ON_SQLITE = pytest.mark.parametrize("shared_database_url", ["sqlite"], indirect=True)


def agent_token(
    database_url: str,
    workspace: str,
    scopes: tuple[str, ...],
    expires_in: timedelta = timedelta(hours=1),
) -> str:
    """The secret of a new agent token of alice's for acme/kernels' main in `workspace`."""
    database = open_database(database_url)
    try:
        return issue_agent_token(
            database,
            workspace=workspace,
            repository="acme/kernels",
            branches=["main"],
            name="claude",
            for_user="alice",
            scopes=scopes,
            expires_at=utcnow() + expires_in,
            accept_granted_by=None,
            actor="test",
        )[1]
    finally:
        database.close()


@pytest.fixture
def gate(shared_server: LiveServer) -> LiveServer:
    """The shared server (a test keeps to its own `workspace` there)."""
    return shared_server


def stdio(
    server: LiveServer, secret: str, repo: Path, steps: Callable[[ClientSession], Any]
) -> Any:
    env = {
        **os.environ,
        "KERNALIN_URL": server.url,
        "KERNALIN_TOKEN": secret,
        "PYTHONPATH": str(ROOT),
    }
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "rnx_cli", "mcp", "--root", str(repo)], env=env
    )

    async def go() -> Any:
        async with stdio_client(params) as (read, write), ClientSession(read, write) as s:
            await s.initialize()
            return await steps(s)

    # In a thread of its own: a test run before this one in the same process may have left
    # an event loop marked running in this thread, where asyncio.run() refuses to start.
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, go()).result()


@ON_SQLITE
def test_benchmark_blocks_a_2x_slower_edit_and_passes_the_unchanged_tree(
    gate: LiveServer, workspace: str, checkout: Path
) -> None:
    secret = agent_token(gate.database_url, workspace, ("read", "benchmark"))
    progress: list[str] = []

    async def note(done: float, total: float | None, message: str | None) -> None:
        progress.append(message or "")

    async def steps(s: ClientSession) -> list[Any]:
        names = [t.name for t in (await s.list_tools()).tools]
        unchanged = slow_down(checkout)
        slower = await s.call_tool("benchmark", FAST, progress_callback=note)
        (checkout / "kernels" / "attention.py").write_text(unchanged)
        same = await s.call_tool("benchmark", FAST)
        return [names, slower, same]

    names, slower, same = stdio(gate, secret, checkout, steps)
    assert "benchmark" in names and "run_verdict" in names and "start_benchmark" not in names
    assert not slower.isError, slower.content
    assert slower.structuredContent["tier"] == "BLOCK"
    assert slower.structuredContent["exit_code"] == 1
    text = slower.content[0].text
    assert text.startswith("BLOCK") and "slower" in text and "block threshold" in text
    assert any("round" in p for p in progress)  # the harness's progress, as notifications
    assert not same.isError, same.content
    # Unchanged code never BLOCKs; on a loaded 2-core runner a short run can read WARN (a few
    # percent of noise below the threshold), so PASS is measured by
    # benchmarks/harness/agent_check.py.
    assert same.structuredContent["tier"] in ("PASS", "WARN"), same.content[0].text
    assert same.structuredContent["exit_code"] == 0


@ON_SQLITE
def test_benchmark_honours_its_budget_scope_and_the_repository(
    gate: LiveServer, workspace: str, checkout: Path
) -> None:
    reader = agent_token(gate.database_url, workspace, ("read",))
    benchmarker = agent_token(gate.database_url, workspace, ("read", "benchmark"))

    async def refused(s: ClientSession) -> Any:
        return await s.call_tool("benchmark", FAST)

    async def hostile(s: ClientSession) -> list[Any]:
        return [
            await s.call_tool("benchmark", {**FAST, "workloads": ["../../etc/passwd"]}),
            await s.call_tool("benchmark", {**FAST, "workloads": ["--config=/etc/passwd"]}),
            await s.call_tool("benchmark", {**FAST, "base": "--upload-pack=x"}),
            await s.call_tool("benchmark", {**FAST, "budget_s": 1}),
            await s.call_tool("benchmark", {**FAST, "budget_s": 10**9}),
        ]

    no_scope = stdio(gate, reader, checkout, refused)
    assert no_scope.isError and "missing_scope" in no_scope.content[0].text
    outside, option, base, budget, huge = stdio(gate, benchmarker, checkout, hostile)
    assert outside.isError and "not a file inside the repository" in outside.content[0].text
    assert option.isError and "not a file inside the repository" in option.content[0].text
    assert base.isError and "a branch name" in base.content[0].text
    assert budget.isError and "budget_exhausted" in budget.content[0].text
    assert huge.isError and "greater than the maximum of 3600" in huge.content[0].text
    # The check stopped at the budget removed its worktree of the merge-base.
    listed = subprocess.run(["git", "worktree", "list"], cwd=checkout, capture_output=True)
    assert len(listed.stdout.splitlines()) == 1, listed.stdout
    database = open_database(gate.database_url)
    try:
        with database.read() as conn:
            workspace_id = alerts.workspace_id(conn, workspace)
            assert workspace_id is not None
            actions = [e["action"] for e in audit.of_workspace(conn, workspace_id, limit=10_000)]
    finally:
        database.close()
    assert "agent.refused" in actions and "agent.start_benchmark" in actions


def test_the_gates_tools_and_resources_are_forwarded_on_both_databases(
    shared_server: LiveServer, workspace: str, checkout: Path
) -> None:
    server = shared_server
    secret = agent_token(server.database_url, workspace, ("read",))

    async def steps(s: ClientSession) -> list[Any]:
        return [
            await s.call_tool("run_verdict", {"branch": "main"}),
            await s.call_tool("change_points", {}),
            await s.read_resource("kernalin://gate"),  # type: ignore[arg-type]
        ]

    missing, changes, gate = stdio(server, secret, checkout, steps)
    assert missing.isError and "run_not_found: no run on branch 'main'" in missing.content[0].text
    assert changes.structuredContent == {"change_points": []}
    assert "block-threshold" in gate.contents[0].text
    shown = repr([missing, changes, gate])
    assert secret not in shown


@ON_SQLITE
def test_a_refused_or_unreachable_gate_is_one_line(
    gate: LiveServer, workspace: str, checkout: Path, refused_port: int
) -> None:
    expired = agent_token(gate.database_url, workspace, ("read",), -timedelta(seconds=1))
    for url, secret, message in (
        (gate.url, expired, "the gate server refused KERNALIN_TOKEN: agent token"),
        (gate.url, "rnx_ci_x", "set KERNALIN_TOKEN to an agent token"),
        (f"http://127.0.0.1:{refused_port}", expired, "cannot reach the gate server"),
    ):
        env = {**os.environ, "KERNALIN_URL": url, "KERNALIN_TOKEN": secret}
        env["PYTHONPATH"] = str(ROOT)
        done = subprocess.run(
            [sys.executable, "-m", "rnx_cli", "mcp"],
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 2
        assert message in done.stderr and "Traceback" not in done.stderr
        assert secret not in done.stderr


def _stored_baseline_of_this_machine(server: LiveServer, workspace: str) -> str:
    """A baseline of main for this machine's environment whose kernel took 1 us: a working
    tree measured against it is far slower, where against the merge-base it is unchanged."""
    from bench_runner.environment import collect_environment
    from testbed.factories import body, make_results
    from testbed.gate_helpers import create_token, signed_headers

    ci = create_token(server.database_url, workspace=workspace)
    doc = make_results(
        environment=collect_environment().key,
        configs=[("pytorch_eager", "float32", 1)],
        median_ns=1_000.0,
        workload="kernels/attention.py",
    )
    data = body(doc)
    r = httpx.post(
        f"{server.url}/api/v1/runs", content=data, headers=signed_headers(ci.secret, data)
    )
    assert r.status_code == 201, r.text
    return ci.secret


@ON_SQLITE
def test_benchmark_and_rnx_check_gate_against_the_stored_baseline_where_there_is_one(
    gate: LiveServer,
    workspace: str,
    checkout: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    ci_secret = _stored_baseline_of_this_machine(gate, workspace)
    secret = agent_token(gate.database_url, workspace, ("read", "benchmark"))

    async def steps(s: ClientSession) -> Any:
        return await s.call_tool("benchmark", FAST)

    stored = stdio(gate, secret, checkout, steps)  # the agent token reads it over MCP
    assert not stored.isError, stored.content
    [workload] = stored.structuredContent["workloads"]
    assert workload["against"].startswith("the stored baseline: 1 run(s) of main in env-")
    assert workload["tier"] == "BLOCK", workload["reasons"]  # 1 us stored, the kernel far slower
    # A CI token reads it over HTTP; --against paired measures the merge-base instead.
    env = {**os.environ, "PYTHONPATH": str(ROOT), "KERNALIN_URL": gate.url}
    env["KERNALIN_TOKEN"] = ci_secret
    for against, expected in (("auto", "the stored baseline"), ("paired", "the merge-base")):
        done = subprocess.run(
            [sys.executable, "-m", "rnx_cli", "check", "--samples", "16", "--processes", "2"]
            + ["--against", against, "--json"],
            cwd=checkout,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        answer = json.loads(done.stdout)
        assert answer["workloads"][0]["against"].startswith(expected), answer["workloads"][0]
    # Without a baseline for its environment, --against stored is an error naming why (before
    # anything is measured: in this process, saving a second interpreter's torch import).
    from rnx_cli.main import main

    monkeypatch.chdir(checkout)
    monkeypatch.setenv("KERNALIN_URL", gate.url)
    monkeypatch.setenv("KERNALIN_TOKEN", "rnx_ci_not-a-token")
    capsys.readouterr()
    assert main(["check", "--against", "stored"]) == 2
    assert "no stored baseline to gate against" in capsys.readouterr().err
