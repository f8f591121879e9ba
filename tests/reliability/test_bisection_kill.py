"""kill -9 of a real App-mode server while GitHub has taken its workflow dispatch but not yet
answered, or just after a step's run was uploaded, and the events that advance a bisection
delivered again (a failed run's workflow_run webhook, an upload), on SQLite and PostgreSQL:
the bisection goes on from what is stored, and no commit is dispatched twice (the step row
written before the dispatch is waited for, never sent again)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from datetime import timezone
from pathlib import Path
from typing import Any

import httpx
import pytest

from gate_server.clock import utcnow
from gate_server.db import bisections, open_database, outbox
from gate_server.http.webhook import WEBHOOK_PATH
from testbed.act_harness import REPO_ROOT
from testbed.factories import body, make_results
from testbed.fakes import fake_github
from testbed.fakes.github_commits import add_commits, commits, merged_by_pull
from testbed.fakes.github_endpoints import add_kernalin_workflow, app_key, serve_with_app
from testbed.gate_helpers import (
    LiveServer,
    Token,
    app_mode_env,
    create_token,
    signed_headers,
    start_server,
    webhook_headers,
)

pytestmark = [pytest.mark.timeout(300)]

REPO = "acme/kernels"
CONFIGS = (("pytorch_eager", "float32", 1), ("pytorch_eager", "float32", 8))
STEPPED = "pytorch_eager/float32/bs8"
CULPRIT = 10
RANGE = [f"{100 + i:040x}" for i in range(16)]
WEBHOOKS = Path(__file__).resolve().parents[1] / "data" / "github-webhooks"


def _upload(server: LiveServer, token: Token, at: str, factor: float, seed: int, **h: str) -> None:
    event = "workflow_dispatch" if h else "push"
    doc = make_results(configs=CONFIGS, slowdown={STEPPED: factor}, seed=seed, sha=at, event=event)
    data = body(doc)
    r = httpx.post(
        f"{server.url}/api/v1/runs",
        content=data,
        headers={**signed_headers(token.secret, data), **h},
        timeout=60,
    )
    assert r.status_code == 201, r.text


def _stored_bisection(database_url: str) -> tuple[Any, list[Any]]:
    """The test's one bisection and its steps, as stored."""
    database = open_database(database_url)
    try:
        with database.read() as conn:
            return bisections.get(conn, 1), bisections.steps(conn, 1)
    finally:
        database.close()


def _wait(what: Callable[[], bool], timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while not what():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


@pytest.fixture
def github() -> Iterator[tuple[str, fake_github.State]]:
    """The GitHub fake with the App on REPO, 30 commits then RANGE on main, the workflow `rnx
    init` writes, and the culprit merged by pull request 7."""
    with serve_with_app({REPO: 77}) as (url, state):
        add_commits(state, REPO, [f"{i:040x}" for i in range(30)] + RANGE)
        add_kernalin_workflow(state, REPO)
        merged_by_pull(state, REPO, RANGE[CULPRIT], 7)
        yield url, state


def _env(github_url: str, **more: str) -> dict[str, str]:
    """The killed and restarted server's environment: App mode, its outbox quick to look again
    and to take over a killed process's job."""
    return {
        "PYTHONPATH": str(REPO_ROOT),  # this checkout's server
        "RNX_OUTBOX_POLL_MS": "20",
        "RNX_OUTBOX_LEASE_S": "2",
        **app_mode_env(app_key(), github_url),
        **more,
    }


def test_kill_9_mid_dispatch_neither_loses_the_bisection_nor_dispatches_twice(
    database_url: str, tmp_path: Path, github: tuple[str, fake_github.State]
) -> None:
    url, state = github
    token = create_token(database_url)
    env = _env(url)
    sent = commits(state).dispatches
    server = start_server(database_url, tmp_path, env=env)
    try:
        for i in range(30):
            _upload(server, token, f"{i:040x}", 1.0, seed=i)
        commits(state).hold.set()  # GitHub takes the first dispatch and never answers
        for n in range(3):
            _upload(server, token, RANGE[-1], 1.10, seed=30 + n)
        _wait(lambda: len(sent) == 1)
        server.process.kill()  # SIGKILL mid-dispatch: the step is left "dispatching"
        server.process.wait(timeout=10)
        commits(state).hold.clear()
        server = start_server(database_url, tmp_path, env=env)
        # The job the killed process held is due again once its lease has passed: the
        # restarted server runs it to its end, and dispatches nothing for it.
        _wait(lambda: _settled(database_url))
        assert len(sent) == 1
        # The workflow of each dispatch uploads its run; the bisection goes on to the end.
        done = 0
        while True:
            _wait(lambda n=done: len(sent) > n or _ended(database_url))
            if len(sent) == done:
                break
            at = sent[done]["inputs"]["commit"]
            factor = 1.10 if RANGE.index(at) >= CULPRIT else 1.0
            header = {"X-Kernalin-Bisection": sent[done]["inputs"]["bisection"]}
            _upload(server, token, at, factor, seed=100 + done, **header)
            done += 1
            _wait(lambda n=done: len(sent) > n or _ended(database_url))
    finally:
        server.stop()
    b, steps = _stored_bisection(database_url)
    assert b is not None and b.state == bisections.FOUND, (b, steps)
    assert (b.culprit_sha, b.culprit_pr) == (RANGE[CULPRIT], 7)
    dispatched = [(d["inputs"]["commit"], d["inputs"]["bisection"]) for d in sent]
    assert len(dispatched) == len(steps) == len({(s.sha, s.attempt) for s in steps}) <= 5


def _settled(database_url: str) -> bool:
    """No outbox job is due: each one due by now (a killed process's, once its lease has
    passed) has run to its end; what is left waits for later (a step's timeout, hours away)."""
    database = open_database(database_url)
    try:
        with database.read() as conn:
            pending = outbox.jobs(conn, state=outbox.PENDING)
    finally:
        database.close()
    now = utcnow()
    due = [j.available_at for j in pending]
    return all((d if d.tzinfo else d.replace(tzinfo=timezone.utc)) > now for d in due)


def _ended(database_url: str) -> bool:
    database = open_database(database_url)
    try:
        with database.read() as conn:
            b = bisections.get(conn, 1)
    finally:
        database.close()
    return b is not None and b.state != bisections.RUNNING


WEBHOOK_SECRET = "It's a Secret to Everybody"


def _failed_run_webhook(server: LiveServer, bisection: str, sha: str, delivery: str) -> Any:
    """GitHub's workflow_run completed webhook (the recorded payload) of a dispatched run that
    failed, named as the workflow `rnx init` writes names it."""
    payload = json.loads((WEBHOOKS / "workflow_run.completed.payload.json").read_text())
    payload["workflow_run"].update(
        display_title=f"kernalin bisection {bisection} at {sha}",
        conclusion="failure",
        event="workflow_dispatch",
    )
    payload["repository"]["full_name"] = REPO
    raw = json.dumps(payload).encode()
    r = httpx.post(
        server.url + WEBHOOK_PATH,
        content=raw,
        headers=webhook_headers(WEBHOOK_SECRET, raw, "workflow_run", delivery),
        timeout=60,
    )
    assert r.status_code == 200, r.text
    return r.json()


def test_redelivered_webhooks_and_uploads_and_a_kill_9_between_steps_dispatch_nothing_twice(
    database_url: str, tmp_path: Path, github: tuple[str, fake_github.State]
) -> None:
    """The events that advance a bisection, each delivered again (GitHub redelivers a webhook;
    the action sends an upload again when its answer is lost), and the server killed with
    SIGKILL just after an upload was stored: the bisection ends with its culprit and every
    (commit, attempt) dispatched once."""
    url, state = github
    token = create_token(database_url)
    env = _env(url, RNX_GITHUB_WEBHOOK_SECRET=WEBHOOK_SECRET)
    sent = commits(state).dispatches
    server = start_server(database_url, tmp_path, env=env)
    try:
        for i in range(30):
            _upload(server, token, f"{i:040x}", 1.0, seed=i)
        for n in range(3):
            _upload(server, token, RANGE[-1], 1.10, seed=30 + n)
        _wait(lambda: len(sent) == 1)
        # The first dispatched run fails to build: GitHub's webhook says so, three times
        # (the delivery, its redelivery under the same id, and again under a new id).
        first = sent[0]["inputs"]
        answers = [
            _failed_run_webhook(server, first["bisection"], first["commit"], d)
            for d in ("d-1", "d-1", "d-2")
        ]
        assert [a.get("skipped") for a in answers] == [True, True, None], answers
        _wait(lambda: len(sent) == 2)
        done, killed = 1, False
        while True:
            at, bisection = sent[done]["inputs"]["commit"], sent[done]["inputs"]["bisection"]
            factor = 1.10 if RANGE.index(at) >= CULPRIT else 1.0
            doc = make_results(
                configs=CONFIGS,
                slowdown={STEPPED: factor},
                seed=100 + done,
                sha=at,
                event="workflow_dispatch",
            )
            data = body(doc)
            headers = {"X-Kernalin-Bisection": bisection}
            for _ in range(2):  # the upload, and the action's retry of it
                r = httpx.post(
                    f"{server.url}/api/v1/runs",
                    content=data,
                    headers={**signed_headers(token.secret, data), **headers},
                    timeout=60,
                )
                assert r.status_code in (200, 201), r.text
            if not killed:
                # SIGKILL with the upload stored and the next dispatch at GitHub (or the
                # bisection over), its step maybe still "dispatching". A kill after a step is
                # claimed but before GitHub has its dispatch leaves a step that is waited for
                # STEP_TIMEOUT (6 hours) by design (gate_server/domain/bisection/jobs.py),
                # which this test cannot wait out: it failed so once in a full run.
                _wait(lambda n=done: len(sent) > n or _ended(database_url))
                server.process.kill()
                server.process.wait(timeout=10)
                server = start_server(database_url, tmp_path, env=env)
                killed = True
            done += 1
            _wait(lambda n=done: len(sent) > n or _ended(database_url))
            if len(sent) == done:
                break
        _wait(lambda: _settled(database_url))  # any job run again has had its chance
    finally:
        server.stop()
    b, steps = _stored_bisection(database_url)
    assert b is not None and b.state == bisections.FOUND, (b, steps)
    assert (b.culprit_sha, b.culprit_pr) == (RANGE[CULPRIT], 7)
    assert steps[0].side == "skipped" and "ended failure" in steps[0].evidence["reason"]
    dispatched = [(d["inputs"]["commit"], d["inputs"]["bisection"]) for d in sent]
    assert len(dispatched) == len(set(dispatched)) == len(steps)
    assert len({(s.sha, s.attempt) for s in steps}) == len(steps) <= 6
