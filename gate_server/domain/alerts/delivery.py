"""Alerts through the outbox: an event is written with what caused it (emit), fanned out to one
delivery per matching channel (fan_out), and each delivery is sent with the outbox's retries
(deliver). Every step is safe to run twice, as a process killed mid-job makes it run again:

- fan-out records each delivery under an id made from the event and the channel, so a second
  fan-out finds it recorded and enqueues nothing;
- a delivery already sent is not sent again; one sent whose process died before recording it
  is sent again with the same delivery id, which the receiver deduplicates by (Slack and
  Teams show it in the message, email as its Message-ID, the webhook as X-Kernalin-Delivery).

Sends to one channel go one at a time, and a channel whose send timed out is parked for a
minute (gate_server/domain/alerts/traffic.py): its deliveries wait (TryLater) instead of each
waiting out the timeout, while the other delivery lanes send to every other channel.

A channel whose sends fail FAILING_AFTER times in a row is marked failing (`rnx notify list`
shows it) and one channel_failing event goes to the workspace's other channels; its first
success clears the mark.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from sqlalchemy.engine import Connection

from gate_server.clock import utcnow
from gate_server.db import alerts, bisections, change_points, outbox, repositories, runs
from gate_server.db.outbox import OutboxJob
from gate_server.domain.alerts import channels, failures
from gate_server.domain.alerts.events import (
    CHANGE_POINT,
    CHANNEL_FAILING,
    CULPRIT,
    EVENTS,
    GITHUB_WEB,
    SCHEDULED_REPORT,
    channel_failing_event,
    compare_link,
    dashboard_link,
    environment_facts,
    outbox_kind,
    pull_request_link,
    run_link,
)
from gate_server.domain.alerts.report import report_facts
from gate_server.domain.environments import document_label
from gate_server.errors import TryLater

if TYPE_CHECKING:
    from gate_server.domain.job_context import JobContext

DELIVER = "alert.deliver"
FAILING_AFTER = 5  # failed sends in a row that make a channel "failing"
# Delivery ids are UUIDs derived from (event id, channel id): the same on every fan-out.
_DELIVERY_NAMESPACE = uuid.UUID("8f6d8a52-2f0e-4c9b-9d5e-3b7f4f0a6c11")


def delivery_id(event_id: str, channel_id: int) -> str:
    return str(uuid.uuid5(_DELIVERY_NAMESPACE, f"{event_id}/{channel_id}"))


def emit(
    conn: Connection, facts: dict[str, Any], *, workspace_id: int, repository_id: int | None
) -> None:
    """Write an event to the outbox inside the caller's transaction: it exists exactly when
    what caused it (a run, an accept) is committed."""
    outbox.enqueue(
        conn,
        outbox_kind(facts["event"]),
        {"workspace_id": workspace_id, "repository_id": repository_id, "facts": facts},
    )


def _fan_out(
    conn: Connection,
    facts: dict[str, Any],
    workspace_id: int,
    repository_id: int | None,
    *,
    skip_channel: int | None = None,
    rules_event: str | None = None,
) -> int:
    """One delivery per channel whose rules take this event (`rules_event`: the channels whose
    rules take that one instead); how many were new."""
    event = facts["event"]
    new = 0
    matching = alerts.matching_channels(conn, workspace_id, repository_id, rules_event or event)
    for channel_id in matching:
        if channel_id == skip_channel:
            continue
        did = delivery_id(facts["event_id"], channel_id)
        recorded = alerts.add_delivery(
            conn,
            delivery_id=did,
            event_id=facts["event_id"],
            event=event,
            channel_id=channel_id,
            payload=facts,
        )
        if recorded:
            outbox.enqueue(conn, DELIVER, {"delivery_id": did})
            new += 1
    return new


def fan_out(svc: JobContext, job: OutboxJob) -> None:
    """The handler of event.block, event.accepted_slowdown and event.channel_failing."""
    p = job.payload
    facts = p["facts"]
    skip = facts.get("channel_id") if facts["event"] == CHANNEL_FAILING else None
    with svc.database.write() as conn:
        _fan_out(conn, facts, p["workspace_id"], p.get("repository_id"), skip_channel=skip)


def _environment(conn: Connection, found: change_points.NewChangePoint) -> dict[str, Any]:
    """A change point's environment: its key, and its name from the run after the step."""
    document = runs.document(conn, found.after_run_id)
    return environment_facts(document_label(document, found.environment_key))


def change_point_facts(conn: Connection, change_id: int) -> tuple[dict[str, Any], int, int] | None:
    """A stored change point's facts, with its workspace and repository ids."""
    found = change_points.by_id(conn, change_id)
    if found is None:
        return None
    repo = repositories.by_id(conn, found.repository_id)
    if repo is None:
        return None
    facts = {
        "event_id": f"{CHANGE_POINT}:{found.id}",
        "event": CHANGE_POINT,
        "change_point_id": found.id,
        "repository": found.repository,
        "run_id": found.after_run_id,
        "sha": found.after_sha,
        "branch": found.branch,
        "workload": found.workload,
        **_environment(conn, found),
        "baseline_sha": found.before_sha,
        "worst": {
            "configuration": found.configuration,
            "ratio": found.ratio,
            "low": found.low,
            "high": found.high,
        },
        "p_value": found.p_value,
        "early": found.early,  # found in a short history, on weaker evidence
        "drift_end_sha": found.end_sha,  # a drift: the level moved over the runs up to this one
        "undoes_id": found.undoes_id,  # a step back: it takes back this earlier change point
        # What else moved at this commit (as far as detection has run when this is sent).
        "also_moved": [
            {
                "configuration": other.configuration,
                "workload": other.workload,
                **_environment(conn, other),
                "ratio": other.ratio,
            }
            for other in change_points.moved_with(conn, found)
        ],
        "links": {
            "run": run_link(found.after_run_id),
            "commits": compare_link(found.repository, found.before_sha, found.after_sha),
            "dashboard": dashboard_link(
                found.repository,
                {
                    "branch": found.branch,
                    "environment": found.environment_key,
                    "workload": found.workload,
                    "configuration": found.configuration,
                },
            ),
        },
    }
    return facts, repo.workspace_id, repo.id


def fan_out_change_point(svc: JobContext, job: OutboxJob) -> None:
    """The handler of event.change_point (enqueued by the change-point detector with the
    change point's API fields; its id is what is read here)."""
    change_id = int(job.payload["change_point"]["id"])
    with svc.database.write() as conn:
        found = change_point_facts(conn, change_id)
        if found is not None:
            facts, workspace_id, repository_id = found
            _fan_out(conn, facts, workspace_id, repository_id)


def fan_out_culprit(svc: JobContext, job: OutboxJob) -> None:
    """The handler of event.culprit (queued when a bisection names its change point's culprit):
    one alert per change point, to the channels whose rules take change points (it follows
    the change point's own alert)."""
    change_id = int(job.payload["change_point_id"])
    with svc.database.write() as conn:
        found = change_point_facts(conn, change_id)
        b = bisections.of_change_point(conn, change_id)
        if found is None or b is None or b.culprit_sha is None:
            return
        cp_facts, workspace_id, repository_id = found
        facts = culprit_facts(cp_facts, b.culprit_sha, b.culprit_author, b.culprit_pr)
        _fan_out(conn, facts, workspace_id, repository_id, rules_event=CHANGE_POINT)


def culprit_facts(
    cp: dict[str, Any], sha: str, author: str | None, pr: int | None
) -> dict[str, Any]:
    """A change point's facts (change_point_facts) turned into its culprit's."""
    repository = cp["repository"]
    links = {
        "commits": f"{GITHUB_WEB}/{repository}/commit/{sha}",
        "pull_request": pull_request_link(repository, pr),
        "dashboard": cp["links"].get("dashboard"),
    }
    return {
        **{k: cp[k] for k in ("repository", "branch", "workload", "worst", "change_point_id")},
        **{k: cp[k] for k in ("environment", "environment_name")},
        "event_id": f"{CULPRIT}:{cp['change_point_id']}",
        "event": CULPRIT,
        "sha": sha,
        "author": author,
        "pr_number": pr,
        "links": {k: v for k, v in links.items() if v},
    }


def deliver(svc: JobContext, job: OutboxJob) -> None:
    """The handler of alert.deliver: send one delivery; raise to have it tried again."""
    did = job.payload["delivery_id"]
    with svc.database.read() as conn:
        found = alerts.delivery(conn, did)
        channel = None if found is None else alerts.channel(conn, found.channel_id)
        secret = (
            {} if channel is None else alerts.channel_secret(conn, channel.id, svc.database.sealer)
        )
    if found is None or found.delivered_at is not None or channel is None:
        return  # sent already, or its channel was removed meanwhile
    why_not = svc.traffic.enter(channel.id)
    if why_not is not None:
        raise TryLater(why_not)  # not the receiver's failure: nothing is recorded against it
    timed_out = False
    try:
        channels.send(
            channel.kind,
            channel.config,
            secret,
            found.payload,
            did,
            public_url=svc.settings.public_url,
        )
    except channels.DeliveryFailed as e:
        timed_out = str(e) == failures.TIMEOUT
        _failed(svc, did, channel.id, str(e))
        raise
    finally:
        svc.traffic.leave(channel.id, timed_out=timed_out)
    with svc.database.write() as conn:
        alerts.record_success(conn, did, channel.id)


def _failed(svc: JobContext, did: str, channel_id: int, error: str) -> None:
    with svc.database.write() as conn:
        count = alerts.record_failure(conn, did, channel_id, error)
        if count < FAILING_AFTER:
            return
        since = utcnow()
        if not alerts.mark_failing(conn, channel_id, since):
            return
        channel = alerts.channel(conn, channel_id)
        if channel is None:
            return
        facts = channel_failing_event(
            channel_id=channel_id,
            channel=channel.name,
            kind=channel.kind,
            failures=count,
            last_error=error,
            since=since.isoformat(timespec="seconds"),
        )
        emit(conn, facts, workspace_id=channel.workspace_id, repository_id=None)


def fan_out_report(svc: JobContext, job: OutboxJob) -> None:
    """The handler of event.scheduled_report: the report is built now, from what is stored."""
    with svc.database.write() as conn:
        found = report_facts(conn, job.payload["facts"]["run_id"], svc.settings)
        if found is not None:
            facts, workspace_id, repository_id = found
            _fan_out(conn, facts, workspace_id, repository_id)


HANDLERS = {
    **{outbox_kind(e): fan_out for e in EVENTS if e not in (CHANGE_POINT, SCHEDULED_REPORT)},
    outbox_kind(CHANGE_POINT): fan_out_change_point,
    outbox_kind(SCHEDULED_REPORT): fan_out_report,
    outbox_kind(CULPRIT): fan_out_culprit,
    DELIVER: deliver,
}
