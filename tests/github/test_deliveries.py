"""X-GitHub-Delivery bookkeeping on both databases: once, the same answer, and no lost delivery."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import update

from gate_server.github import store, webhook
from gate_server.github.integration import GitHubIntegration
from gate_server.github.settings import GitHubSettings
from gate_server.storage import Storage
from tests.github.payloads import load_payload

GH = GitHubIntegration(GitHubSettings(webhook_secret="s", oidc_audience=None))


def test_a_claim_without_an_answer_is_in_progress_until_it_is_stale(storage: Storage) -> None:
    with storage.write() as conn:
        assert store.claim_delivery(conn, "d-1", "ping", None)
        assert not store.claim_delivery(conn, "d-1", "ping", None)
    ping = webhook.Delivery("d-1", "ping", load_payload("ping"))
    assert webhook.handle(storage, GH, ping) == (
        202,
        {"delivery": "d-1", "status": "already being handled"},
    )
    with storage.write() as conn:  # the claiming process died ten minutes ago
        conn.execute(
            update(store.github_deliveries).values(
                received_at=store._now() - webhook.STALE_CLAIM - timedelta(seconds=1)
            )
        )
    status, answer = webhook.handle(storage, GH, ping)
    assert status == 200 and answer["pong"] is True
    assert webhook.handle(storage, GH, ping) == (status, answer)


def test_a_failed_delivery_is_forgotten_so_a_redelivery_is_acted_on(
    storage: Storage, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[str] = []

    def flaky(s: Storage, gh: GitHubIntegration, d: webhook.Delivery) -> Any:
        calls.append(d.id)
        if len(calls) == 1:
            raise RuntimeError("the database went away mid-way")
        return 200, {"done": True}

    monkeypatch.setitem(webhook.HANDLERS, ("flaky", None), flaky)
    delivery = webhook.Delivery("d-2", "flaky", {})
    with pytest.raises(RuntimeError):
        webhook.handle(storage, GH, delivery)
    assert webhook.handle(storage, GH, delivery) == (
        200,
        {"delivery": "d-2", "event": "flaky", "done": True},
    )
    assert webhook.handle(storage, GH, delivery)[1]["done"] is True
    assert calls == ["d-2", "d-2"]


def test_old_deliveries_are_pruned(storage: Storage) -> None:
    with storage.write() as conn:
        store.claim_delivery(conn, "old", "ping", None)
        conn.execute(
            update(store.github_deliveries).values(
                received_at=store._now() - store.KEEP_DELIVERIES - timedelta(hours=1)
            )
        )
        store.claim_delivery(conn, "new", "ping", None)
        assert store.delivery_answer(conn, "old") is None
        assert store.claim_delivery(conn, "old", "ping", None)  # forgotten, so new again
