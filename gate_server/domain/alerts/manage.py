"""Adding, listing and removing alert channels and rules (what `rnx notify` runs): every change
is audited, never with a secret."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy.engine import Connection

from gate_server.db import Database, alerts, audit, repositories
from gate_server.db.alerts import Channel, Rule
from gate_server.domain.alerts.channels import ChannelSpec, check_name, send
from gate_server.domain.alerts.events import ALARMS, EVENTS, test_event
from gate_server.errors import InvalidInput, NotFound


def check_events(names: Sequence[str]) -> list[str]:
    """Event names as rules store them ('change-point' and 'change_point' alike); the alarms
    (every event but scheduled-report) when none are named."""
    cleaned = sorted({n.strip().replace("-", "_") for n in names if n.strip()})
    unknown = [n for n in cleaned if n not in EVENTS]
    if unknown:
        known = ", ".join(e.replace("_", "-") for e in EVENTS)
        raise InvalidInput(f"unknown event {unknown[0]!r}; choose from {known}")
    return cleaned or sorted(ALARMS)


def _workspace(conn: Connection, name: str) -> int:
    found = alerts.workspace_id(conn, name)
    if found is None:
        raise NotFound(
            f"no workspace {name!r}; `rnx token list` shows the workspaces (a workspace is made "
            "by its first `rnx token create`)"
        )
    return found


def _repository(conn: Connection, workspace_id: int, name: str | None) -> int | None:
    if name is None:
        return None
    found = repositories.named(conn, name, workspace_id=workspace_id)
    if not found:
        raise NotFound(
            f"no repository {name!r} in this workspace; `rnx token list` shows the registered "
            "repositories (leave out --repo for every repository of the workspace)"
        )
    return found[0].id


@dataclass(frozen=True)
class Added:
    channel_id: int
    rule_id: int
    events: list[str]


def add_channel(
    database: Database,
    *,
    workspace: str,
    name: str,
    spec: ChannelSpec,
    repository: str | None,
    events: Sequence[str],
    actor: str,
) -> Added:
    """A new channel and its first rule: `events` of `repository` (None: of every repository
    of the workspace) go to it."""
    name = check_name(name)
    chosen = check_events(events)
    with database.write() as conn:
        workspace_id = _workspace(conn, workspace)
        repository_id = _repository(conn, workspace_id, repository)
        channel_id = alerts.add_channel(
            conn,
            workspace_id=workspace_id,
            name=name,
            kind=spec.kind,
            config=spec.config,
            secret=spec.secret,
            shown=spec.shown,
            sealer=database.sealer,
        )
        if channel_id is None:
            raise InvalidInput(
                f"workspace {workspace} has a channel named {name!r} already; choose another "
                "--name, or add a rule to it with --channel"
            )
        rule_id = alerts.add_rule(
            conn,
            workspace_id=workspace_id,
            repository_id=repository_id,
            channel_id=channel_id,
            events=chosen,
        )
        audit.record(
            conn,
            actor=actor,
            action="notify.channel.add",
            subject=f"channel:{channel_id}",
            details={"workspace": workspace, "name": name, "kind": spec.kind, "shown": spec.shown},
        )
        _audit_rule(conn, actor, rule_id, workspace, name, repository, chosen)
    return Added(channel_id, rule_id, chosen)


def add_rule(
    database: Database,
    *,
    workspace: str,
    channel: str,
    repository: str | None,
    events: Sequence[str],
    actor: str,
) -> Added:
    """One more rule for an existing channel (another repository, other events)."""
    chosen = check_events(events)
    with database.write() as conn:
        workspace_id = _workspace(conn, workspace)
        repository_id = _repository(conn, workspace_id, repository)
        found = alerts.channel_named(conn, workspace_id, channel)
        if found is None:
            raise NotFound(f"no channel {channel!r} in workspace {workspace}; see rnx notify list")
        rule_id = alerts.add_rule(
            conn,
            workspace_id=workspace_id,
            repository_id=repository_id,
            channel_id=found.id,
            events=chosen,
        )
        _audit_rule(conn, actor, rule_id, workspace, channel, repository, chosen)
    return Added(found.id, rule_id, chosen)


def _audit_rule(
    conn: Connection,
    actor: str,
    rule_id: int,
    workspace: str,
    channel: str,
    repository: str | None,
    events: list[str],
) -> None:
    audit.record(
        conn,
        actor=actor,
        action="notify.rule.add",
        subject=f"rule:{rule_id}",
        details={
            "workspace": workspace,
            "channel": channel,
            "repository": repository,
            "events": events,
        },
    )


def listing(database: Database, workspace: str | None) -> tuple[list[Channel], list[Rule]]:
    with database.read() as conn:
        workspace_id = None if workspace is None else _workspace(conn, workspace)
        return alerts.channels(conn, workspace_id), alerts.rules(conn, workspace_id)


def remove_channel(database: Database, channel_id: int, *, actor: str) -> Channel:
    """The channel stops, with its rules; its secret is wiped."""
    with database.write() as conn:
        found = alerts.channel(conn, channel_id)
        if found is None:
            raise NotFound(f"no channel {channel_id}; `rnx notify list` shows the channels")
        alerts.remove_channel(conn, channel_id)
        audit.record(
            conn,
            actor=actor,
            action="notify.channel.remove",
            subject=f"channel:{channel_id}",
            details={"workspace": found.workspace, "name": found.name, "kind": found.kind},
        )
    return found


def remove_rule(database: Database, rule_id: int, *, actor: str) -> None:
    with database.write() as conn:
        if alerts.rule_workspace(conn, rule_id) is None:
            raise NotFound(f"no rule {rule_id}; `rnx notify list` shows the rules")
        alerts.remove_rule(conn, rule_id)
        audit.record(conn, actor=actor, action="notify.rule.remove", subject=f"rule:{rule_id}")


def send_test(database: Database, channel_id: int, *, public_url: str | None) -> Channel:
    """Send a test message to one channel now (not through the outbox); DeliveryFailed, its
    text without secrets, when it does not go through."""
    with database.read() as conn:
        found = alerts.channel(conn, channel_id)
        secret = {} if found is None else alerts.channel_secret(conn, channel_id, database.sealer)
    if found is None:
        raise NotFound(f"no channel {channel_id}; `rnx notify list` shows the channels")
    did = str(uuid.uuid4())
    facts = test_event(channel=found.name, workspace=found.workspace, delivery_id=did)
    send(found.kind, found.config, secret, facts, did, public_url=public_url)
    return found
