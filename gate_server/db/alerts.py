"""Alerts' storage: channels (with their secrets), rules, and one row per delivery."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import insert, or_, select, update
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from gate_server.clock import utcnow
from gate_server.db.rows import as_record
from gate_server.db.schema import (
    notify_channels,
    notify_deliveries,
    notify_rules,
    repositories,
    workspaces,
)
from gate_server.db.sealed import Sealer

_ERROR_CHARS = 500


@dataclass(frozen=True)
class Channel:
    """A channel as listings show it: never its secret."""

    id: int
    workspace_id: int
    workspace: str
    name: str
    kind: str
    config: dict[str, Any]
    shown: str
    created_at: datetime
    failures: int
    failing_since: datetime | None
    last_error: str | None
    last_delivered_at: datetime | None


@dataclass(frozen=True)
class Rule:
    id: int
    workspace: str
    repository: str | None  # None: every repository of the workspace
    channel_id: int
    channel: str
    events: list[str]
    created_at: datetime


@dataclass(frozen=True)
class Delivery:
    delivery_id: str
    event_id: str
    event: str
    channel_id: int
    payload: dict[str, Any]
    attempts: int
    delivered_at: datetime | None


_CHANNEL_COLUMNS = [c for c in notify_channels.c if c.name not in ("secret", "config")]


def _channel(m: Any) -> Channel:
    return as_record(Channel, m, config=json.loads(m["config"]))


def _channels_query() -> Any:
    return (
        select(*_CHANNEL_COLUMNS, notify_channels.c.config, workspaces.c.name.label("workspace"))
        .select_from(notify_channels.join(workspaces))
        .where(notify_channels.c.removed_at.is_(None))
    )


def add_channel(
    conn: Connection,
    *,
    workspace_id: int,
    name: str,
    kind: str,
    config: dict[str, Any],
    secret: dict[str, Any],
    shown: str,
    sealer: Sealer,
) -> int | None:
    """Store a channel; None when the workspace has a channel of that name already."""
    try:
        with conn.begin_nested():
            return int(
                conn.execute(
                    insert(notify_channels)
                    .values(
                        workspace_id=workspace_id,
                        name=name,
                        kind=kind,
                        config=json.dumps(config, sort_keys=True),
                        secret=sealer.seal(json.dumps(secret, sort_keys=True)),
                        shown=shown,
                        created_at=utcnow(),
                        failures=0,
                    )
                    .returning(notify_channels.c.id)
                ).scalar_one()
            )
    except IntegrityError:
        return None


def workspace_id(conn: Connection, name: str) -> int | None:
    found = conn.execute(select(workspaces.c.id).where(workspaces.c.name == name)).scalar()
    return None if found is None else int(found)


def channels(conn: Connection, workspace_id: int | None = None) -> list[Channel]:
    query = _channels_query().order_by(notify_channels.c.id)
    if workspace_id is not None:
        query = query.where(notify_channels.c.workspace_id == workspace_id)
    return [_channel(r._mapping) for r in conn.execute(query)]


def channel(conn: Connection, channel_id: int) -> Channel | None:
    row = conn.execute(_channels_query().where(notify_channels.c.id == channel_id)).first()
    return None if row is None else _channel(row._mapping)


def channel_named(conn: Connection, workspace_id: int, name: str) -> Channel | None:
    row = conn.execute(
        _channels_query().where(
            notify_channels.c.workspace_id == workspace_id, notify_channels.c.name == name
        )
    ).first()
    return None if row is None else _channel(row._mapping)


def channel_secret(conn: Connection, channel_id: int, sealer: Sealer) -> dict[str, Any]:
    """The channel's secret, for sending only (gate_server/domain/alerts/ is the one caller)."""
    found = conn.execute(
        select(notify_channels.c.secret).where(notify_channels.c.id == channel_id)
    ).scalar_one()
    value: dict[str, Any] = json.loads(sealer.open(found))
    return value


def remove_channel(conn: Connection, channel_id: int) -> None:
    """The channel and its rules stop; the secret is wiped (deliveries keep their history)."""
    now = utcnow()
    conn.execute(
        update(notify_channels)
        .where(notify_channels.c.id == channel_id)
        .values(removed_at=now, secret="{}", name=notify_channels.c.name + f"#removed-{channel_id}")
    )
    conn.execute(
        update(notify_rules)
        .where(notify_rules.c.channel_id == channel_id, notify_rules.c.removed_at.is_(None))
        .values(removed_at=now)
    )


def add_rule(
    conn: Connection,
    *,
    workspace_id: int,
    repository_id: int | None,
    channel_id: int,
    events: list[str],
) -> int:
    return int(
        conn.execute(
            insert(notify_rules)
            .values(
                workspace_id=workspace_id,
                repository_id=repository_id,
                channel_id=channel_id,
                events=json.dumps(sorted(events)),
                created_at=utcnow(),
            )
            .returning(notify_rules.c.id)
        ).scalar_one()
    )


def rules(conn: Connection, workspace_id: int | None = None) -> list[Rule]:
    query = (
        select(
            notify_rules.c.id,
            notify_rules.c.channel_id,
            notify_rules.c.events,
            notify_rules.c.created_at,
            workspaces.c.name.label("workspace"),
            repositories.c.name.label("repository"),
            notify_channels.c.name.label("channel"),
        )
        .select_from(
            notify_rules.join(workspaces, notify_rules.c.workspace_id == workspaces.c.id)
            .join(notify_channels, notify_rules.c.channel_id == notify_channels.c.id)
            .outerjoin(repositories, notify_rules.c.repository_id == repositories.c.id)
        )
        .where(notify_rules.c.removed_at.is_(None))
        .order_by(notify_rules.c.id)
    )
    if workspace_id is not None:
        query = query.where(notify_rules.c.workspace_id == workspace_id)
    return [
        as_record(Rule, r._mapping, events=json.loads(r._mapping["events"]))
        for r in conn.execute(query)
    ]


def rule_workspace(conn: Connection, rule_id: int) -> int | None:
    found = conn.execute(
        select(notify_rules.c.workspace_id).where(
            notify_rules.c.id == rule_id, notify_rules.c.removed_at.is_(None)
        )
    ).scalar()
    return None if found is None else int(found)


def remove_rule(conn: Connection, rule_id: int) -> None:
    conn.execute(
        update(notify_rules).where(notify_rules.c.id == rule_id).values(removed_at=utcnow())
    )


def matching_channels(
    conn: Connection, workspace_id: int, repository_id: int | None, event: str
) -> list[int]:
    """The ids of the live channels whose rules take `event` of this repository (with
    repository_id None, an event of the workspace itself: every rule of the workspace), each
    once."""
    query = (
        select(notify_rules.c.channel_id, notify_rules.c.events)
        .select_from(notify_rules.join(notify_channels))
        .where(
            notify_rules.c.workspace_id == workspace_id,
            notify_rules.c.removed_at.is_(None),
            notify_channels.c.removed_at.is_(None),
        )
        .order_by(notify_rules.c.channel_id)
    )
    if repository_id is not None:
        query = query.where(
            or_(
                notify_rules.c.repository_id.is_(None),
                notify_rules.c.repository_id == repository_id,
            )
        )
    rows = conn.execute(query)
    return sorted({int(r.channel_id) for r in rows if event in json.loads(r.events)})


def add_delivery(
    conn: Connection,
    *,
    delivery_id: str,
    event_id: str,
    event: str,
    channel_id: int,
    payload: dict[str, Any],
) -> bool:
    """Record a delivery; False when it is recorded already (the event was fanned out)."""
    try:
        with conn.begin_nested():
            conn.execute(
                insert(notify_deliveries).values(
                    delivery_id=delivery_id,
                    event_id=event_id,
                    event=event,
                    channel_id=channel_id,
                    payload=json.dumps(payload, sort_keys=True),
                    created_at=utcnow(),
                    attempts=0,
                )
            )
    except IntegrityError:
        return False
    return True


def delivery(conn: Connection, delivery_id: str) -> Delivery | None:
    row = conn.execute(
        select(notify_deliveries).where(notify_deliveries.c.delivery_id == delivery_id)
    ).first()
    if row is None:
        return None
    return as_record(Delivery, row._mapping, payload=json.loads(row._mapping["payload"]))


def record_success(conn: Connection, delivery_id: str, channel_id: int) -> None:
    now = utcnow()
    conn.execute(
        update(notify_deliveries)
        .where(notify_deliveries.c.delivery_id == delivery_id)
        .values(attempts=notify_deliveries.c.attempts + 1, delivered_at=now, last_error=None)
    )
    conn.execute(
        update(notify_channels)
        .where(notify_channels.c.id == channel_id)
        .values(failures=0, failing_since=None, last_error=None, last_delivered_at=now)
    )


def record_failure(conn: Connection, delivery_id: str, channel_id: int, error: str) -> int:
    """Count a failed send against the delivery and its channel; the channel's consecutive
    failures now."""
    error = error[:_ERROR_CHARS]
    conn.execute(
        update(notify_deliveries)
        .where(notify_deliveries.c.delivery_id == delivery_id)
        .values(attempts=notify_deliveries.c.attempts + 1, last_error=error)
    )
    conn.execute(
        update(notify_channels)
        .where(notify_channels.c.id == channel_id)
        .values(failures=notify_channels.c.failures + 1, last_error=error)
    )
    return int(
        conn.execute(
            select(notify_channels.c.failures).where(notify_channels.c.id == channel_id)
        ).scalar_one()
    )


def mark_failing(conn: Connection, channel_id: int, since: datetime) -> bool:
    """Mark the channel failing; False when it was marked already (one alert per streak)."""
    result = conn.execute(
        update(notify_channels)
        .where(notify_channels.c.id == channel_id, notify_channels.c.failing_since.is_(None))
        .values(failing_since=since)
    )
    return bool(result.rowcount)


def delivery_counts(conn: Connection) -> dict[str, int]:
    """How many deliveries are recorded and how many of them were delivered (benchmarks)."""
    rows = conn.execute(
        select(notify_deliveries.c.delivered_at.is_not(None).label("done"))
    ).scalars()
    done = list(rows)
    return {"deliveries": len(done), "delivered": sum(1 for d in done if d)}
