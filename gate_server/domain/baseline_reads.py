"""GET /api/v1/baselines: the baseline runs a CI job's upload would be compared with, so the
job can measure until each configuration is decided (adaptive sampling, docs/harness.md)."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from gate_server.db import Database, runs
from gate_server.db.tokens import CI, TokenRecord
from gate_server.domain.baselines import baseline_for_ci
from gate_server.errors import Forbidden, InvalidInput
from gate_server.workloads import InvalidWorkloadPath, workload_identity
from rnx.config import GateSettings

REQUIRED = ("branch", "environment", "workload")
MAX_PARAMETER = 1000  # characters: branch names, environment keys and paths are far shorter


def _parameters(query: Mapping[str, str]) -> dict[str, str]:
    missing = [name for name in REQUIRED if not query.get(name, "").strip()]
    if missing:
        raise InvalidInput(
            f"give {', '.join(missing)} as query parameters: the base branch, the environment "
            "key (the results document's environment.key) and the workload's path",
            code="missing_parameter",
            details=[{"field": name, "problem": "required"} for name in missing],
        )
    too_long = [
        name for name in (*REQUIRED, "repository") if len(query.get(name, "")) > MAX_PARAMETER
    ]
    if too_long:
        raise InvalidInput(
            f"{', '.join(too_long)}: at most {MAX_PARAMETER} characters",
            code="parameter_too_long",
            details=[{"field": name, "problem": "too long"} for name in too_long],
        )
    try:
        workload = workload_identity(query["workload"])
    except InvalidWorkloadPath as e:
        raise InvalidInput(
            str(e), code="invalid_workload_path", details=[{"field": "workload", "problem": str(e)}]
        ) from None
    return {
        "branch": query["branch"].strip(),
        "environment": query["environment"],
        "workload": workload,
    }


def _repository_id(token: TokenRecord, repository: str | None) -> int:
    if token.kind != CI or token.repository is None or token.repository_id is None:
        raise Forbidden(
            "baselines are read by CI jobs with their repository's CI token, not a viewer token",
            code="viewer_token",
        )
    if repository and repository.lower() != token.repository.lower():
        raise Forbidden(
            f"this token acts for {token.repository}, not {repository[:200]}",
            code="repository_out_of_scope",
        )
    return token.repository_id


@dataclass(frozen=True)
class BaselineAnswer:
    """GET /api/v1/baselines' answer: everything but the documents, and which runs' documents
    follow."""

    head: dict[str, Any]
    run_ids: list[str]

    def chunks(self, database: Database) -> Iterator[bytes]:
        """The answer's JSON, each document the stored bytes as they are, read one at a time
        as they are sent: seven documents of the largest size parsed into Python objects and
        dumped again took about 370 MiB for one request; this holds one document's bytes."""
        yield json.dumps({**self.head, "run_ids": self.run_ids}).encode()[:-1]
        yield b', "documents": ['
        for i, run_id in enumerate(self.run_ids):
            with database.read() as conn:
                body = runs.documents(conn, [run_id])[run_id]
            yield (b", " if i else b"") + body
        yield b"]}"


def read_baseline(
    database: Database,
    token: TokenRecord,
    query: Mapping[str, str],
    *,
    history: int,
    gate: GateSettings,
) -> BaselineAnswer:
    """The baseline runs, newest first, exactly those an upload would be re-gated with now
    (none, an empty list, when the key has no baseline yet), and the thresholds that re-gating
    uses: the server's, so the job's interim verdict is the one the server reaches. A run's
    stored document never changes, so reading them after this transaction reads the same."""
    repository_id = _repository_id(token, query.get("repository"))
    wanted = _parameters(query)
    with database.read() as conn:
        key, chosen = baseline_for_ci(
            conn,
            repository_id,
            wanted["branch"],
            wanted["environment"],
            wanted["workload"],
            history,
        )
    head = {
        "repository": token.repository,
        "branch": key.branch,
        "environment": key.environment_key,
        "workload": key.workload,
        "gate": {
            "block_threshold": gate.block_threshold,
            "rope": gate.rope,
            "probability": gate.probability,
        },
    }
    return BaselineAnswer(head, [r.run_id for r in chosen])
