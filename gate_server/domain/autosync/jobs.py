"""Auto-sync in App mode: benchmark every new commit of a linked branch that touches a linked
workload or what it imports, and at least every N commits, through the outbox.

PUSH_KIND (queued by the `push` webhook): read which workloads are linked on the branch (the
stored `rnx link`s and kernalin.yml's `auto-sync:` at the pushed commit), list the pushed
commits with their files (the payload's, or compare-commits and each commit's files when GitHub
listed only 20), work out each workload's import closure at the pushed commit (the repository's
tree and the files' text, through the API), and queue each touching commit once (a row unique
per repository and commit). The push's head waits RNX_AUTOSYNC_WAIT_S first: the push's own
workflow usually benchmarks it. DISPATCH_KIND: under the repository's lock, skip a queued commit
that has a stored run of its workloads by now, else write it `dispatching` and commit BEFORE
dispatching the workflow, so a commit is never dispatched twice (a refused dispatch is queued
again; a process killed mid-dispatch leaves it counted in flight until RUN_TIMEOUT).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import yaml
from pydantic import ValidationError
from sqlalchemy.engine import Connection

from gate_server.clock import utcnow
from gate_server.db import autosync, outbox, repositories
from gate_server.db.outbox import OutboxJob
from gate_server.domain.autosync.imports import import_closure
from gate_server.errors import PermanentFailure
from rnx.config import DEFAULT_CONFIG_FILE, KernalinConfig
from rnx_github.client import GitHubClient, GitHubError

if TYPE_CHECKING:
    from gate_server.domain.job_context import JobContext

log = logging.getLogger("gate_server.autosync")

PUSH_KIND = "autosync.push"
DISPATCH_KIND = "autosync.dispatch"
PAYLOAD_COMMITS = 20  # a push payload lists at most this many commits; more: compare-commits
RUN_TIMEOUT = timedelta(hours=6)  # a dispatch whose run is not back by then is not in flight
BUSY_RETRY = timedelta(minutes=2)  # the repository has its most dispatches in flight
ZERO_SHA = "0" * 40
TOUCHED, EVERY_N = "touched", "every-n"
REFUSED_FIX = (
    "the workflow RNX_BISECT_WORKFLOW names must exist on the branch and accept the `commit` "
    "input (`rnx init --force` writes one that does); the App needs Actions write"
)


def push_job(payload: dict[str, Any], repository_id: int) -> dict[str, Any] | None:
    """The PUSH_KIND payload of a `push` delivery, or None for a push that adds no commits
    to a branch (a tag, a deleted branch)."""
    ref, after = payload.get("ref"), payload.get("after")
    if not isinstance(ref, str) or not ref.startswith("refs/heads/"):
        return None
    if payload.get("deleted") or not isinstance(after, str) or after == ZERO_SHA:
        return None
    listed = []
    for c in payload.get("commits") or []:
        if isinstance(c, dict) and isinstance(c.get("id"), str):
            files = [f for key in ("added", "modified", "removed") for f in c.get(key) or []]
            listed.append({"sha": c["id"], "files": [str(f) for f in files]})
    installation = (payload.get("installation") or {}).get("id")
    return {
        "repository_id": repository_id,
        "repository": str((payload.get("repository") or {}).get("full_name") or ""),
        "installation_id": installation if isinstance(installation, int) else None,
        "branch": ref.removeprefix("refs/heads/"),
        "before": str(payload.get("before") or ZERO_SHA),
        "after": after,
        "commits": listed,
    }


def enqueue_push(conn: Connection, job: dict[str, Any]) -> None:
    """Queue a push's auto-sync (in the webhook's transaction); the same push twice is one."""
    outbox.enqueue_once(conn, PUSH_KIND, job)


@dataclass(frozen=True)
class Linked:
    workloads: list[str]
    every: int


def _linked(svc: JobContext, client: GitHubClient, p: dict[str, Any]) -> Linked:
    """The workloads linked on the push's branch: stored links, and kernalin.yml's at the
    pushed commit (a file that does not parse links nothing; the action says why)."""
    with svc.database.read() as conn:
        stored = [k.workload for k in autosync.links(conn, p["repository_id"], p["branch"])]
    every = svc.settings.autosync_every
    text = client.file_text(p["repository"], DEFAULT_CONFIG_FILE, p["after"])
    config = None
    if text is not None:
        try:
            config = KernalinConfig.model_validate(yaml.safe_load(text) or {})
        except (yaml.YAMLError, ValidationError, RecursionError, TypeError) as e:
            log.warning("%s: kernalin.yml at %s is not valid: %s", p["repository"], p["after"], e)
    from_file: list[str] = []
    if config is not None and config.auto_sync and config.auto_sync.branch == p["branch"]:
        from_file = config.synced_workloads()
        if config.auto_sync.every is not None:
            every = config.auto_sync.every
    return Linked(sorted(set(stored) | set(from_file)), every)


def _pushed_commits(client: GitHubClient, p: dict[str, Any]) -> list[tuple[str, set[str]]]:
    """The pushed commits, oldest first, with the paths each touched."""
    listed = {c["sha"]: set(c["files"]) for c in p["commits"]}
    order = [c["sha"] for c in p["commits"]]
    if len(order) >= PAYLOAD_COMMITS and p["before"] != ZERO_SHA:
        # GitHub cut the list: compare-commits lists them all (paged, up to 10,000), and each commit
        # not in the payload is asked for its files.
        try:
            order = [
                c.sha for c in client.compare_commits(p["repository"], p["before"], p["after"])
            ]
        except GitHubError as e:
            if e.status != 404:
                raise  # GitHub down or busy: the outbox tries again later
            log.warning("%s: cannot list %s...%s: %s", p["repository"], p["before"], p["after"], e)
    return [
        (sha, listed[sha] if sha in listed else set(client.commit_files(p["repository"], sha)))
        for sha in order
    ]


def _closures(
    client: GitHubClient, p: dict[str, Any], workloads: list[str], touched: set[str]
) -> dict[str, set[str]]:
    """Each workload's import closure at the pushed commit; GitHub is asked only when a pushed
    commit touched some other Python file (else the workload alone decides)."""
    others = {f for f in touched if f.endswith(".py")} - set(workloads)
    if not others:
        return {w: {w} for w in workloads}
    try:
        paths, cut = client.tree_paths(p["repository"], p["after"])
    except GitHubError as e:
        if e.status not in (404, 409, 422):
            raise  # GitHub down or busy: the outbox tries again later
        # The pushed commit is gone (force-pushed away) or the repository empty: the
        # workloads themselves still decide.
        log.warning("%s: no file list at %s: %s", p["repository"], p["after"], e)
        return {w: {w} for w in workloads}
    if cut:
        log.warning("%s: GitHub cut the file list at %s", p["repository"], p["after"])
    texts: dict[str, str | None] = {}

    def read(path: str) -> str | None:
        if path not in texts:
            texts[path] = client.file_text(p["repository"], path, p["after"])
        return texts[path]

    found = {}
    for w in workloads:
        found[w], cut = import_closure(w, paths, read)
        if cut:
            log.warning("%s: %s imports more files than auto-sync follows", p["repository"], w)
    return found


def _client(svc: JobContext, p: dict[str, Any]) -> GitHubClient | None:
    app = svc.github.app
    if app is None or svc.settings.autosync_in_flight == 0:
        return None
    return app.client(installation_id=p.get("installation_id"), repository=p["repository"])


def handle_push(svc: JobContext, job: OutboxJob) -> None:
    """PUSH_KIND: queue each new commit of the push that touches a linked workload, and the
    head when the branch went RNX_AUTOSYNC_EVERY commits without a run."""
    p = job.payload
    if not isinstance(p.get("repository_id"), int) or not p.get("after"):
        raise PermanentFailure(f"an auto-sync push needs repository_id and after, got {p!r}")
    client = _client(svc, p)
    if client is None:
        return
    linked = _linked(svc, client, p)
    if not linked.workloads:
        return
    pushed = _pushed_commits(client, p)
    closures = _closures(client, p, linked.workloads, set().union(*(f for _, f in pushed)))
    touching = [
        (sha, [w for w in linked.workloads if closures[w] & files]) for sha, files in pushed
    ]
    since = _commits_since_run(svc, client, p, linked, touching)
    now, head = utcnow(), p["after"]
    head_due = now + timedelta(seconds=svc.settings.autosync_wait_s)
    with svc.database.write() as conn:
        autosync.hold(conn, p["repository_id"])
        for i, (sha, workloads) in enumerate(touching):
            if workloads:
                due = head_due if sha == head else now
                later = [s for s, _ in touching[i + 1 :]]
                autosync.queue(
                    conn, p["repository_id"], sha, branch=p["branch"], workloads=workloads,
                    reason=TOUCHED, due_at=due, later=later,
                )  # fmt: skip
        if linked.every and since >= linked.every:
            autosync.queue(
                conn, p["repository_id"], head, branch=p["branch"], workloads=linked.workloads,
                reason=EVERY_N, due_at=head_due,
            )  # fmt: skip
        # A look now; the queued head's own look is scheduled by that one (_next_due).
        look_again(conn, p["repository_id"])


def _commits_since_run(
    svc: JobContext,
    client: GitHubClient,
    p: dict[str, Any],
    linked: Linked,
    touching: list[tuple[str, list[str]]],
) -> int:
    """How many commits the branch's head is past the newest one benchmarked (or queued to
    be): counted in the push when it queues one, else with compare-commits from the newest
    stored baseline run or auto-sync row; a branch never benchmarked counts as never."""
    if not linked.every:
        return 0
    marked = [i for i, (_, workloads) in enumerate(touching) if workloads]
    if marked:
        return len(touching) - 1 - marked[-1]
    with svc.database.read() as conn:
        anchor = autosync.newest_covered(conn, p["repository_id"], p["branch"], linked.workloads)
    if anchor is None:
        return linked.every  # nothing benchmarked yet: the first run is the bound's start
    if anchor == p["after"]:
        return 0
    try:
        return len(client.compare_commits(p["repository"], anchor, p["after"]))
    except GitHubError as e:
        if e.status != 404:
            raise
        return linked.every  # the anchor is gone (a force-push): count from nothing


def handle_dispatch(svc: JobContext, job: OutboxJob) -> None:
    """DISPATCH_KIND: dispatch the repository's due commits while fewer than
    RNX_AUTOSYNC_IN_FLIGHT runs are in flight; look again when the next one is due."""
    repository_id = job.payload.get("repository_id")
    if not isinstance(repository_id, int):
        raise PermanentFailure(f"an auto-sync dispatch needs repository_id, got {job.payload!r}")
    while True:
        with svc.database.write() as conn:
            autosync.hold(conn, repository_id)
            chosen = _next_due(svc, conn, repository_id)
            repo = repositories.by_id(conn, repository_id)
        if chosen is None or repo is None:
            return
        _dispatch(svc, repo.name, chosen)


def look_again(conn: Connection, repository_id: int, delay: timedelta = timedelta(0)) -> None:
    """Queue a DISPATCH_KIND look at the repository after `delay`, unless one is due by then
    already (each look that finds work for later queues its own next look: without this, the
    looks of many pushes would each keep a copy going)."""
    payload = {"repository_id": repository_id}
    if not outbox.waiting(conn, DISPATCH_KIND, payload, by=utcnow() + delay):
        outbox.enqueue(conn, DISPATCH_KIND, payload, delay=delay)


def _next_due(svc: JobContext, conn: Connection, repository_id: int) -> autosync.SyncCommit | None:
    """The next commit to dispatch, written `dispatching`; None when there is none now (a later
    look is queued when one is due later or the repository is busy)."""
    now = utcnow()
    for row in autosync.due(conn, repository_id):
        if row.due_at > now:
            look_again(conn, repository_id, row.due_at - now)
            return None
        have = autosync.benchmarked(conn, repository_id, [row.sha], row.workloads)
        if set(row.workloads) <= have.get(row.sha, set()):
            autosync.set_state(conn, row.id, autosync.SKIPPED, note="a run of it came back")
            continue
        limit = svc.settings.autosync_in_flight
        if limit == 0:
            return None
        if autosync.in_flight(conn, repository_id, RUN_TIMEOUT) >= limit:
            look_again(conn, repository_id, BUSY_RETRY)
            return None
        autosync.set_state(conn, row.id, autosync.DISPATCHING)
        return row
    return None


def _dispatch(svc: JobContext, repository: str, row: autosync.SyncCommit) -> None:
    app = svc.github.app
    try:
        if app is None:
            raise GitHubError("App mode is off")
        app.client(repository=repository).dispatch_workflow(
            repository, svc.settings.bisect_workflow, ref=row.branch, inputs={"commit": row.sha}
        )
    except GitHubError as e:
        what = f"auto-sync dispatch of {repository} at {row.sha[:12]}: {e}"
        if e.status in (404, 422):
            # No such workflow, branch or input: trying again cannot help. Said on the row
            # (rnx link --list shows it) and in the log, with the fix.
            log.warning("%s; %s", what, REFUSED_FIX)
            with svc.database.write() as conn:
                autosync.set_state(conn, row.id, autosync.REFUSED, note=str(e)[:300])
            return
        # GitHub did not take it: nothing runs, so the commit is queued again, job retried.
        with svc.database.write() as conn:
            autosync.withdraw(conn, row.id)
        raise RuntimeError(what) from None
    with svc.database.write() as conn:
        autosync.set_state(conn, row.id, autosync.DISPATCHED)
