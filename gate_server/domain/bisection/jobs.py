"""Bisection in App mode, driven through the outbox so it survives redelivery and restarts.

START_KIND (queued with each new change point): list the range's commits with GitHub's
compare-commits endpoint and store the bisection, once per change point. ADVANCE_KIND: decide
the next step (gate_server/domain/bisection/plan.py) under the bisection's lock; a measurement is
written as a step row (state dispatching) and committed BEFORE the workflow is dispatched, so
a handler run twice or a process killed mid-job never dispatches a commit twice; a dispatch
GitHub refused is withdrawn and tried again. MEASURED_KIND (queued with an upload that names
the bisection): gate that run against both ends of the change point and advance. A step whose
workflow run GitHub reports ended without success (skip_failed_run, from the workflow_run
webhook) is skipped at once; one whose run never comes back within STEP_TIMEOUT counts as
skipped too (a lost dispatch).
"""

from __future__ import annotations

import logging
import re
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from sqlalchemy.engine import Connection

from gate_server.clock import utcnow
from gate_server.db import bisections, change_points, outbox, runs
from gate_server.db.bisections import BisectionRecord, StepRecord
from gate_server.db.change_points import ChangePointRecord
from gate_server.db.outbox import OutboxJob
from gate_server.domain.alerts.events import CULPRIT, outbox_kind
from gate_server.domain.bisection import plan
from gate_server.domain.run_samples import sample_groups
from gate_server.errors import PermanentFailure
from rnx_github.client import GitHubClient, GitHubError

if TYPE_CHECKING:
    from gate_server.domain.job_context import JobContext

log = logging.getLogger("gate_server.bisection")

START_KIND = "bisect.start"
ADVANCE_KIND = "bisect.advance"
MEASURED_KIND = "bisect.measured"
CULPRIT_KIND = "bisect.culprit"
STEP_TIMEOUT = timedelta(hours=6)  # a dispatched run not back by then: the commit is skipped
BUSY_RETRY = timedelta(minutes=2)  # the repository has its most dispatches in flight
# The name a dispatched run of the workflow `rnx init` writes shows (its `run-name`, GitHub's
# `display_title`): how a workflow_run webhook, which carries no inputs, names its step.
RUN_NAME = re.compile(r"kernalin bisection (\d+) at ([0-9a-f]{40})")


def enqueue_start(conn: Connection, change_point_id: int) -> None:
    """Queue the bisection of a new change point (in the transaction that stores it)."""
    outbox.enqueue_once(conn, START_KIND, {"change_point_id": change_point_id})


def _advance_later(conn: Connection, bisection_id: int, delay: timedelta = timedelta(0)) -> None:
    # Not enqueue_once: that would join the step timeout's look, due only hours from now. An
    # extra look is harmless (each decides under the bisection's lock from what is stored).
    outbox.enqueue(conn, ADVANCE_KIND, {"bisection_id": bisection_id}, delay=delay)


def _number(payload: dict[str, Any], name: str) -> int:
    try:
        return int(payload[name])
    except (KeyError, TypeError, ValueError):
        raise PermanentFailure(f"a bisection job needs {name}, got {payload!r}") from None


def _client(svc: JobContext, repository: str) -> GitHubClient | None:
    app = svc.github.app
    if app is None or svc.settings.bisect_budget == 0:
        return None
    return app.client(repository=repository)


def handle_start(svc: JobContext, job: OutboxJob) -> None:
    """START_KIND: store the change point's bisection with its range of commits, once."""
    cp_id = _number(job.payload, "change_point_id")
    with svc.database.read() as conn:
        cp = change_points.by_id(conn, cp_id)
        existing = bisections.of_change_point(conn, cp_id)
    if cp is None or existing is not None:
        return
    client = _client(svc, cp.repository)
    if client is None:
        return
    try:
        commits = client.compare_commits(cp.repository, cp.before_sha, cp.after_sha)
    except GitHubError as e:
        if e.status != 404:
            raise  # GitHub down or busy: the outbox tries again later
        commits = []  # a commit is gone (a force-push): only the after commit is known
    listed = [{"sha": c.sha, "author": c.author, "message": c.message} for c in commits]
    if not listed or listed[-1]["sha"] != cp.after_sha:
        # Nothing listed (a commit is gone): the after end is known.
        listed.append({"sha": cp.after_sha, "author": None, "message": ""})
    with svc.database.write() as conn:
        bisections.hold_change_point(conn, cp_id)
        if bisections.of_change_point(conn, cp_id) is not None:
            return  # another process stored it meanwhile
        new_id = bisections.create(conn, cp_id, cp.repository_id, listed)
        _advance_later(conn, new_id)


def handle_advance(svc: JobContext, job: OutboxJob) -> None:
    """ADVANCE_KIND: end the bisection, wait, or dispatch the next measurement."""
    bisection_id = _number(job.payload, "bisection_id")
    with svc.database.write() as conn:
        bisections.hold(conn, bisection_id)
        b = bisections.get(conn, bisection_id)
        if b is None or b.state != bisections.RUNNING:
            return
        cp = change_points.by_id(conn, b.change_point_id)
        if cp is None:
            bisections.finish(conn, b.id, bisections.STOPPED, reason="its change point is gone")
            return
        steps = bisections.steps(conn, b.id)
        if _expire_or_wait(conn, b, steps):
            return
        decided = [plan.Step(s.commit_index, s.side or plan.SKIPPED) for s in steps]
        nxt = plan.next_step(len(b.commits), decided, budget=svc.settings.bisect_budget)
        if nxt.action != "measure":
            _end(conn, b, nxt)
            return
        step_id = _claim_dispatch(svc, conn, b, nxt)
    if step_id is not None:
        sha = str(b.commits[nxt.index or 0]["sha"])
        _dispatch(svc, b, cp, step_id, sha)


def _claim_dispatch(
    svc: JobContext, conn: Connection, b: BisectionRecord, nxt: plan.Next
) -> int | None:
    """The step row of the next dispatch, written before it; None while the repository has
    its most dispatches in flight (then it is looked at again later)."""
    if bisections.in_flight(conn, b.repository_id) >= svc.settings.bisect_in_flight:
        _advance_later(conn, b.id, BUSY_RETRY)
        return None
    index = nxt.index or 0  # "measure" always names its commit
    return bisections.add_step(conn, b.id, index, nxt.attempt, str(b.commits[index]["sha"]))


def _expire_or_wait(conn: Connection, b: BisectionRecord, steps: list[StepRecord]) -> bool:
    """True while a dispatched run may still come back; a step past STEP_TIMEOUT is recorded
    as skipped (its run failed before uploading, or its dispatch was lost to a crash). A step
    left "dispatching" by a process killed mid-dispatch may or may not have run: it is waited
    for like any other, never dispatched again."""
    waiting = False
    for s in steps:
        if s.state not in (bisections.DISPATCHING, bisections.DISPATCHED):
            continue
        since = s.dispatched_at or utcnow()
        if utcnow() - since < STEP_TIMEOUT:
            waiting = True
            if s.state == bisections.DISPATCHING:  # its dispatcher may have died: look again
                _advance_later(conn, b.id, STEP_TIMEOUT - (utcnow() - since))
            continue
        reason = "no run came back in time"
        bisections.record_measurement(conn, s.id, None, plan.SKIPPED, {"reason": reason})
    return waiting


def _dispatch(
    svc: JobContext, b: BisectionRecord, cp: ChangePointRecord, step_id: int, sha: str
) -> None:
    """Run the workflow at `sha` (a repeat's processes are pooled with the earlier runs'
    by handle_measured: each repeat measures with more processes in all)."""
    client = _client(svc, cp.repository)
    try:
        if client is None:
            raise GitHubError("App mode is off or bisection is turned off")
        client.dispatch_workflow(
            cp.repository,
            svc.settings.bisect_workflow,
            ref=cp.branch,
            inputs={"commit": sha, "bisection": str(b.id)},
        )
    except GitHubError as e:
        # GitHub answered: nothing was dispatched, so the step is withdrawn and tried again.
        with svc.database.write() as conn:
            bisections.withdraw(conn, step_id)
        raise RuntimeError(f"dispatching bisection {b.id} at {sha[:12]}: {e}") from None
    with svc.database.write() as conn:
        bisections.mark_dispatched(conn, step_id)
        _advance_later(conn, b.id, STEP_TIMEOUT)


def _end(conn: Connection, b: BisectionRecord, nxt: plan.Next) -> None:
    """Store how the bisection ended; a culprit found queues CULPRIT_KIND (its pull request,
    then its alert) in the same transaction."""
    low = None if nxt.low < 0 else str(b.commits[nxt.low]["sha"])
    high = str(b.commits[nxt.high]["sha"])
    if nxt.action == "found":
        author = b.commits[nxt.high].get("author")
        if bisections.finish(
            conn,
            b.id,
            bisections.FOUND,
            culprit_sha=high,
            culprit_author=author,
            low_sha=low,
            high_sha=high,
        ):
            outbox.enqueue(conn, CULPRIT_KIND, {"bisection_id": b.id})
        return
    bisections.finish(conn, b.id, bisections.STOPPED, low_sha=low, high_sha=high, reason=nxt.reason)


def handle_culprit(svc: JobContext, job: OutboxJob) -> None:
    """CULPRIT_KIND: name the pull request that merged the culprit (a GitHub failure leaves it
    unnamed, logged), then queue the culprit's one alert (event.culprit; its deliveries are
    keyed by the change point, so a second run of this job sends nothing twice)."""
    bisection_id = _number(job.payload, "bisection_id")
    with svc.database.read() as conn:
        b = bisections.get(conn, bisection_id)
        cp = None if b is None else change_points.by_id(conn, b.change_point_id)
    if b is None or cp is None or b.culprit_sha is None:
        return
    number = b.culprit_pr
    if number is None:
        try:
            client = _client(svc, cp.repository)
            number = (
                None if client is None else client.commit_pull_request(cp.repository, b.culprit_sha)
            )
        except GitHubError as e:
            log.warning("the pull request of %s in %s: %s", b.culprit_sha[:12], cp.repository, e)
    with svc.database.write() as conn:
        if number is not None:
            bisections.set_pull_request(conn, b.id, number)
        outbox.enqueue(conn, outbox_kind(CULPRIT), {"change_point_id": cp.id})


def enqueue_measured(
    conn: Connection, bisection_id: int, repository_id: int, run_id: str, sha: str
) -> None:
    """Queue the gating of an uploaded bisection run (in the transaction that stores it)."""
    payload = {"bisection_id": bisection_id, "repository_id": repository_id}
    outbox.enqueue(conn, MEASURED_KIND, {**payload, "run_id": run_id, "sha": sha})


def handle_measured(svc: JobContext, job: OutboxJob) -> None:
    """MEASURED_KIND: gate the run against both ends (with every earlier run of its commit in
    this bisection), record the step's side and evidence, and advance."""
    bisection_id = _number(job.payload, "bisection_id")
    run_id, sha = str(job.payload.get("run_id")), str(job.payload.get("sha"))
    with svc.database.read() as conn:
        b = bisections.get(conn, bisection_id)
        cp = None if b is None else change_points.by_id(conn, b.change_point_id)
        steps = [] if b is None else bisections.steps(conn, bisection_id)
        open_steps = [s for s in steps if s.sha == sha and s.state != bisections.MEASURED]
        mine = b is not None and b.repository_id == job.payload.get("repository_id")
        if b is None or not mine or cp is None or b.state != bisections.RUNNING or not open_steps:
            return  # a run nobody waits for (another repository's, an ended bisection)
        earlier = [s.run_id for s in steps if s.sha == sha and s.run_id]
        ids = [cp.before_run_id, cp.after_run_id, run_id, *earlier]
        documents = runs.documents(conn, ids)
    groups = {i: sample_groups(documents.get(i)).get(cp.configuration) for i in ids}
    before, after = groups[cp.before_run_id], groups[cp.after_run_id]
    pooled = [g for i in [run_id, *earlier] for g in (groups[i] or [])]
    if before is None or after is None:
        raise PermanentFailure(f"the ends of change point {cp.id} have no samples")
    if not groups[run_id]:
        side, evidence = plan.SKIPPED, {"reason": f"{cp.configuration} did not run at {sha}"}
    else:
        found = plan.classify(before, after, pooled, seed=svc.settings.seed)
        side, evidence = found.side, {"sha": sha, "run_id": run_id, **found.__dict__}
    with svc.database.write() as conn:
        bisections.hold(conn, bisection_id)
        for s in bisections.steps(conn, bisection_id):
            if s.id == open_steps[0].id and s.state != bisections.MEASURED:
                bisections.record_measurement(conn, s.id, run_id, side, evidence)
                _advance_later(conn, bisection_id)


def skip_failed_run(
    conn: Connection, repository_id: int, run_name: str, conclusion: str, url: str
) -> bool:
    """A dispatched run that ended without success (a `workflow_run` completed webhook whose
    conclusion is failure, cancelled, timed out...): its step is skipped now, as `git bisect
    skip` does, instead of after STEP_TIMEOUT. False when `run_name` names no step still
    waiting in a bisection of this repository (a redelivery, a run that uploaded anyway)."""
    named = RUN_NAME.fullmatch(run_name.strip())
    if named is None:
        return False
    bisection_id, sha = int(named.group(1)), named.group(2)
    bisections.hold(conn, bisection_id)
    b = bisections.get(conn, bisection_id)
    if b is None or b.repository_id != repository_id or b.state != bisections.RUNNING:
        return False
    waiting = [
        s
        for s in bisections.steps(conn, bisection_id)
        if s.sha == sha and s.state in (bisections.DISPATCHING, bisections.DISPATCHED)
    ]
    if not waiting:
        return False
    reason = f"its workflow run ended {conclusion} ({url})"
    bisections.record_measurement(conn, waiting[0].id, None, plan.SKIPPED, {"reason": reason})
    _advance_later(conn, bisection_id)
    return True
