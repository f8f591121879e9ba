"""Before timing: the baseline the upload will be compared with, from the gate server
(GET /api/v1/baselines), so the harness can measure until each configuration is decided.

Like the upload it fails open, and faster: one attempt within a few seconds. A server that is
down, old (no such endpoint) or refuses the token leaves the run on fixed sampling with a note.
"""

from __future__ import annotations

from dataclasses import dataclass

import httpx
from pydantic import ValidationError

from action.upload import answer_within
from rnx.config import GateSettings
from rnx.schema import InvalidDocument, ResultsDocument, parse_results

BASELINES_PATH = "/api/v1/baselines"
FETCH_LIMIT_S = 10.0


@dataclass(frozen=True)
class Fetched:
    """The baseline documents (none: the key has no baseline yet) and where they came from."""

    documents: list[ResultsDocument]
    run_ids: list[str]
    gate: GateSettings | None  # the server's thresholds (None: it did not say)


@dataclass(frozen=True)
class NotFetched:
    """Why there is no baseline to sample against: the run measures its fixed rounds."""

    why: str


def fetch_baseline(
    *,
    url: str,
    secret: str,
    repository: str,
    branch: str,
    environment: str,
    workload: str,
    limit_s: float = FETCH_LIMIT_S,
    transport: httpx.BaseTransport | None = None,
) -> Fetched | NotFetched:
    """The baseline runs for (repository, branch, environment, workload), newest first."""
    endpoint = url.rstrip("/") + BASELINES_PATH
    params = {
        "repository": repository,
        "branch": branch,
        "environment": environment,
        "workload": workload,
    }
    headers = {"Authorization": f"Bearer {secret}", "User-Agent": "rnx-benchmark-action"}
    try:
        with httpx.Client(transport=transport, follow_redirects=False) as client:
            response = answer_within(
                lambda: client.get(endpoint, params=params, headers=headers, timeout=limit_s),
                limit_s,
                name="rnx-baseline-fetch",
            )
    except httpx.HTTPError as e:
        return NotFetched(f"the gate server at {url} did not answer ({str(e) or type(e).__name__})")
    if response.status_code == 404:
        return NotFetched(f"the gate server at {url} has no {BASELINES_PATH} (an older server)")
    if response.status_code != 200:
        return NotFetched(f"the gate server answered {response.status_code} to {BASELINES_PATH}")
    return _parse(response, url)


def _parse(response: httpx.Response, url: str) -> Fetched | NotFetched:
    try:
        data = response.json()
        run_ids = [str(r) for r in data["run_ids"]]
        documents = [
            parse_results(d, source=f"baseline run {i}")
            for i, d in zip(run_ids, data["documents"], strict=True)
        ]
        gate = server_gate(data.get("gate"))
    except (ValueError, KeyError, TypeError, InvalidDocument, RecursionError) as e:
        return NotFetched(f"malformed baseline answer from {url}: {str(e)[:200]}")
    return Fetched(documents, run_ids, gate)


def with_server_thresholds(gate: GateSettings, server: GateSettings | None) -> GateSettings:
    """This run's gate settings judged by the server's thresholds, as the server would judge an
    upload; its budget and mode stay this run's."""
    if server is None:
        return gate
    return gate.model_copy(
        update={
            "block_threshold": server.block_threshold,
            "rope": server.rope,
            "probability": server.probability,
        }
    )


def server_gate(found: object) -> GateSettings | None:
    """The server's thresholds as GateSettings (ValueError when they are not valid ones)."""
    if found is None:
        return None
    if not isinstance(found, dict):
        raise ValueError("gate is not an object")
    names = {"block_threshold": "block-threshold", "rope": "rope", "probability": "probability"}
    try:
        return GateSettings.model_validate({names[k]: v for k, v in found.items() if k in names})
    except ValidationError as e:
        raise ValueError(
            f"the server's gate thresholds are not valid: {e.errors()[0]['msg']}"
        ) from None
