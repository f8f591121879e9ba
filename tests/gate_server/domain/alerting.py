"""The alert tests' world: the server in-process with its outbox worker stopped (the tests run the
jobs), a CI token for acme/kernels, two HTTP receivers, and what the tests do with them (add a
channel, upload a run, run the jobs); and the checks of a message against Slack's and Teams' own
validators. The `alerting` fixture (conftest.py) builds one."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from starlette.testclient import TestClient

from gate_server.db import Database, outbox
from gate_server.domain.alerts import channels, manage
from gate_server.domain.alerts.traffic import ChannelTraffic
from gate_server.jobs.handlers import HANDLERS
from gate_server.jobs.worker import OutboxWorker
from gate_server.settings import ServerSettings
from testbed.factories import body, make_results
from testbed.gate_helpers import Token, signed_headers
from testbed.receivers import HttpReceiver

PUBLIC = "https://gate.example.com"
UPLOAD = "/api/v1/runs"
ADAPTIVE_CARD_SCHEMA = Path(__file__).parents[2] / "data" / "vendor" / "adaptive-card-1.4.json"


@dataclass(frozen=True)
class Svc:
    """What handlers use of the server's services."""

    database: Database
    settings: ServerSettings
    traffic: ChannelTraffic = field(default_factory=ChannelTraffic)


@dataclass(frozen=True)
class Alerting:
    app: TestClient
    token: Token
    storage: Database
    settings: ServerSettings
    receivers: dict[str, HttpReceiver]  # "slack" and "hook", each answering 200

    def channel(
        self,
        spec: channels.ChannelSpec,
        name: str,
        *,
        repository: str | None = None,
        events: tuple[str, ...] = (),
    ) -> int:
        """A channel of workspace acme; `events` empty: every event."""
        added = manage.add_channel(
            self.storage,
            workspace="acme",
            name=name,
            spec=spec,
            repository=repository,
            events=events,
            actor="test",
        )
        return added.channel_id

    def upload(self, **kwargs: Any) -> dict[str, Any]:
        """A run (make_results(**kwargs)) uploaded with the CI token; the server's answer."""
        data = body(make_results(**kwargs))
        r = self.app.post(UPLOAD, content=data, headers=signed_headers(self.token.secret, data))
        assert r.status_code in (200, 201), r.text
        answer: dict[str, Any] = r.json()
        return answer

    def worker(self) -> OutboxWorker:
        """One worker (one process's channel traffic) that retries at once."""
        svc = Svc(self.storage, self.settings)
        return OutboxWorker(svc, HANDLERS, poll_s=0, lease_s=60, first_retry_s=0.0)

    def drain(self, *, limit: int = 200) -> int:
        """Run due outbox jobs until none is left; how many ran."""
        worker = self.worker()
        ran = 0
        while ran < limit and worker.run_once():
            ran += 1
        return ran

    def jobs(self, kind: str) -> list[outbox.OutboxJob]:
        with self.storage.read() as conn:
            return list(outbox.jobs(conn, kind=kind))


def check_slack_blocks(message: dict[str, Any]) -> None:
    """Every block of a Slack message passes slack_sdk's own Block Kit checks, unchanged."""
    from slack_sdk.models.blocks import Block

    for block_json in message["blocks"]:
        parsed = Block.parse(block_json)
        assert parsed is not None, f"slack_sdk knows no block {block_json['type']!r}"
        parsed.validate_json()  # raises SlackObjectFormationError past any Block Kit limit
        assert parsed.to_dict() == block_json  # nothing Slack would drop or change


def check_teams_card(card: dict[str, Any]) -> None:
    """A Teams message's card validates against the official Adaptive Card 1.4 schema."""
    import jsonschema

    schema = json.loads(ADAPTIVE_CARD_SCHEMA.read_text(encoding="utf-8"))
    checker = jsonschema.Draft6Validator.FORMAT_CHECKER
    jsonschema.Draft6Validator(schema, format_checker=checker).validate(card)
