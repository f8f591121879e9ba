"""The MCP endpoint /mcp of the real gate server on loopback, driven by the `mcp` SDK's own
client over streamable HTTP, on SQLite and PostgreSQL: agent tokens, scopes, audit, tools."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult

from gate_server.clock import utcnow
from gate_server.db import audit, open_database, runs, tokens
from gate_server.domain.agents import issue_agent_token
from gate_server.domain.auth import revoke_token
from testbed.factories import body, make_results
from testbed.gate_helpers import Token, create_token, signed_headers
from testbed.live_server import LiveServer

Session = Callable[[ClientSession], Awaitable[Any]]
ENVIRONMENT, OTHER = "linux-x86_64-cpu-test", "linux-x86_64-cpu-other"


@dataclass(frozen=True)
class World:
    server: LiveServer
    ci: Token
    base_run: str  # a baseline run of main
    pr_run: str  # pull request 7's run, 2x slower: BLOCK
    workspace: str = "acme"

    @property
    def database_url(self) -> str:
        return self.server.database_url


def agent(world: World, scopes: tuple[str, ...] = ("read",), **kwargs: Any) -> tuple[int, str]:
    database = open_database(world.database_url)
    try:
        return issue_agent_token(
            database,
            workspace=kwargs.get("workspace", world.workspace),
            repository=kwargs.get("repository", "acme/kernels"),
            branches=["main"],
            name="claude",
            for_user="alice",
            scopes=scopes,
            expires_at=kwargs.get("expires_at", utcnow() + timedelta(hours=1)),
            accept_granted_by="carol" if "accept" in scopes else None,
            actor="test",
        )
    finally:
        database.close()


def upload(world_url: str, ci: Token, **kwargs: Any) -> str:
    doc = make_results(**kwargs)
    data = body(doc)
    r = httpx.post(
        f"{world_url}/api/v1/runs", content=data, headers=signed_headers(ci.secret, data)
    )
    assert r.status_code == 201, r.text
    return str(doc.run_id)


@pytest.fixture
def world(shared_server: LiveServer, workspace: str) -> Iterator[World]:
    """Three runs of acme/kernels in a workspace of this test's own, on the shared server."""
    ci = create_token(shared_server.database_url, workspace=workspace)
    server = shared_server
    upload(server.url, ci, seed=11, environment=OTHER, slowdown=2.0)
    base = upload(server.url, ci, seed=1)  # main's newest run
    pr = upload(
        server.url, ci, branch="feature", event="pull_request", pr_number=7, slowdown=2.0, seed=2
    )
    yield World(server, ci, base, pr, workspace)


def session(url: str, secret: str, steps: Session) -> Any:
    """Run `steps` in an initialised MCP session at url/mcp with the agent token."""

    async def go() -> Any:
        headers = {"Authorization": f"Bearer {secret}"}
        async with (
            httpx.AsyncClient(headers=headers, timeout=30) as http,
            streamable_http_client(f"{url}/mcp", http_client=http) as (read, write, _),
            ClientSession(read, write) as s,
        ):
            await s.initialize()
            return await steps(s)

    # In a thread of its own: a test run before this one in the same process may have left
    # an event loop marked running in this thread, where asyncio.run() refuses to start.
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, go()).result()


def calls(world: World, secret: str, *called: tuple[str, dict[str, Any]]) -> list[CallToolResult]:
    async def steps(s: ClientSession) -> list[CallToolResult]:
        return [await s.call_tool(name, arguments) for name, arguments in called]

    return list(session(world.server.url, secret, steps))


def audited(world: World) -> list[dict[str, Any]]:
    """The audit entries of the world's workspace, oldest first (the server is shared)."""
    database = open_database(world.database_url)
    try:
        with database.read() as conn:
            ci = tokens.by_id(conn, world.ci.id)
            assert ci is not None
            return audit.of_workspace(conn, ci.workspace_id, limit=10_000)[::-1]
    finally:
        database.close()


def stored_runs(world: World) -> int:
    """Every run in the database: a test compares the count before and after its own calls."""
    database = open_database(world.database_url)
    try:
        with database.read() as conn:
            return runs.count(conn)
    finally:
        database.close()


def test_every_read_tool_answers_data_and_text_and_no_secret(world: World) -> None:
    _, secret = agent(world)
    key = {"branch": "main", "environment": ENVIRONMENT, "workload": "kernels/attention.py"}
    results = calls(
        world,
        secret,
        ("run_verdict", {"run_id": world.pr_run}),
        ("run_verdict", {"pull_request": 7}),
        ("run_verdict", {"branch": "main"}),
        ("baselines", key),
        ("history", key),
        ("change_points", {}),
        ("compare_runs", {"base_run_id": world.base_run, "head_run_id": world.pr_run}),
        ("environments", {}),
        (
            "compare_hardware",
            {"branch": "main", "workload": key["workload"], "environments": [ENVIRONMENT, OTHER]},
        ),
    )
    assert not any(r.isError for r in results), [r.content for r in results]
    by_id, by_pr, by_branch, baselines, history, changes, compared, envs, hardware = results
    data = [r.structuredContent or {} for r in results]
    assert data[0]["tier"] == "BLOCK" and data[0]["run_id"] == world.pr_run
    assert by_id.content[0].text.startswith(f"BLOCK for run {world.pr_run}")
    assert "slower" in by_id.content[0].text  # the reason, in words
    assert data[1]["run_id"] == world.pr_run and data[2]["run_id"] == world.base_run
    assert [b["run_id"] for b in data[3]["baselines"]] == [world.base_run]
    assert [r["run_id"] for r in data[4]["runs"]] == [world.base_run]
    assert data[5] == {"change_points": []}
    assert data[6]["tier"] == "BLOCK"
    assert compared.content[0].text.startswith("BLOCK: run ")
    assert {e["environment"] for e in data[7]["environments"]} == {ENVIRONMENT, OTHER}
    assert [e["key"] for e in data[8]["environments"]] == [ENVIRONMENT, OTHER]
    [other_cell] = [c for c in data[8]["rows"][0]["cells"] if c["environment"] != ENVIRONMENT]
    assert other_cell["verdict"] == "slower" and other_cell["ratio"] > 1.8
    assert "slower" in hardware.content[0].text
    shown = json.dumps([r.model_dump(mode="json") for r in results])
    assert secret not in shown and world.ci.secret not in shown
    assert "receipt" not in data[0]  # the signed receipt is CI's, not the agent's

    entries = [e for e in audited(world) if e["action"].startswith("agent.")]
    assert len(entries) == len(results)
    assert {e["actor"] for e in entries} == {"agent claude for alice"}


def test_baselines_with_documents_are_what_an_upload_is_gated_against(world: World) -> None:
    _, secret = agent(world)
    key = {"branch": "main", "environment": ENVIRONMENT, "workload": "kernels/attention.py"}
    bare, full = calls(world, secret, ("baselines", key), ("baselines", {**key, "documents": True}))
    assert "documents" not in (bare.structuredContent or {})
    data = full.structuredContent or {}
    assert [d["run_id"] for d in data["documents"]] == [world.base_run]
    assert data["documents"][0]["configurations"][0]["samples"]["ns"]  # samples included
    assert data["gate"] == {"block_threshold": 0.25, "rope": 0.02, "probability": 0.95}


def test_resources_are_the_gate_in_force_and_the_verdict_guide(world: World) -> None:
    _, secret = agent(world)

    async def steps(s: ClientSession) -> list[str]:
        listed = await s.list_resources()
        texts = [str(r.uri) for r in listed.resources]
        for uri in ("kernalin://gate", "kernalin://docs/reading-a-verdict"):
            found = await s.read_resource(uri)  # type: ignore[arg-type]
            texts.append(getattr(found.contents[0], "text", ""))
        return texts

    uris_and_texts = session(world.server.url, secret, steps)
    assert {"kernalin://gate", "kernalin://docs/reading-a-verdict"} <= set(uris_and_texts)
    assert "block-threshold: 0.25" in uris_and_texts[-2]
    assert "BLOCK" in uris_and_texts[-1]


def test_a_missing_scope_is_refused_audited_and_stores_nothing(world: World) -> None:
    token_id, secret = agent(world, ("read",))
    before = stored_runs(world)
    document = json.loads(body(make_results(seed=9)))
    refused = calls(
        world,
        secret,
        ("upload", {"document": document}),
        ("accept", {"run_id": world.pr_run, "reason": "on purpose"}),
    )
    assert all(r.isError for r in refused)
    assert "missing_scope: upload needs the 'upload' scope" in refused[0].content[0].text
    assert "code owner" in refused[1].content[0].text
    assert stored_runs(world) == before
    logged = [e for e in audited(world) if e["action"] == "agent.refused"]
    assert [e["details"]["missing_scope"] for e in logged] == ["upload", "accept"]
    assert {(e["actor"], e["token_id"]) for e in logged} == {("agent claude for alice", token_id)}


def test_upload_then_accept_without_the_app_is_refused_as_unverifiable(world: World) -> None:
    _, secret = agent(world, ("read", "upload", "accept"))
    push = make_results(seed=12, slowdown=3.0)  # a push to main: CI's would be a baseline
    slower = make_results(branch="fix", event="pull_request", pr_number=8, slowdown=2.0, seed=3)
    unchanged = make_results(branch="fix", event="pull_request", pr_number=9, seed=4)
    done = calls(
        world,
        secret,
        ("upload", {"document": json.loads(body(slower))}),
        ("upload", {"document": json.loads(body(unchanged))}),
        ("upload", {"document": json.loads(body(push))}),
        ("run_verdict", {"branch": "main"}),
        (
            "baselines",
            {"branch": "main", "environment": ENVIRONMENT, "workload": "kernels/attention.py"},
        ),
        ("accept", {"run_id": str(slower.run_id), "reason": "the new layout trades speed"}),
    )
    assert not any(r.isError for r in done[:5]), [r.content for r in done]
    assert (done[0].structuredContent or {})["tier"] == "BLOCK"
    assert (done[1].structuredContent or {})["tier"] == "PASS"
    # An agent's upload is gated but never becomes a baseline, a push to main included.
    assert (done[3].structuredContent or {})["run_id"] == str(push.run_id)
    assert (done[3].structuredContent or {})["is_baseline"] is False
    assert [b["run_id"] for b in (done[4].structuredContent or {})["baselines"]] == [world.base_run]
    # Only GitHub can say whether carol may grant it: without the App, nothing is accepted.
    refused = done[5]
    assert refused.isError and "grant_unverifiable" in refused.content[0].text  # type: ignore[union-attr]
    assert "no GitHub App" in refused.content[0].text  # type: ignore[union-attr]
    assert not [e for e in audited(world) if e["action"] == "run.accept"]
    [logged] = [e for e in audited(world) if e["action"] == "agent.accept"]
    assert logged["details"]["outcome"] == "refused: grant_unverifiable"


def test_an_agents_accept_holds_only_while_github_says_its_grantor_may_accept(
    database_url: str, server_factory: Callable[..., LiveServer]
) -> None:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    from testbed.fakes import fake_github
    from testbed.fakes.github_endpoints import FakeApp, add_file, extras

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    public = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    with fake_github.serve() as (api, state):
        extras(state).app = FakeApp("314", public.decode(), installations={"acme/kernels": 77})
        extras(state).permissions[("acme/kernels", "carol")] = "write"
        extras(state).permissions[("acme/kernels", "dave")] = "read"
        sha = "ab" * 20
        measured = add_file(state, "acme/kernels", sha, "kernels/attention.py", "kernel = 1\n")
        ci = create_token(database_url)
        env = {"RNX_GITHUB_APP_ID": "314", "RNX_GITHUB_APP_PRIVATE_KEY": private}
        server = server_factory(database_url, env={**env, "RNX_GITHUB_API_URL": api})
        world = World(server, ci, upload(server.url, ci, seed=1), "")
        runs_of = [
            upload(
                server.url, ci, branch="fix", event="pull_request", pr_number=8,
                base_branch="main", slowdown=2.0, seed=3 + i, sha=sha, workload_sha256=measured,
            )
            for i in range(2)
        ]  # fmt: skip
        granted = {}
        for grantor in ("carol", "dave"):
            database = open_database(database_url)
            try:
                granted[grantor] = issue_agent_token(
                    database, workspace="acme", repository="acme/kernels", branches=["main"],
                    name="claude", for_user="alice", scopes=("read", "accept"),
                    expires_at=utcnow() + timedelta(hours=1), accept_granted_by=grantor,
                    actor="test",
                )[1]  # fmt: skip
            finally:
                database.close()
        reason = {"reason": "the new layout trades speed"}
        [by_dave] = calls(world, granted["dave"], ("accept", {"run_id": runs_of[0], **reason}))
        [by_carol] = calls(world, granted["carol"], ("accept", {"run_id": runs_of[1], **reason}))
    assert by_dave.isError and "grant_refused" in by_dave.content[0].text  # type: ignore[union-attr]
    assert "@dave" in by_dave.content[0].text  # type: ignore[union-attr]
    assert not by_carol.isError, by_carol.content
    assert (by_carol.structuredContent or {})["accepted_by"] == "agent claude for alice"
    [accepted] = [e for e in audited(world) if e["action"] == "run.accept"]
    assert accepted["actor"] == "agent claude for alice" and runs_of[1] in accepted["subject"]
    assert accepted["details"]["via"] == "mcp"


def test_expired_revoked_missing_and_other_tokens_never_reach_the_tools(world: World) -> None:
    url = world.server.url
    _, expired = agent(world, expires_at=utcnow() - timedelta(seconds=1))
    revoked_id, revoked = agent(world)
    database = open_database(world.database_url)
    try:
        revoke_token(database, revoked_id, actor="test")
    finally:
        database.close()
    _, good = agent(world)
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    accept = {"Accept": "application/json, text/event-stream"}
    for secret, status, code in (
        (None, 401, "missing_token"),
        (expired, 401, "expired_token"),
        (revoked, 401, "revoked_token"),
        ("rnx_agent_" + "x" * 43, 401, "unknown_token"),
        (world.ci.secret, 403, "not_an_agent_token"),
    ):
        headers = accept | ({"Authorization": f"Bearer {secret}"} if secret else {})
        r = httpx.post(f"{url}/mcp", json=ping, headers=headers)
        assert (r.status_code, r.json()["error"]["code"]) == (status, code), r.text
    # An agent token works only at /mcp: the REST API, uploads and the dashboard refuse it.
    r = httpx.get(f"{url}/api/v1/runs/{world.pr_run}", headers={"Authorization": f"Bearer {good}"})
    assert (r.status_code, r.json()["error"]["code"]) == (403, "agent_token")
    data = body(make_results(seed=5))
    r = httpx.post(f"{url}/api/v1/runs", content=data, headers=signed_headers(good, data))
    assert (r.status_code, r.json()["error"]["code"]) == (403, "agent_token")


def test_hostile_arguments_get_clear_errors_and_store_nothing(world: World) -> None:
    _, secret = agent(world, ("read", "upload"))
    before = stored_runs(world)
    elsewhere = json.loads(body(make_results(repository="evil/other", seed=6)))
    outside = {"branch": "main", "environment": "e", "workload": "../../etc/passwd"}
    answers = calls(
        world,
        secret,
        ("run_verdict", {"run_id": "../../etc/passwd"}),
        ("run_verdict", {"branch": "x" * 1_000_000}),
        ("run_verdict", {"run_id": str(uuid.uuid4())}),
        ("run_verdict", {}),
        ("baselines", outside),
        ("history", {**outside, "workload": "k.py", "limit": 10**9}),
        ("change_points", {"status": "'; DROP TABLE runs; --"}),
        ("upload", {"document": elsewhere}),
        ("upload", {"document": {"schema_version": 1, "run_id": "x" * 5000}}),
        ("upload", {"document": {"nested": [[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]}}),
    )
    texts = [a.content[0].text for a in answers]
    assert all(a.isError for a in answers), texts
    for text, expected in zip(
        texts,
        [
            "run_not_found: '../../etc/passwd' is not a run id",
            "invalid_argument: branch: at most 1000 characters",
            "run_not_found: no run ",
            "one_of: give exactly one of run_id, pull_request, branch",
            "invalid_workload_path",
            "invalid_argument: limit: 1 to 200",
            "invalid_argument: status: one of open, acknowledged, resolved",
            "repository_out_of_scope: this token acts for acme/kernels, not evil/other",
            "invalid_document",
            "invalid_document",
        ],
        strict=True,
    ):
        assert expected in text, text
        assert len(text) < 2000  # a huge input is named, not repeated back
    assert stored_runs(world) == before


def test_another_workspaces_runs_are_not_found(world: World) -> None:
    other = f"other-{world.workspace}"
    _, secret = agent(world, workspace=other, repository="other/kernels")
    [answer] = calls(world, secret, ("run_verdict", {"run_id": world.pr_run}))
    assert answer.isError and "run_not_found" in answer.content[0].text


def test_a_token_over_its_rate_is_refused_with_retry_after() -> None:
    from gate_server.domain.agents import RateLimit
    from gate_server.errors import RateLimited
    from gate_server.http.answers import refusal_response

    now = [0.0]
    limit = RateLimit(2, clock=lambda: now[0])
    limit.take(1)
    limit.take(1)
    with pytest.raises(RateLimited) as refused:
        limit.take(1)
    answer = refusal_response(refused.value)  # what the edge makes of it
    assert (answer.status_code, refused.value.code) == (429, "rate_limited")
    assert answer.headers["Retry-After"] == "30"
    limit.take(2)  # another token has its own allowance
    now[0] = 30.0  # half a minute refills one call of two a minute
    limit.take(1)


def test_the_cli_makes_agent_tokens_and_refuses_an_ungranted_accept(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from gate_server.cli.main import main

    url = f"sqlite:///{tmp_path / 'gate.db'}"
    base = ["token", "create", "--workspace", "acme", "--repo", "acme/kernels"]
    agent_args = [*base, "--agent", "claude", "--for", "alice", "--database-url", url]
    assert main([*agent_args, "--scopes", "read,benchmark", "--expires", "12h"]) == 0
    assert capsys.readouterr().out.startswith("rnx_agent_")
    for extra, message in (
        (["--scopes", "read,accept"], "granted by a code owner"),
        (["--scopes", "read,delete"], "give some of read, benchmark, upload, accept"),
        (["--expires", "400d"], "at most 90 days"),
        (["--expires", "2020-01-01T00:00:00+00:00"], "is not in the future"),
        (["--expires", "tomorrow"], "give a duration"),
    ):
        assert main([*agent_args, *extra]) == 2
        assert message in capsys.readouterr().err
    granted = ["--scopes", "read,accept", "--accept-granted-by", "carol"]
    assert main([*agent_args, *granted]) == 0


def test_unparseable_or_oversized_requests_get_a_4xx(
    database_url: str, server_factory: Callable[..., LiveServer]
) -> None:
    server = server_factory(database_url, env={"RNX_MAX_BODY_BYTES": "100000"})
    world = World(server, create_token(database_url), "", "")
    _, secret = agent(world)
    headers = {
        "Authorization": f"Bearer {secret}",
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
    }
    url = f"{server.url}/mcp"
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    for content in (
        b"{not json",
        b"\xff\xfe\x00",
        b"[" * 100_000,
        json.dumps({**ping, "params": {"pad": "x" * 300_000}}).encode(),
    ):
        r = httpx.post(url, content=content, headers=headers)
        assert 400 <= r.status_code < 500, (content[:20], r.status_code, r.text[:200])
    r = httpx.post(url, content=b"{}", headers={**headers, "Content-Type": "text/plain"})
    assert 400 <= r.status_code < 500
