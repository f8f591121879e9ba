"""Uploading a run: validate, scope-check, re-gate against its baselines, sign and store.

The same bytes again get the stored answer (200); other bytes under a used run_id get 409.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

from gate_server.clock import utcnow
from gate_server.db import Database, audit, autosync, repositories, runs
from gate_server.db.runs import BaselineKey, BaselineRun, NewRun
from gate_server.db.tokens import AGENT, CI, TokenRecord
from gate_server.domain.alerts.delivery import emit
from gate_server.domain.alerts.events import alert_run, block_event
from gate_server.domain.alerts.report import SCHEDULE, report_event
from gate_server.domain.auth import actor_of
from gate_server.domain.baselines import BaselineCandidates, candidates, choose_baselines
from gate_server.domain.bisection.jobs import enqueue_measured
from gate_server.domain.branches import current_name, hold_names
from gate_server.domain.change_points import enqueue_detection
from gate_server.domain.receipts import ReceiptSigner
from gate_server.domain.stored_documents import StoredDocuments
from gate_server.errors import Conflict, Forbidden, InvalidInput, Malformed
from gate_server.settings import ServerSettings
from gate_server.workloads import InvalidWorkloadPath, several_workloads, workload_identity
from rnx.branches import branch_matches
from rnx.environments import environment_label
from rnx.schema import GateReport, InvalidDocument, ResultsDocument, parse_results

if TYPE_CHECKING:
    from rnx.verdict import PreparedBaselines

NO_WORKLOAD_BASELINE = "no baseline yet for this workload in this environment"


# A receipt's issuer when RNX_PUBLIC_URL is not set: never the request's Host header, which
# whoever sends the request chooses.
UNNAMED_ISSUER = "rnx-gate-server"


def run_url(base_url: str, run_id: str) -> str:
    return f"{base_url.rstrip('/')}/runs/{run_id}"


def stored_run_url(settings: ServerSettings, run_id: str) -> str:
    """The run link kept with a run: absolute under RNX_PUBLIC_URL, else relative (the Host
    header of one request must not decide a link that others are shown later)."""
    return run_url(settings.public_url or "", run_id)


@dataclass(frozen=True)
class Ingested:
    """An upload's outcome: the answer's body, and whether this call stored the run (False: a
    stored run's retry, which gets its stored answer again). The route makes them a status."""

    body: dict[str, Any]
    stored: bool


def answered(answer: dict[str, Any], request_base: str) -> dict[str, Any]:
    """A stored answer as sent to a client: a relative run link made absolute with the URL the
    client used (it reached the server there)."""
    url = answer.get("url")
    if isinstance(url, str) and url.startswith("/"):
        return {**answer, "url": request_base.rstrip("/") + url}
    return answer


def parse_upload(body: bytes) -> ResultsDocument:
    """The uploaded bytes as a results document: 400 when not JSON, 422 when not valid."""
    try:
        raw = json.loads(body, parse_constant=_refuse_constant)
    except RecursionError:
        raise Malformed("the body nests too deeply to be a results document") from None
    except (ValueError, UnicodeDecodeError) as e:
        raise Malformed(f"the body is not valid JSON: {e}") from None
    several = several_workloads(raw)
    if several is not None:
        raise InvalidInput(
            f"{several}: a run measures one workload, and each workload has its own baseline; "
            "upload one results document per workload, each with its own POST /api/v1/runs "
            "(the action uploads one per workload)",
            code="several_workloads",
        )
    try:
        return parse_results(raw, source="the uploaded document")
    except InvalidDocument as e:
        raise InvalidInput(str(e), code="invalid_document", details=e.details) from None


def upload_workload(doc: ResultsDocument) -> str:
    """The run's workload identity (gate_server/workloads.py); 422 when its path is refused."""
    try:
        return workload_identity(doc.workload.path)
    except InvalidWorkloadPath as e:
        raise InvalidInput(
            str(e),
            code="invalid_workload_path",
            details=[{"field": "workload.path", "problem": str(e)}],
        ) from None


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not allowed in a results document (times must be finite)")


def count_samples(doc: ResultsDocument) -> int:
    total = 0
    for c in doc.configurations:
        for s in (c.samples, c.base_samples):
            total += 0 if s is None else len(s.ns)
    return total


def _check_upload_scope(token: TokenRecord, doc: ResultsDocument) -> int:
    """The id of the repository the token may upload this document to."""
    if token.kind not in (CI, AGENT):  # an agent's upload scope is checked at /mcp
        raise Forbidden(
            "a viewer token can read runs but not upload them; "
            "use a CI token (rnx token create without --viewer)",
            code="viewer_token",
        )
    if (
        token.repository is None
        or token.repository_id is None
        or doc.repository.lower() != token.repository.lower()
    ):
        raise Forbidden(
            f"this token acts for {token.repository}, "
            f"not {doc.repository}; create a token for that repository",
            code="repository_out_of_scope",
        )
    return token.repository_id


def _check_limits(doc: ResultsDocument, settings: ServerSettings) -> None:
    n = count_samples(doc)
    if n > settings.max_samples:
        raise InvalidInput(
            f"the document holds {n} samples; this server "
            f"takes at most {settings.max_samples} per upload (RNX_MAX_SAMPLES)",
            code="too_many_samples",
        )
    if doc.git.is_pull_request and not doc.git.base_branch:
        raise InvalidInput(
            "a pull-request run needs git.base_branch (the "
            "branch it merges into) so it can be compared with that branch's baseline",
            code="missing_base_branch",
            details=[{"field": "git.base_branch", "problem": "required for pull-request runs"}],
        )


def ingest_run(
    database: Database,
    settings: ServerSettings,
    signer: ReceiptSigner,
    token: TokenRecord,
    body: bytes,
    signature: str,
    base_url: str,
    *,
    documents: StoredDocuments,
    bisection: int | None = None,
) -> Ingested:
    """Validate, scope-check, re-gate and store one upload whose signature the route checked
    (`signature` is stored with the run). `base_url`: where the client reached the server, for
    the answer's run link only; nothing stored or signed depends on it. `documents`: the
    process's parsed baseline documents. `bisection`: the bisection this run measures a commit
    for (gate_server/domain/bisection/); such a run is never a baseline and raises no alert."""
    doc = parse_upload(body)
    repository_id = _check_upload_scope(token, doc)
    _check_limits(doc, settings)
    run_id = str(doc.run_id)
    digest = hashlib.sha256(body).hexdigest()
    with database.lookup() as conn:
        found = None
        if not runs.is_stored(conn, run_id):
            # A stored run's retry gets its stored answer, whatever today's rules say of it.
            workload = upload_workload(doc)
            found = candidates(
                conn, repository_id, doc, workload, settings.baseline_history, token.branches
            )
            chosen = choose_baselines(found.runs)
            baseline = documents.prepared(
                chosen, documents.load(chosen, lambda ids: runs.documents(conn, ids))
            )
            repository = repositories.by_id(conn, repository_id)
    if found is None:
        return _retry(database, token, run_id, digest, signature, base_url)

    report = _regate(doc, baseline, settings)
    # On its baseline branch outside a pull request; a bisection's run measures one commit for
    # the server, and is never a baseline and never alerted.
    at_home = (
        bisection is None
        and not doc.git.is_pull_request
        and branch_matches(token.branches, found.home)
    )
    becomes_baseline = at_home and report.tier != "BLOCK"
    now = utcnow()
    answer = {
        "run_id": run_id,
        "tier": report.tier,
        "reasons": report.reasons,
        "comparisons": [c.model_dump(mode="json") for c in report.comparisons],
        "inconclusive": report.inconclusive and report.inconclusive.model_dump(mode="json"),
        "baseline": _baseline_block(found, chosen),
        "is_baseline": becomes_baseline,
        "url": stored_run_url(settings, run_id),
        "receipt": _receipt(
            signer,
            settings.public_url or UNNAMED_ISSUER,
            doc,
            report,
            digest,
            now,
            token=token,
            github_repository_id=repository.github_repository_id if repository else None,
        ),
    }
    new = _new_run(token, found.key, doc, answer, body, digest, signature, now)
    detect = becomes_baseline and settings.detect_changes
    # A regression landed: a BLOCK on a baseline branch outside a pull request (a push, or a
    # scheduled run of what was pushed). Alerted in the transaction that stores the run.
    landed = at_home and report.tier == "BLOCK"
    flags = {"detect": detect, "alert": landed, "report": at_home and doc.git.event == SCHEDULE}
    stored = _store(database, token, new, doc, becomes_baseline, bisection=bisection, **flags)
    if not stored:
        # Another request stored this run_id between our read and our write.
        return _retry(database, token, run_id, digest, signature, base_url)
    return Ingested(answered(answer, base_url), stored=True)


def _regate(
    doc: ResultsDocument, baseline: PreparedBaselines, settings: ServerSettings
) -> GateReport:
    """The verdict from the samples, with the server's thresholds (never the client's tier)."""
    # numpy and the statistics: loaded with the first upload
    from rnx.verdict import evaluate
    from stats.reasons import Code

    # Baselines are kept per workload: say so when this one has none, though others may.
    return evaluate(
        doc,
        baseline.baselines,
        settings.gate,
        prepared=baseline,
        resamples=settings.resamples,
        seed=settings.seed,
        wording={Code.NO_BASELINE: lambda _: NO_WORKLOAD_BASELINE},
    )


def _baseline_block(found: BaselineCandidates, chosen: list[BaselineRun]) -> dict[str, Any] | None:
    if not chosen:
        return None
    return {
        "branch": found.key.branch,
        "environment": found.key.environment_key,
        "workload": found.key.workload,
        "run_ids": [r.run_id for r in chosen],
        "shas": [r.sha for r in chosen],
    }


def _receipt(
    signer: ReceiptSigner,
    issuer: str,
    doc: ResultsDocument,
    report: GateReport,
    digest: str,
    now: datetime,
    *,
    token: TokenRecord,
    github_repository_id: int | None,
) -> str:
    """The signed receipt. It names the workspace and the repository's stable ids (the
    server's, and GitHub's where known), so a receipt of another workspace that registered the
    same OWNER/NAME does not verify as this one's (rnx receipt verify --workspace)."""
    run_id = str(doc.run_id)
    return signer.sign(
        {
            "workspace": token.workspace,
            "repository_id": token.repository_id,
            "github_repository_id": github_repository_id,
            "iss": issuer,
            "sub": run_id,
            "iat": int(now.timestamp()),
            "run_id": run_id,
            "tier": report.tier,
            "repository": doc.repository,
            "sha": doc.git.sha,
            "body_sha256": digest,
        }
    )


def _new_run(
    token: TokenRecord,
    key: BaselineKey,
    doc: ResultsDocument,
    answer: dict[str, Any],
    body: bytes,
    digest: str,
    signature: str,
    now: datetime,
) -> NewRun:
    return NewRun(
        run_id=str(doc.run_id),
        workspace_id=token.workspace_id,
        repository_id=key.repository_id,
        token_id=token.id,
        sha=doc.git.sha,
        branch=doc.git.branch,
        base_branch=doc.git.base_branch,
        event=doc.git.event,
        pr_number=doc.git.pr_number,
        environment_key=key.environment_key,
        workload=key.workload,
        tier=str(answer["tier"]),
        answer=answer,
        document=body,
        body_sha256=digest,
        signature=signature,
        created_at=doc.created_at,
        received_at=now,
        baseline_branch=None,
    )


def _store(
    database: Database,
    token: TokenRecord,
    new: NewRun,
    doc: ResultsDocument,
    baseline: bool,
    *,
    detect: bool,
    alert: bool,
    report: bool,
    bisection: int | None = None,
) -> bool:
    """Store the run and its audit entry, for a baseline queue the look for change points of
    its history, with `alert` its BLOCK event for the alerts and with `report` its scheduled
    run's report (all in the same transaction); False when its run_id was stored meanwhile."""
    with database.write() as conn:
        if baseline:
            # Under the rename lock, so a rename committing meanwhile is seen, not undone.
            hold_names(conn, new.repository_id)
            new = replace(new, baseline_branch=current_name(conn, new.repository_id, new.branch))
        if not runs.insert_run(conn, new):
            return False
        if baseline and doc.git.event == "workflow_dispatch":
            # An auto-sync run of an earlier commit, arriving after later commits' runs.
            autosync.place_in_history(conn, new.run_id)
        if detect and new.baseline_branch is not None:
            key = BaselineKey(
                new.repository_id, new.baseline_branch, new.environment_key, new.workload
            )
            enqueue_detection(conn, key)
        if bisection is not None:
            enqueue_measured(conn, bisection, new.repository_id, new.run_id, new.sha)
        audit.record(
            conn,
            actor=actor_of(token),
            token_id=token.id,
            action="run.upload",
            subject=f"run:{new.run_id}",
            details={
                "repository": doc.repository,
                "sha": new.sha,
                "workload": new.workload,
                "tier": new.tier,
                "baseline": baseline,
                "body_sha256": new.body_sha256,
            },
        )
        # One alert per regression: later BLOCKs of the same key, until a PASS, are its repeats.
        if alert and not runs.blocked_since_pass(conn, new):
            run = alert_run(new, environment_label(doc.environment))
            facts = block_event(repository=doc.repository, answer=new.answer, run=run)
            emit(conn, facts, workspace_id=new.workspace_id, repository_id=new.repository_id)
        if report:  # a scheduled run's report, whatever its tier (alerts/report.py)
            facts = report_event(new.run_id)
            emit(conn, facts, workspace_id=new.workspace_id, repository_id=new.repository_id)
    return True


def _retry(
    database: Database,
    token: TokenRecord,
    run_id: str,
    digest: str,
    signature: str,
    base_url: str,
) -> Ingested:
    """The answer to an upload whose run_id is stored: the stored answer when the same token's
    repository sent the same bytes (a retry, or a replay of the very request), else 409."""
    with database.write() as conn:
        existing = runs.by_run_id(conn, run_id)
        if existing is None:  # runs are never deleted: only a broken database gets here
            raise RuntimeError(f"run {run_id} was reported stored but cannot be read")
        if existing.repository_id != token.repository_id or existing.body_sha256 != digest:
            raise Conflict(
                f"run_id {run_id} is already stored with a different document; a new run "
                "needs a new run_id (a retry must send the same bytes)",
                code="run_id_conflict",
            )
        # A byte-identical signature is a replay of the very request that stored the run; it
        # can only get that request's answer again, so it is logged and answered like a retry.
        kind = "replay" if signature == existing.signature else "retry"
        audit.record(
            conn,
            actor=actor_of(token),
            token_id=token.id,
            action=f"run.upload.{kind}",
            subject=f"run:{run_id}",
            details={"body_sha256": digest},
        )
    return Ingested(answered(existing.answer, base_url), stored=False)
