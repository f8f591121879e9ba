"""kill -9 of a real server while it delivers alerts, on SQLite and PostgreSQL: after a restart
with two server processes on the same database every delivery arrives, and the only duplicate
is the message the killed process had sent without learning so, under the same delivery id.

The receivers are real (HTTP on loopback for Slack and the webhook, aiosmtpd with STARTTLS and a
login for email); the Slack receiver holds one request unanswered until the kill."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import httpx

from gate_server.db import alerts, open_database
from gate_server.domain.alerts import channels, manage
from testbed.factories import body, make_results
from testbed.gate_helpers import create_token, signed_headers
from testbed.live_server import LiveServer
from testbed.receivers import HttpReceiver, SmtpReceiver

EVENTS = 4  # BLOCKs uploaded, each one event for each of the 3 channels
HELD = 2  # the third Slack request is held until the server is killed


def _add_channels(database_url: str, slack: HttpReceiver, hook: HttpReceiver, smtp: SmtpReceiver):
    database = open_database(database_url)
    try:
        for name, spec in (
            ("slack", channels.slack_channel(slack.url + "/services/T/B/x")),
            ("hook", channels.webhook_channel(hook.url + "/kernalin")),
            (
                "mail",
                channels.email_channel(
                    host="127.0.0.1",
                    port=smtp.port,
                    user=smtp.user,
                    password=smtp.password,
                    sender="gate@example.com",
                    to=["perf@example.com"],
                ),
            ),
        ):
            manage.add_channel(
                database,
                workspace="acme",
                name=name,
                spec=spec,
                repository=None,
                events=["block"],
                actor="test",
            )
    finally:
        database.close()


def _upload(server: LiveServer, secret: str, **kwargs: object) -> str:
    data = body(make_results(**kwargs))  # type: ignore[arg-type]
    r = httpx.post(
        f"{server.url}/api/v1/runs", content=data, headers=signed_headers(secret, data), timeout=60
    )
    assert r.status_code == 201, r.text
    return str(r.json()["tier"])


def _wait_delivered(database_url: str, expected: int, timeout: float = 120.0) -> dict[str, int]:
    database = open_database(database_url)
    try:
        deadline = time.monotonic() + timeout
        while True:
            with database.read() as conn:
                counts = alerts.delivery_counts(conn)
            if counts == {"deliveries": expected, "delivered": expected}:
                return counts
            if time.monotonic() > deadline:
                return counts
            time.sleep(0.2)
    finally:
        database.close()


def test_kill_9_during_delivery_loses_nothing(
    database_url: str, tmp_path: Path, server_factory: Callable[..., LiveServer]
) -> None:
    token = create_token(database_url, branches=("main",))
    slack = HttpReceiver(hold=lambda n: n == HELD).start()
    hook = HttpReceiver().start()
    smtp = SmtpReceiver(tmp_path).start()
    try:
        _add_channels(database_url, slack, hook, smtp)
        env = {
            # A killed process's job is taken over 10 s later. Leases are not renewed: a live
            # process's delivery that a loaded machine slowed past a shorter one (2 s before)
            # would be taken over by the other process and sent twice as well.
            "RNX_OUTBOX_LEASE_S": "10",
            "RNX_OUTBOX_POLL_MS": "50",
            "RNX_PUBLIC_URL": "https://gate.example.com",
            "SSL_CERT_FILE": str(smtp.ca_file),  # trust the SMTP server's own certificate
        }
        first = server_factory(database_url, env)
        assert _upload(first, token.secret, seed=1) != "BLOCK"  # the baseline
        for i in range(EVENTS):
            assert _upload(first, token.secret, seed=10 + i, slowdown=1.5) == "BLOCK"
            # Fixed again: the next BLOCK is a regression of its own, alerted (not grouped).
            assert _upload(first, token.secret, seed=20 + i) == "PASS"
        assert slack.held.wait(60), "the server never sent the held Slack message"
        first.process.kill()  # SIGKILL while it waits for Slack's answer
        first.process.wait(10)
        slack.release.set()

        # Two processes take over the same outbox: leases keep them off each other's jobs.
        server_factory(database_url, env)
        server_factory(database_url, env)
        expected = EVENTS * 3
        counts = _wait_delivered(database_url, expected)
    finally:
        slack.release.set()
        for r in (slack, hook):
            r.stop()
        smtp.stop()
    assert counts == {"deliveries": expected, "delivered": expected}, counts
    received = {
        "slack": Counter(slack.delivery_ids()),
        "hook": Counter(hook.delivery_ids()),
        "mail": Counter(smtp.delivery_ids()),
    }
    for name, ids in received.items():
        assert len(ids) == EVENTS, (name, ids)  # every event arrived: nothing lost
    duplicates = {name: sum(n - 1 for n in ids.values()) for name, ids in received.items()}
    # The held message was sent again after the restart, under the same delivery id. Sends run
    # in lanes side by side, one per channel at a time, so each other channel may have had one
    # send in flight when the process was killed: sent again (at least once, never lost), at
    # most once more. Nothing is sent twice by the two processes that took over.
    assert duplicates["slack"] == 1, duplicates
    assert duplicates["hook"] <= 1 and duplicates["mail"] <= 1, duplicates
