"""X-GitHub-Delivery bookkeeping on both databases: once, the same answer, and no lost delivery."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import update

from gate_server.clock import utcnow
from gate_server.db import Database, deliveries
from gate_server.db.schema import github_deliveries
from gate_server.github.integration import GitHubIntegration
from gate_server.http import webhook
from gate_server.http.answers import Answer
from tests.github.payloads import load_payload

GH = GitHubIntegration(webhook_secret="s")


def test_a_claim_without_an_answer_is_in_progress_until_it_is_stale(storage: Database) -> None:
    with storage.write() as conn:
        assert deliveries.claim(conn, "d-1", "ping", None)
        assert not deliveries.claim(conn, "d-1", "ping", None)
    ping = webhook.Delivery("d-1", "ping", load_payload("ping"))
    assert webhook.handle(storage, GH, ping) == Answer(
        202, {"delivery": "d-1", "status": "already being handled"}
    )
    with storage.write() as conn:  # the claiming process died ten minutes ago
        conn.execute(
            update(github_deliveries).values(
                received_at=utcnow() - webhook.STALE_CLAIM - timedelta(seconds=1)
            )
        )
    answer = webhook.handle(storage, GH, ping)
    assert answer.status == 200 and answer.body["pong"] is True
    assert webhook.handle(storage, GH, ping) == answer


def test_a_failed_delivery_is_forgotten_so_a_redelivery_is_acted_on(
    storage: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[str] = []

    def flaky(s: Database, gh: GitHubIntegration, d: webhook.Delivery) -> Any:
        calls.append(d.id)
        if len(calls) == 1:
            raise RuntimeError("the database went away mid-way")
        return Answer(200, {"done": True})

    monkeypatch.setitem(webhook.HANDLERS, ("flaky", None), flaky)
    delivery = webhook.Delivery("d-2", "flaky", {})
    with pytest.raises(RuntimeError):
        webhook.handle(storage, GH, delivery)
    assert webhook.handle(storage, GH, delivery) == Answer(
        200, {"delivery": "d-2", "event": "flaky", "done": True}
    )
    assert webhook.handle(storage, GH, delivery).body["done"] is True
    assert calls == ["d-2", "d-2"]


def test_old_deliveries_are_pruned(storage: Database) -> None:
    with storage.write() as conn:
        deliveries.claim(conn, "old", "ping", None)
        conn.execute(
            update(github_deliveries).values(
                received_at=utcnow() - deliveries.KEEP_DELIVERIES - timedelta(hours=1)
            )
        )
        deliveries.claim(conn, "new", "ping", None)
        assert deliveries.answer_of(conn, "old") is None
        assert deliveries.claim(conn, "old", "ping", None)  # forgotten, so new again
