"""The alert tests' fixture (tests/gate_server/domain/alerting.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from gate_server.db import Database
from gate_server.settings import ServerSettings
from testbed.gate_helpers import app_without_worker, create_token
from testbed.receivers import HttpReceiver
from tests.gate_server.domain.alerting import PUBLIC, Alerting


@pytest.fixture
def alerting(database_url: str, storage: Database) -> Iterator[Alerting]:
    # The app's own worker waits a minute between looks, and is stopped: the tests run the
    # jobs themselves (a test that a loaded machine stretched past the minute would race it).
    settings = ServerSettings(database_url=database_url, public_url=PUBLIC, outbox_poll_ms=60_000)
    receivers = {"slack": HttpReceiver().start(), "hook": HttpReceiver().start()}
    try:
        with app_without_worker(settings) as app:
            token = create_token(database_url, branches=("main",))
            yield Alerting(app, token, storage, settings, receivers)
    finally:
        for r in receivers.values():
            r.stop()
