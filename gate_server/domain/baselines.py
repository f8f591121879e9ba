"""Which stored runs an upload is compared with: the baseline rules, apart from the SQL that
finds the candidates (gate_server/db/runs.py)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy.engine import Connection

from gate_server.db import renames, runs
from gate_server.db.runs import BaselineKey, BaselineRun
from gate_server.domain.branches import follow_renames
from rnx.branches import branch_matches
from rnx.schema import ResultsDocument


@dataclass(frozen=True)
class BaselineCandidates:
    key: BaselineKey  # what the run is compared with: its branch by the name it has now
    home: str  # the run's own branch, by the name it has now
    runs: list[BaselineRun]  # newest first


def comparison_branch(doc: ResultsDocument) -> str:
    """The branch whose baselines this run is compared with: its base branch, else its own.
    (As uploaded: the server then maps it through the repository's branch renames.)"""
    return doc.git.base_branch or doc.git.branch


def candidates(
    conn: Connection,
    repository_id: int,
    doc: ResultsDocument,
    workload: str,
    history: int,
    baseline_branches: Sequence[str],
) -> BaselineCandidates:
    """The newest baseline run and up to `history` earlier ones of the run's comparison branch,
    environment and workload (its normalised path: gate_server/workloads.py). A CI job that
    started before its branch was renamed still names the old branch: it is compared with,
    and recorded under, the name the branch has now.

    A push to one of `baseline_branches` (the token's) may become that branch's baseline, so
    it is compared with that branch's own baselines, whatever git.base_branch says: a base
    branch that does not exist would otherwise let a BLOCK-worthy run through as a WARN."""
    log = renames.log(conn, repository_id)
    home = follow_renames(log, doc.git.branch)[0]
    if not doc.git.is_pull_request and branch_matches(baseline_branches, home):
        branch = home
    else:
        branch = follow_renames(log, comparison_branch(doc))[0]
    key = BaselineKey(repository_id, branch, doc.environment.key, workload)
    return BaselineCandidates(key, home, runs.baselines(conn, key, 1 + history))


def choose_baselines(candidates: Sequence[BaselineRun]) -> list[BaselineRun]:
    """Newest first; stop after the newest accepted run: accepting a run declares a new normal,
    so earlier runs describe a level the team has moved away from."""
    chosen = []
    for record in candidates:
        chosen.append(record)
        if record.accepted_at is not None:
            break
    return chosen


def baseline_for_ci(
    conn: Connection, repository_id: int, branch: str, environment: str, workload: str, history: int
) -> tuple[BaselineKey, list[BaselineRun]]:
    """What an upload of `workload` in `environment` against `branch` would be compared with,
    as `candidates` and `choose_baselines` pick it for the upload itself (GET
    /api/v1/baselines: a CI job measures until its configurations are decided against it).
    `workload` is normalised already (gate_server/workloads.py). The runs alone: their
    documents are read one at a time as the answer is sent
    (gate_server/domain/baseline_reads.py)."""
    branch = follow_renames(renames.log(conn, repository_id), branch)[0]
    key = BaselineKey(repository_id, branch, environment, workload)
    return key, choose_baselines(runs.baselines(conn, key, 1 + history))
