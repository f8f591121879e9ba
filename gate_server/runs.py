"""Uploading, re-gating and accepting runs: what the API routes (and webhooks) call."""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from gate_server.auth import CI
from gate_server.errors import ApiError
from gate_server.receipts import ReceiptSigner
from gate_server.settings import ServerSettings
from gate_server.storage import (
    RunRecord,
    Storage,
    TokenRecord,
    follow_renames,
    load_branch_renames,
    utcnow,
)
from rnx.branches import branch_matches
from rnx.schema import InvalidDocument, ResultsDocument, parse_results

MAX_REASON_CHARS = 2000


@dataclass(frozen=True)
class Answer:
    status: int
    body: dict[str, Any]


def run_url(base_url: str, run_id: str) -> str:
    return f"{base_url.rstrip('/')}/runs/{run_id}"


def parse_upload(body: bytes) -> ResultsDocument:
    """The uploaded bytes as a results document: 400 when not JSON, 422 when not valid."""
    try:
        raw = json.loads(body, parse_constant=_refuse_constant)
    except RecursionError:
        raise ApiError(
            400, "invalid_json", "the body nests too deeply to be a results document"
        ) from None
    except (ValueError, UnicodeDecodeError) as e:
        raise ApiError(400, "invalid_json", f"the body is not valid JSON: {e}") from None
    try:
        return parse_results(raw, source="the uploaded document")
    except InvalidDocument as e:
        raise ApiError(422, "invalid_document", str(e), e.details) from None


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not allowed in a results document (times must be finite)")


def count_samples(doc: ResultsDocument) -> int:
    total = 0
    for c in doc.configurations:
        for s in (c.samples, c.base_samples):
            total += 0 if s is None else len(s.ns)
    return total


def comparison_branch(doc: ResultsDocument) -> str:
    """The branch whose baselines this run is compared with: its base branch, else its own.
    (As uploaded: the server then maps it through the repository's branch renames.)"""
    return doc.git.base_branch or doc.git.branch


def choose_baselines(
    candidates: Sequence[tuple[RunRecord, bytes]],
) -> list[tuple[RunRecord, bytes]]:
    """Newest first; stop after the newest accepted run: accepting a run declares a new normal,
    so earlier runs describe a level the team has moved away from."""
    chosen = []
    for record, body in candidates:
        chosen.append((record, body))
        if record.accepted_at is not None:
            break
    return chosen


def _check_upload_scope(token: TokenRecord, doc: ResultsDocument) -> None:
    if token.kind != CI:
        raise ApiError(
            403,
            "viewer_token",
            "a viewer token can read runs but not upload them; "
            "use a CI token (rnx token create without --viewer)",
        )
    if token.repository is None or doc.repository.lower() != token.repository.lower():
        raise ApiError(
            403,
            "repository_out_of_scope",
            f"this token acts for {token.repository}, "
            f"not {doc.repository}; create a token for that repository",
        )


def _check_limits(doc: ResultsDocument, settings: ServerSettings) -> None:
    n = count_samples(doc)
    if n > settings.max_samples:
        raise ApiError(
            422,
            "too_many_samples",
            f"the document holds {n} samples; this server "
            f"takes at most {settings.max_samples} per upload (RNX_MAX_SAMPLES)",
        )
    if doc.git.is_pull_request and not doc.git.base_branch:
        raise ApiError(
            422,
            "missing_base_branch",
            "a pull-request run needs git.base_branch (the "
            "branch it merges into) so it can be compared with that branch's baseline",
            [{"field": "git.base_branch", "problem": "required for pull-request runs"}],
        )


def _idempotent(existing: RunRecord, token: TokenRecord, digest: str) -> Answer:
    if existing.repository_id == token.repository_id and existing.body_sha256 == digest:
        return Answer(200, existing.answer)
    raise ApiError(
        409,
        "run_id_conflict",
        f"run_id {existing.run_id} is already stored with a "
        "different document; a new run needs a new run_id (a retry must send the "
        "same bytes)",
    )


def ingest_run(
    storage: Storage,
    settings: ServerSettings,
    signer: ReceiptSigner,
    token: TokenRecord,
    body: bytes,
    signature: str,
    base_url: str,
) -> Answer:
    """Validate, scope-check, re-gate and store one upload; the same bytes again give the
    stored answer (200), other bytes under a used run_id give 409."""
    from rnx.verdict import evaluate

    doc = parse_upload(body)
    _check_upload_scope(token, doc)
    _check_limits(doc, settings)
    assert token.repository_id is not None
    run_id = str(doc.run_id)
    digest = hashlib.sha256(body).hexdigest()

    with storage.read() as conn:
        existing = storage.get_run(conn, run_id)
        # A CI job that started before its branch was renamed still names the old branch:
        # compare with, and record under, the name the branch has now.
        renames = load_branch_renames(conn, token.repository_id)
        target = follow_renames(renames, comparison_branch(doc))[0]
        home = follow_renames(renames, doc.git.branch)[0]
        candidates = (
            []
            if existing
            else storage.baselines(
                conn,
                token.repository_id,
                target,
                doc.environment.key,
                1 + settings.baseline_history,
            )
        )
    if existing is not None:
        return _retry(storage, token, existing, digest, signature)

    chosen = choose_baselines(candidates)
    baseline_docs = [parse_results(b, source=f"stored run {r.run_id}") for r, b in chosen]
    report = evaluate(
        doc, baseline_docs, settings.gate, resamples=settings.resamples, seed=settings.seed
    )
    becomes_baseline = (
        not doc.git.is_pull_request
        and report.tier != "BLOCK"
        and branch_matches(token.branches, home)
    )
    url = run_url(settings.public_url or base_url, run_id)
    now = utcnow()
    receipt = signer.sign(
        {
            "iss": settings.public_url or base_url.rstrip("/"),
            "sub": run_id,
            "iat": int(now.timestamp()),
            "run_id": run_id,
            "tier": report.tier,
            "repository": doc.repository,
            "sha": doc.git.sha,
            "body_sha256": digest,
        }
    )
    answer = {
        "run_id": run_id,
        "tier": report.tier,
        "reasons": report.reasons,
        "comparisons": [c.model_dump(mode="json") for c in report.comparisons],
        "baseline": {
            "branch": target,
            "environment": doc.environment.key,
            "run_ids": [r.run_id for r, _ in chosen],
            "shas": [r.sha for r, _ in chosen],
        }
        if chosen
        else None,
        "is_baseline": becomes_baseline,
        "url": url,
        "receipt": receipt,
    }
    with storage.write() as conn:
        if becomes_baseline:
            # Under the rename lock, so a rename committing meanwhile is seen, not undone.
            storage.lock_branches(conn, token.repository_id, exclusive=False)
            home = storage.current_branch(conn, token.repository_id, doc.git.branch)
        stored = storage.insert_run(
            conn,
            {
                "run_id": run_id,
                "workspace_id": token.workspace_id,
                "repository_id": token.repository_id,
                "token_id": token.id,
                "sha": doc.git.sha,
                "branch": doc.git.branch,
                "base_branch": doc.git.base_branch,
                "event": doc.git.event,
                "pr_number": doc.git.pr_number,
                "environment_key": doc.environment.key,
                "tier": report.tier,
                "answer": json.dumps(answer),
                "document": body,
                "body_sha256": digest,
                "signature": signature,
                "created_at": doc.created_at,
                "received_at": now,
                "baseline_branch": home if becomes_baseline else None,
                "baseline_at": now if becomes_baseline else None,
            },
        )
        if stored:
            storage.audit(
                conn,
                actor=f"token:{token.id}",
                token_id=token.id,
                action="run.upload",
                subject=f"run:{run_id}",
                details={
                    "repository": doc.repository,
                    "sha": doc.git.sha,
                    "tier": report.tier,
                    "baseline": becomes_baseline,
                    "body_sha256": digest,
                },
            )
    if not stored:
        # Another request stored this run_id between our read and our write.
        with storage.read() as conn:
            winner = storage.get_run(conn, run_id)
        assert winner is not None
        return _retry(storage, token, winner, digest, signature)
    return Answer(201, answer)


def _retry(
    storage: Storage, token: TokenRecord, existing: RunRecord, digest: str, signature: str
) -> Answer:
    answer = _idempotent(existing, token, digest)
    # A byte-identical signature is a replay of the very request that stored the run; it can
    # only get that request's answer again, so it is logged and answered like any retry.
    kind = "replay" if signature == existing.signature else "retry"
    with storage.write() as conn:
        storage.audit(
            conn,
            actor=f"token:{token.id}",
            token_id=token.id,
            action=f"run.upload.{kind}",
            subject=f"run:{existing.run_id}",
            details={"body_sha256": digest},
        )
    return answer


def _visible(token: TokenRecord, run: RunRecord) -> bool:
    if token.kind == CI:
        return run.repository_id == token.repository_id
    return run.workspace_id == token.workspace_id


def get_run(
    storage: Storage, token: TokenRecord, run_id: str, *, with_document: bool
) -> dict[str, Any]:
    run_id = _check_run_id(run_id)
    with storage.read() as conn:
        run = storage.get_run(conn, run_id)
        document = storage.get_document(conn, run_id) if run and with_document else None
    if run is None or not _visible(token, run):
        raise ApiError(404, "run_not_found", f"no run {run_id} that this token may see")
    view = run_view(run)
    if document is not None:
        view["document"] = json.loads(document)
    return view


def run_view(run: RunRecord) -> dict[str, Any]:
    answer = run.answer
    return {
        "run_id": run.run_id,
        "repository": run.repository,
        "sha": run.sha,
        "branch": run.branch,
        "base_branch": run.base_branch,
        "event": run.event,
        "pr_number": run.pr_number,
        "environment": run.environment_key,
        "tier": run.tier,
        "reasons": answer["reasons"],
        "comparisons": answer["comparisons"],
        "baseline": answer["baseline"],
        "url": answer["url"],
        "receipt": answer["receipt"],
        "received_at": run.received_at.isoformat(),
        "is_baseline": run.baseline_branch is not None,
        "baseline_branch": run.baseline_branch,
        "accepted": None
        if run.accepted_at is None
        else {
            "at": run.accepted_at.isoformat(),
            "by": run.accepted_by,
            "reason": run.accept_reason,
            "via": run.accepted_via,
        },
    }


def _check_run_id(run_id: str) -> str:
    try:
        return str(uuid.UUID(run_id))
    except ValueError:
        raise ApiError(404, "run_not_found", f"{run_id[:60]!r} is not a run id (a UUID)") from None


def check_accept_scope(storage: Storage, token: TokenRecord, run_id: str) -> None:
    """A CI token may accept runs of its repository that target one of its baseline branches."""
    run_id = _check_run_id(run_id)
    if token.kind != CI:
        raise ApiError(
            403,
            "viewer_token",
            "a viewer token cannot accept runs; use the "
            "repository's CI token or '/kernalin accept <reason>' on the pull request",
        )
    with storage.read() as conn:
        run = storage.get_run(conn, run_id)
        if run is None or run.repository_id != token.repository_id:
            raise ApiError(404, "run_not_found", f"no run {run_id} that this token may see")
        # The branch it would become a baseline of, by the name that branch has now.
        target = storage.current_branch(conn, run.repository_id, run.base_branch or run.branch)
    if not branch_matches(token.branches, target):
        raise ApiError(
            403,
            "branch_out_of_scope",
            f"the run would become a baseline for branch "
            f"{target!r}, which is not among this token's baseline branches "
            f"({', '.join(token.branches)})",
        )


def accept_run(
    storage: Storage,
    run_id: str,
    *,
    actor: str,
    reason: str,
    via: str,
    token_id: int | None = None,
) -> dict[str, Any]:
    """Make a run the newest baseline for its base branch and environment. The caller has
    checked that `actor` may do so (a scoped token, or a GitHub user with write access)."""
    run_id = _check_run_id(run_id)
    reason = (reason or "").strip()
    if not reason:
        raise ApiError(
            422,
            "missing_reason",
            'say why this run is accepted: {"reason": "..."}',
            [{"field": "reason", "problem": "required, non-empty"}],
        )
    if len(reason) > MAX_REASON_CHARS:
        raise ApiError(
            422,
            "reason_too_long",
            f"the reason has {len(reason)} characters; at most {MAX_REASON_CHARS}",
        )
    with storage.write() as conn:
        run = storage.get_run(conn, run_id)
        if run is None:
            raise ApiError(404, "run_not_found", f"no run {run_id}")
        already = run.accepted_at is not None
        if not already:
            # The base branch as it is called now, under the rename lock (see ingest_run).
            storage.lock_branches(conn, run.repository_id, exclusive=False)
            target = storage.current_branch(conn, run.repository_id, run.base_branch or run.branch)
            storage.mark_baseline(
                conn,
                run_id,
                branch=target,
                when=utcnow(),
                accepted_by=actor,
                reason=reason,
                via=via,
            )
            storage.audit(
                conn,
                actor=actor,
                token_id=token_id,
                action="run.accept",
                subject=f"run:{run_id}",
                details={
                    "reason": reason,
                    "via": via,
                    "branch": target,
                    "environment": run.environment_key,
                },
            )
        run = storage.get_run(conn, run_id)
    assert run is not None and run.accepted_at is not None
    return {
        "run_id": run.run_id,
        "baseline_branch": run.baseline_branch,
        "environment": run.environment_key,
        "accepted_at": run.accepted_at.isoformat(),
        "accepted_by": run.accepted_by,
        "reason": run.accept_reason,
        "via": run.accepted_via,
        "already_accepted": already,
    }
