"""Change points in baseline history: queued with every baseline run, found after the answer.

Every run that becomes a baseline (a push, a scheduled run or an accept) queues a
DETECT_KIND job in the outbox, in the transaction that stores it, so the upload's answer never
waits for detection and no run is missed; a series has at most one such job waiting untried
(the job reads the series when it runs, so one covers every push before it). The job
(handle_detect, run by the outbox worker) reads the newest WINDOW baseline runs of that
repository, branch, environment and workload, summarises each configuration of each run as
one number (stats.run_location of its samples; computed once per run and kept in the table
run_locations), runs stats.detect per configuration with the change points stored before as
known ones, and
stores what is new, once: a later run finds the same change again only as a known one. A new
change that undoes an earlier one (stats.detect says which) resolves both. Each new change
point queues an EVENT_KIND job for the alerts, in the same transaction.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy.engine import Connection

from gate_server.db import Database, audit, change_points, outbox, repositories, runs
from gate_server.db.change_points import ChangePointRecord, HistoryRun, NewChangePoint
from gate_server.db.outbox import OutboxJob
from gate_server.db.runs import BaselineKey
from gate_server.db.tokens import CI, TokenRecord
from gate_server.domain.auth import actor_of, may_act_on
from gate_server.domain.bisection.jobs import enqueue_start
from gate_server.domain.branches import current_name
from gate_server.domain.run_samples import sample_groups
from gate_server.errors import Forbidden, NotFound, PermanentFailure
from gate_server.numbers import whole_number
from rnx.branches import branch_matches

if TYPE_CHECKING:
    from gate_server.domain.job_context import JobContext

log = logging.getLogger("gate_server.changes")

DETECT_KIND = "detect_changes"
EVENT_KIND = "event.change_point"  # payload: {"event": "change_point.detected", ...}
WINDOW = 200  # newest baseline runs searched (stats.detect: 100-200 is plenty)
OPTIMISTIC_TRIES = 3  # another process stored change points of the series meanwhile: again


def enqueue_detection(conn: Connection, key: BaselineKey) -> None:
    """Queue a look for change points of `key`'s history, inside the caller's transaction
    (the one that makes a run a baseline of it). One look per series waits at a time: a look
    reads the series' newest runs when it runs, so a waiting one covers every run stored
    before it starts, and a flood of pushes queues one look, not one per push."""
    outbox.enqueue_once(
        conn,
        DETECT_KIND,
        {
            "repository_id": key.repository_id,
            "branch": key.branch,
            "environment_key": key.environment_key,
            "workload": key.workload,
        },
    )


def change_point_view(cp: ChangePointRecord) -> dict[str, Any]:
    """A change point as the API answers it and as its event carries it."""
    return {
        "id": cp.id,
        "repository": cp.repository,
        "branch": cp.branch,
        "environment": cp.environment_key,
        "workload": cp.workload,
        "configuration": cp.configuration,
        "before_run_id": cp.before_run_id,
        "before_sha": cp.before_sha,
        "after_run_id": cp.after_run_id,
        "after_sha": cp.after_sha,
        "ratio": cp.ratio,
        "low": cp.low,
        "high": cp.high,
        "p_value": cp.p_value,
        "early": cp.early,
        # A drift: the level moved from after_sha over the runs up to end_sha (its newest level).
        "drift": cp.end_run_id is not None,
        "end_run_id": cp.end_run_id,
        "end_sha": cp.end_sha,
        "detected_at": cp.detected_at.isoformat(),
        "status": cp.status,
        "note": cp.note,
        "acknowledged_at": None if cp.acknowledged_at is None else cp.acknowledged_at.isoformat(),
        "acknowledged_by": cp.acknowledged_by,
        "resolved_at": None if cp.resolved_at is None else cp.resolved_at.isoformat(),
        "undoes_id": cp.undoes_id,
        "compare_url": compare_url(cp.repository, cp.before_sha, cp.end_sha or cp.after_sha),
    }


def compare_url(repository: str, before_sha: str, after_sha: str) -> str:
    """The commits between the last run before a change and the first run after it."""
    return f"https://github.com/{repository}/compare/{before_sha}...{after_sha}"


# ---------------------------------------------------------------- the job


def _key(payload: dict[str, Any]) -> BaselineKey:
    try:
        key = BaselineKey(
            int(payload["repository_id"]),
            str(payload["branch"]),
            str(payload["environment_key"]),
            str(payload["workload"]),
        )
    except (KeyError, TypeError, ValueError) as e:
        raise PermanentFailure(f"a {DETECT_KIND} job needs its series: {e}") from None
    return key


def handle_detect(svc: JobContext, job: OutboxJob) -> None:
    """The DETECT_KIND handler: find and store the series' new change points. Safe to run twice
    and in several processes at once: what is stored is checked again under the series' lock
    before anything new is written."""
    if not svc.settings.detect_changes:
        return
    key = _key(job.payload)
    database = svc.database
    for _ in range(OPTIMISTIC_TRIES):
        with database.read() as conn:
            history = change_points.history(conn, key, WINDOW)
            stored = change_points.locations(conn, [h.run_id for h in history])
            documents = runs.documents(conn, [h.run_id for h in history if h.run_id not in stored])
            known = change_points.of_series(conn, key)
        # Each run is summarised once, by the first look that reads it (a run's samples
        # never change); the summaries are kept below.
        computed = {run_id: run_locations(document) for run_id, document in documents.items()}
        found = find_changes(key, history, {**stored, **computed}, known)
        with database.write() as conn:
            change_points.hold_series(conn, key)
            for run_id, summary in computed.items():
                change_points.store_locations(conn, run_id, summary)
            if [k.id for k in change_points.of_series(conn, key)] != [k.id for k in known]:
                continue  # another job stored change points meanwhile: look again
            _store(conn, found)
            return
    raise RuntimeError(f"the change points of {key} kept changing; will look again later")


@dataclass(frozen=True)
class _Found:
    new: NewChangePoint
    undoes: int | _Found | None  # a stored change point's id, or one found in the same look
    extends: int | None = None  # a stored change point this drift continues: updated, not new


def _store(conn: Connection, found: list[_Found]) -> None:
    ids: dict[int, int] = {}  # id(_Found) -> its stored id
    for f in found:
        if f.extends is not None:
            # The same drift, grown: one change point (alerted when it was first found).
            change_points.extend_drift(conn, f.extends, f.new)
            continue
        undoes = f.undoes if not isinstance(f.undoes, _Found) else ids.get(id(f.undoes))
        stored = change_points.insert_new(conn, f.new, undoes_id=undoes)
        if stored is None:
            continue  # the same change is stored already
        ids[id(f)] = stored
        if f.new.ratio > 1:  # a slowdown: find the commit that caused it
            enqueue_start(conn, stored)
        record = change_points.by_id(conn, stored)
        if record is not None:
            outbox.enqueue(
                conn,
                EVENT_KIND,
                {
                    "event": "change_point.detected",
                    "change_point": change_point_view(record),
                    "resolves": undoes,
                },
            )


def run_locations(document: bytes) -> dict[str, float]:
    """One run's location (stats.run_location) per configuration that has samples; a
    configuration that failed or whose samples cannot be summarised has none."""
    import stats  # numpy and scipy: loaded with the first detection

    out = {}
    for name, groups in sample_groups(document).items():
        try:
            out[name] = stats.run_location(groups)
        except (TypeError, ValueError):
            continue
    return out


def find_changes(
    key: BaselineKey,
    history: list[HistoryRun],
    locations: dict[str, dict[str, float]],
    known: list[ChangePointRecord],
) -> list[_Found]:
    """The change points of each configuration of `history` (oldest first; `locations` by run
    and configuration) not among `known`."""
    series: dict[str, list[tuple[HistoryRun, float]]] = defaultdict(list)
    for run in history:
        for name, location in sorted(locations.get(run.run_id, {}).items()):
            series[name].append((run, location))
    found: list[_Found] = []
    for name in sorted(series):
        mine = [k for k in known if k.configuration == name]
        found += _find_in(key, name, series[name], mine)
    return found


def _find_in(
    key: BaselineKey,
    configuration: str,
    points: list[tuple[HistoryRun, float]],
    known: list[ChangePointRecord],
) -> list[_Found]:
    import stats  # numpy and scipy: loaded with the first detection

    position = {r.run_id: i for i, (r, _) in enumerate(points)}
    # Older than the window: only the newest such one matters (a new change may undo it).
    outside = [k for k in known if k.after_run_id not in position][-1:]
    inside = sorted((position[k.after_run_id], k.id) for k in known if k.after_run_id in position)
    by_id = {k.id: k for k in known}
    placed = [(0, k) for k in outside] + [(i, by_id[k]) for i, k in inside]
    given = [
        stats.KnownChange(i, k.ratio, k.low, k.high, key=k.id, end=_end(k, i, position))
        for i, k in placed
    ]
    try:
        changes = stats.detect([loc for _, loc in points], known=given)
    except ValueError as e:  # a history the statistics refuse: say so, and skip it
        log.warning("change points of %s %s not searched: %s", key, configuration, e)
        return []
    found: list[_Found] = []
    by_change: dict[int, _Found] = {}
    for cp in changes:
        before, after = points[cp.before][0], points[cp.after][0]
        end = None if cp.end is None else points[cp.end][0]
        undoes: int | _Found | None = None
        if isinstance(cp.undoes, stats.KnownChange):
            undoes = int(cp.undoes.key)
        elif cp.undoes is not None:
            undoes = by_change.get(id(cp.undoes))
        f = _Found(
            NewChangePoint(
                repository_id=key.repository_id,
                branch=key.branch,
                environment_key=key.environment_key,
                workload=key.workload,
                configuration=configuration,
                before_run_id=before.run_id,
                before_sha=before.sha,
                after_run_id=after.run_id,
                after_sha=after.sha,
                ratio=cp.ratio,
                low=cp.low,
                high=cp.high,
                p_value=cp.p_value,
                early=cp.early,
                end_run_id=None if end is None else end.run_id,
                end_sha=None if end is None else end.sha,
            ),
            undoes,
            None if cp.continues is None else int(cp.continues.key),
        )
        by_change[id(cp)] = f
        found.append(f)
    return found


def _end(known: ChangePointRecord, after: int, position: dict[str, int]) -> int | None:
    """A stored drift's end as an index into the history, when the window holds it."""
    end = position.get(known.end_run_id) if known.end_run_id is not None else None
    return end if end is not None and end > after else None


# Reading and acknowledging change points, for the API (gate_server/http/change_points.py), the
# dashboard and the agents' tools.
LISTED = 500  # the newest change points answered


def readable_repository_id(database: Database, token: TokenRecord, name: str) -> int:
    """The repository `name` as this token may read it: a CI token's own, or one of a viewer
    token's workspace."""
    if token.kind == CI:
        if token.repository_id is None or (token.repository or "").lower() != name.lower():
            raise Forbidden(
                f"this token acts for {token.repository}, not {name}; use that repository's "
                "CI token or a viewer token of its workspace",
                code="repository_out_of_scope",
            )
        return token.repository_id
    with database.read() as conn:
        found = repositories.named(conn, name, workspace_id=token.workspace_id)
    if not found:
        raise NotFound(
            f"no repository {name} in this token's workspace", code="repository_not_found"
        )
    return found[0].id


def list_change_points(
    database: Database, token: TokenRecord, name: str, filters: dict[str, str | None]
) -> dict[str, Any]:
    """The newest change points of a repository the token may read, filtered."""
    repository_id = readable_repository_id(database, token, name)
    with database.read() as conn:
        found = change_points.listed(conn, repository_id, limit=LISTED, **filters)
    return {"change_points": [change_point_view(cp) for cp in found]}


def acknowledge_change_point(
    database: Database, token: TokenRecord, raw_id: str, note: str
) -> dict[str, Any]:
    """Record the note on a change point of the token's repository; audited."""
    change_id = whole_number(raw_id)
    with database.write() as conn:
        found = None if change_id is None else change_points.by_id(conn, change_id)
        repo = None if found is None else repositories.by_id(conn, found.repository_id)
        if (
            found is None
            or repo is None
            or not may_act_on(token, repository_id=repo.id, workspace_id=repo.workspace_id)
        ):
            raise NotFound(
                f"no change point {raw_id[:40]!r} this token may see", code="change_point_not_found"
            )
        # Silencing a regression on a branch takes a credential for that branch: not an OIDC
        # token of pull-request code or of another branch, nor a CI token of other branches.
        branch = current_name(conn, found.repository_id, found.branch)
        if not branch_matches(token.branches, branch):
            raise Forbidden(
                f"the change point is on branch {branch!r}, which this credential may not "
                f"speak for ({', '.join(token.branches) or 'no baseline branch'}); use a CI "
                f"or acting viewer token for that branch, or an OIDC token of a push to it",
                code="branch_out_of_scope",
            )
        actor = actor_of(token)
        change_points.acknowledge(conn, found.id, note=note, actor=actor)
        audit.record(
            conn,
            actor=actor,
            token_id=token.id,
            action="change_point.acknowledge",
            subject=f"change_point:{found.id}",
            details={
                "note": note,
                "repository": found.repository,
                "branch": found.branch,
                "configuration": found.configuration,
            },
        )
        updated = change_points.by_id(conn, found.id) or found
    return change_point_view(updated)
