"""The stored baseline `rnx check` gates against when the gate server has one for this
machine's environment: read with KERNALIN_URL and KERNALIN_TOKEN, as `rnx gate` reads it.

A CI token reads GET /api/v1/baselines (action/baseline_fetch.py); an agent token,
which works only at /mcp, asks the `baselines` tool for the documents. Either way the answer is
the runs an upload would be compared with now and the server's thresholds, so the check's
verdict is the one the server would reach. Nothing here fails the check: no server, no
baseline or an unreadable answer is a reason to measure in paired mode instead.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

import anyio
from pydantic import ValidationError

from action.baseline_fetch import Fetched, NotFetched, fetch_baseline, server_gate
from rnx.schema import InvalidDocument, parse_results

AGENT_PREFIX = "rnx_agent_"


def read_stored_baseline(
    env: Mapping[str, str], *, repository: str | None, branch: str, environment: str, workload: str
) -> Fetched | NotFetched:
    url, token = env.get("KERNALIN_URL", "").strip(), env.get("KERNALIN_TOKEN", "").strip()
    if not url or not token:
        why = "no gate server to read it from (KERNALIN_URL and KERNALIN_TOKEN are not both set)"
        return NotFetched(why)
    if token.startswith(AGENT_PREFIX):
        return anyio.run(_through_mcp, url, token, branch, environment, workload)
    return fetch_baseline(
        url=url,
        secret=token,
        repository=repository or "",  # none: the CI token's own repository
        branch=branch,
        environment=environment,
        workload=workload,
    )


async def _through_mcp(
    url: str, token: str, branch: str, environment: str, workload: str
) -> Fetched | NotFetched:
    from rnx_cli.mcp_stdio import gate_session

    arguments = {
        "branch": branch,
        "environment": environment,
        "workload": workload,
        "documents": True,
    }
    try:
        async with gate_session(url, token) as session:
            answer = await session.call_tool("baselines", arguments)
    except Exception as e:  # noqa: BLE001 - any failure to ask is a reason for paired mode
        return NotFetched(f"the gate server could not be asked ({type(e).__name__}: {e})"[:300])
    if answer.isError or not isinstance(answer.structuredContent, dict):
        text = answer.content[0].text if answer.content else "no answer"  # type: ignore[union-attr]
        return NotFetched(f"the gate server refused: {text[:300]}")
    data = answer.structuredContent
    try:
        documents = [parse_results(json.dumps(d).encode()) for d in data.get("documents", [])]
        gate = server_gate(data.get("gate"))
    except (InvalidDocument, ValidationError, ValueError) as e:
        return NotFetched(f"the stored baseline could not be read ({e})"[:300])
    run_ids = [str(b["run_id"]) for b in data.get("baselines", [])]
    return Fetched(documents, run_ids, gate)
