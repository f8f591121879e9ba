"""Bisection in App mode, SQLite and PostgreSQL, against the GitHub fake: a change point whose
range holds 16 commits is bisected by dispatching the workflow `rnx init` writes; each run the
"workflow" uploads with the bisection's header is gated against both ends and never becomes a
baseline; the culprit is named with its pull request and author; a redelivered job or a
process that died mid-dispatch never dispatches a commit twice."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml
from starlette.testclient import TestClient

from action.init import WORKFLOW
from gate_server.db import alerts, bisections, open_database, outbox
from gate_server.domain.alerts.delivery import delivery_id
from gate_server.domain.alerts.message import compose
from gate_server.domain.bisection import jobs as bisection
from gate_server.http.webhook import WEBHOOK_PATH
from rnx_cli.acting import bisection_text
from testbed.factories import body, make_results
from testbed.fakes import fake_github
from testbed.fakes.github_commits import add_commits, commits, merged_by_pull
from testbed.fakes.github_endpoints import add_kernalin_workflow, app_key, serve_with_app
from testbed.gate_helpers import (
    Token,
    app_mode_settings,
    app_without_worker,
    create_token,
    outbox_jobs,
    run_due_jobs,
    signed_headers,
    webhook_headers,
)

REPO = "acme/kernels"
CONFIGS = (("pytorch_eager", "float32", 1), ("pytorch_eager", "float32", 8))
STEPPED = "pytorch_eager/float32/bs8"
CULPRIT = 6  # of the 16 commits between the last run before the step and the first after


def sha(i: int) -> str:
    return f"{i:040x}"


RANGE = [sha(100 + i) for i in range(16)]
WEBHOOK_SECRET = "It's a Secret to Everybody"
WEBHOOKS = Path(__file__).resolve().parents[1] / "data" / "github-webhooks"


@pytest.fixture
def github() -> Iterator[tuple[str, fake_github.State]]:
    with serve_with_app({REPO: 77}) as (url, state):
        add_commits(state, REPO, [sha(i) for i in range(30)] + RANGE + [sha(116), sha(117)])
        add_kernalin_workflow(state, REPO, "acme/rnx@v1")
        merged_by_pull(state, REPO, RANGE[CULPRIT], 42)
        yield url, state


@contextmanager
def app_mode(
    database_url: str, github: tuple[str, fake_github.State], **settings: Any
) -> Iterator[TestClient]:
    """App mode in-process; the worker's loop is stopped so the test runs the jobs."""
    url, state = github
    server = app_mode_settings(
        database_url,
        app_key(),
        url,
        public_url="http://gate.test",
        outbox_poll_ms=60_000,
        github_webhook_secret=WEBHOOK_SECRET,
        **settings,
    )
    with app_without_worker(server) as c:
        yield c


@pytest.fixture
def app(database_url: str, github: tuple[str, fake_github.State]) -> Iterator[TestClient]:
    with app_mode(database_url, github) as c:
        yield c


def upload(
    client: TestClient, token: Token, at: str, factor: float, seed: int, **headers: str
) -> dict[str, Any]:
    doc = make_results(
        configs=CONFIGS,
        slowdown={STEPPED: factor},
        seed=seed,
        sha=at,
        event=headers.pop("event", "push"),
    )
    data = body(doc)
    r = client.post(
        "/api/v1/runs", content=data, headers={**signed_headers(token.secret, data), **headers}
    )
    assert r.status_code == 201, r.text
    answer: dict[str, Any] = r.json()
    return answer


def stepped_history(app: TestClient, token: Token) -> None:
    """30 baseline runs, then the step: 3 runs after 16 unmeasured commits."""
    for i in range(30):
        upload(app, token, sha(i), 1.0, seed=i)
    for n, at in enumerate([RANGE[-1], sha(116), sha(117)]):
        upload(app, token, at, 1.10, seed=30 + n)
    run_due_jobs(app)


@pytest.fixture
def bisecting(
    app: TestClient, database_url: str, github: tuple[str, fake_github.State]
) -> tuple[fake_github.State, Token]:
    """A step in main's history, its change point found and the first commit of its
    bisection dispatched: the fake GitHub's state and the CI token."""
    token = create_token(database_url)
    stepped_history(app, token)
    return github[1], token


def run_dispatches(
    app: TestClient,
    state: fake_github.State,
    token: Token,
    *,
    commits_in_range: list[str] = RANGE,
    culprit: int = CULPRIT,
    done: int = 0,
) -> int:
    """Play the workflow for each new dispatch (from the `done`-th) until none comes: check
    out the input commit, measure it, upload with the bisection header. Returns how many
    dispatches there were in all."""
    while done < len(commits(state).dispatches):
        inputs = commits(state).dispatches[done]["inputs"]
        at = inputs["commit"]
        factor = 1.10 if commits_in_range.index(at) >= culprit else 1.0
        answer = upload(
            app,
            token,
            at,
            factor,
            seed=1000 + done,
            event="workflow_dispatch",
            **{"X-Kernalin-Bisection": inputs["bisection"]},
        )
        assert answer["is_baseline"] is False
        done += 1
        run_due_jobs(app)
    return done


def webhook_channel(database_url: str) -> int:
    """A webhook channel of the workspace whose rule takes change points."""
    database = open_database(database_url)
    try:
        with database.write() as conn:
            workspace = alerts.workspace_id(conn, "acme")
            assert workspace is not None
            channel = alerts.add_channel(
                conn,
                workspace_id=workspace,
                name="hook",
                kind="webhook",
                config={"url": "http://127.0.0.1:9/hook"},
                secret={},
                shown="http://127.0.0.1:9/hook",
                sealer=database.sealer,
            )
            assert channel is not None
            alerts.add_rule(
                conn,
                workspace_id=workspace,
                repository_id=None,
                channel_id=channel,
                events=["change_point"],
            )
    finally:
        database.close()
    return channel


def read(database_url: str) -> tuple[Any, list[Any]]:
    database = open_database(database_url)
    try:
        with database.read() as conn:
            [b] = [bisections.get(conn, 1)]
            return b, bisections.steps(conn, 1)
    finally:
        database.close()


def test_a_step_in_16_commits_is_pinned_to_its_commit(
    app: TestClient, database_url: str, github: tuple[str, fake_github.State]
) -> None:
    _, state = github
    token = create_token(database_url)
    channel = webhook_channel(database_url)
    stepped_history(app, token)
    [first] = commits(state).dispatches
    assert first["workflow"] == "kernalin.yml" and first["ref"] == "main"
    assert first["inputs"]["commit"] in RANGE[6:9] and first["inputs"]["bisection"] == "1"
    ran = run_dispatches(app, state, token)
    b, steps = read(database_url)
    assert b.state == bisections.FOUND, (b, steps)
    assert (b.culprit_sha, b.culprit_pr, b.culprit_author) == (RANGE[CULPRIT], 42, "octocat")
    assert ran == len(steps) <= 5
    shas = [(s.sha, s.attempt) for s in steps]
    assert len(set(shas)) == len(shas)  # no commit dispatched twice for one attempt
    for s in steps:
        assert s.state == bisections.MEASURED and s.side in ("before", "after")
        assert s.side == ("after" if RANGE.index(s.sha) >= CULPRIT else "before")
        assert s.evidence["low_before"] <= s.evidence["ratio_before"] <= s.evidence["high_before"]
    # One alert of the culprit, to the channel that took the change point's, however often
    # its job runs.
    database = open_database(database_url)
    try:
        with database.write() as conn:
            outbox.enqueue(conn, bisection.CULPRIT_KIND, {"bisection_id": 1})
        run_due_jobs(app)
        with database.read() as conn:
            sent = alerts.delivery(conn, delivery_id("culprit:1", channel))
            first = alerts.delivery(conn, delivery_id("change_point:1", channel))
            culprit_jobs = outbox.jobs(conn, kind="event.culprit")
    finally:
        database.close()
    assert first is not None and sent is not None and len(culprit_jobs) == 2
    assert sent.payload["sha"] == RANGE[CULPRIT] and sent.payload["pr_number"] == 42
    assert "Culprit found on acme/kernels main" in compose(sent.payload, None).title
    # What people see: the API answer, and `rnx change-points show` printing it.
    auth = {"Authorization": f"Bearer {token.secret}"}
    shown = app.get("/api/v1/change-points/1/bisection", headers=auth).json()
    assert shown["state"] == "found" and shown["culprit"]["pull_request"] == 42
    assert shown["culprit"]["url"].endswith(f"/commit/{RANGE[CULPRIT]}")
    assert [s["sha"] for s in shown["steps"]] == [s.sha for s in steps]
    text = bisection_text(shown)
    assert f"culprit {RANGE[CULPRIT][:12]} by octocat, pull request #42" in text
    assert text.count("vs before") == text.count("vs after") == len(steps)
    # The dashboard: the steps on the change point's chart, the culprit in its title.
    viewer = create_token(database_url, viewer=True)
    page = app.get(f"/repos/{REPO}", headers={"Authorization": f"Bearer {viewer.secret}"})
    assert page.status_code == 200, page.text[:500]
    assert page.text.count('class="bisect-step side-') == len(steps)
    assert f"culprit {RANGE[CULPRIT][:10]} by octocat (#42)" in page.text
    # The bisection's runs are not in the baseline history: no new change point, none later.
    r = app.get(
        "/api/v1/change-points",
        params={"repository": REPO},
        headers={"Authorization": f"Bearer {token.secret}"},
    )
    assert len(r.json()["change_points"]) == 1


def test_a_redelivered_job_or_a_dispatcher_killed_mid_dispatch_dispatches_nothing_twice(
    app: TestClient, database_url: str, bisecting: tuple[fake_github.State, Token]
) -> None:
    state, token = bisecting
    assert len(commits(state).dispatches) == 1
    database = open_database(database_url)
    try:
        # The same jobs again, as a redelivered webhook or a second process would queue them.
        with database.write() as conn:
            outbox.enqueue(conn, bisection.START_KIND, {"change_point_id": 1})
            outbox.enqueue(conn, bisection.ADVANCE_KIND, {"bisection_id": 1})
            outbox.enqueue(conn, bisection.ADVANCE_KIND, {"bisection_id": 1})
        run_due_jobs(app)
        assert len(commits(state).dispatches) == 1
        # A process killed between writing its step and GitHub's answer: the step is left
        # "dispatching". It is waited for, never dispatched again.
        with database.write() as conn:
            [step] = bisections.steps(conn, 1)
            bisections.record_measurement(conn, step.id, None, "before", {})
            stuck = bisections.add_step(conn, 1, 12, 1, RANGE[12])
            outbox.enqueue(conn, bisection.ADVANCE_KIND, {"bisection_id": 1})
        run_due_jobs(app)
        assert len(commits(state).dispatches) == 1
        with database.read() as conn:
            assert [s.state for s in bisections.steps(conn, 1)][-1] == bisections.DISPATCHING
            assert bisections.get(conn, 1).state == bisections.RUNNING  # type: ignore[union-attr]
        del stuck
    finally:
        database.close()


def test_a_cancelled_bisection_dispatches_nothing_more(
    app: TestClient, database_url: str, bisecting: tuple[fake_github.State, Token]
) -> None:
    state, token = bisecting
    viewer = create_token(database_url, viewer=True)
    auth = {"Authorization": f"Bearer {token.secret}"}
    refused = app.post(
        "/api/v1/change-points/1/bisection/cancel",
        headers={"Authorization": f"Bearer {viewer.secret}"},
    )
    assert refused.status_code in (403, 404), refused.text
    r = app.post("/api/v1/change-points/1/bisection/cancel", headers=auth)
    assert r.status_code == 200, r.text
    assert r.json()["state"] == "cancelled" and "cancelled by" in r.json()["reason"]
    again = app.post("/api/v1/change-points/1/bisection/cancel", headers=auth)
    assert again.status_code == 409 and again.json()["error"]["code"] == "not_running"
    # The run in flight still comes back: it is stored, measured for nobody, and nothing more
    # is dispatched.
    assert run_dispatches(app, state, token) == 1
    b, steps = read(database_url)
    assert b.state == bisections.CANCELLED and [s.state for s in steps] == ["dispatched"]
    assert app.get("/api/v1/change-points/99/bisection", headers=auth).status_code == 404


def test_a_bisection_header_that_is_no_id_is_refused_with_the_fix(
    app: TestClient, database_url: str
) -> None:
    token = create_token(database_url)
    doc = make_results(configs=CONFIGS, sha=sha(1), event="workflow_dispatch")
    data = body(doc)
    headers = {**signed_headers(token.secret, data), "X-Kernalin-Bisection": "1; drop"}
    r = app.post("/api/v1/runs", content=data, headers=headers)
    assert r.status_code == 422, r.text
    assert "X-Kernalin-Bisection".lower() in r.text.lower() and "no header" in r.text
    # A bisection nobody runs: the run is stored, never a baseline, and measures nothing.
    answer = upload(
        app, token, sha(1), 1.0, seed=1, event="workflow_dispatch", **{"X-Kernalin-Bisection": "9"}
    )
    assert answer["is_baseline"] is False
    run_due_jobs(app)
    measured = outbox_jobs(database_url, bisection.MEASURED_KIND)
    assert [j.state for j in measured] == [outbox.DONE]


def workflow_run_completed(run_name: str, conclusion: str) -> dict[str, Any]:
    """GitHub's workflow_run "completed" webhook (the recorded payload) of a dispatched run of
    kernalin.yml in REPO named `run_name` that ended `conclusion`."""
    payload: dict[str, Any] = json.loads(
        (WEBHOOKS / "workflow_run.completed.payload.json").read_text()
    )
    run = payload["workflow_run"]
    run.update(
        display_title=run_name,
        conclusion=conclusion,
        event="workflow_dispatch",
        head_branch="main",
        path=".github/workflows/kernalin.yml",
    )
    payload["repository"].update(full_name=REPO, name=REPO.split("/")[1])
    return payload


def deliver(app: TestClient, payload: dict[str, Any], delivery: str) -> dict[str, Any]:
    raw = json.dumps(payload).encode()
    r = app.post(
        WEBHOOK_PATH,
        content=raw,
        headers=webhook_headers(WEBHOOK_SECRET, raw, "workflow_run", delivery),
    )
    assert r.status_code == 200, r.text
    answer: dict[str, Any] = r.json()
    return answer


def test_a_dispatched_run_that_failed_is_skipped_at_once_from_its_workflow_run_webhook(
    app: TestClient, database_url: str, bisecting: tuple[fake_github.State, Token]
) -> None:
    state, token = bisecting
    [first] = commits(state).dispatches
    at = first["inputs"]["commit"]
    # The name the workflow `rnx init` writes gives a dispatched run (its run-name, rendered
    # as GitHub renders ${{ inputs.* }}): what the webhook's display_title carries.
    written = yaml.safe_load(
        WORKFLOW.format(branch="main", schedule="", action_note="", action_ref="a/b@v1")
    )
    assert written["run-name"] == (
        "${{ inputs.bisection && format('kernalin bisection {0} at {1}', inputs.bisection, "
        "inputs.commit) || '' }}"
    )
    name = f"kernalin bisection {first['inputs']['bisection']} at {at}"
    # A run that succeeded uploads its results itself: its webhook changes nothing.
    assert "ignored" in deliver(app, workflow_run_completed(name, "success"), "d-0")
    failed = workflow_run_completed(name, "failure")
    assert deliver(app, failed, "d-1")["skipped"] is True
    run_due_jobs(app)
    # Skipped at once (not after 6 hours): the next commit nearest the middle is dispatched.
    assert len(commits(state).dispatches) == 2
    second = commits(state).dispatches[1]["inputs"]["commit"]
    assert second != at and abs(RANGE.index(second) - RANGE.index(at)) == 1
    # Redelivered (the same delivery, or GitHub's redelivery under a new id): nothing more.
    assert deliver(app, failed, "d-1")["skipped"] is True  # the first answer, stored
    assert "ignored" in deliver(app, failed, "d-2")
    # Another repository's run of the same name skips nothing here.
    other = workflow_run_completed(name, "failure")
    other["repository"]["full_name"] = "acme/other"
    assert "ignored" in deliver(app, other, "d-3")
    run_due_jobs(app)
    assert len(commits(state).dispatches) == 2
    run_dispatches(app, state, token, done=1)
    b, steps = read(database_url)
    assert b.state == bisections.FOUND and b.culprit_sha == RANGE[CULPRIT], (b, steps)
    assert steps[0].sha == at and steps[0].side == "skipped"
    assert "ended failure" in steps[0].evidence["reason"]
    shas = [s.sha for s in steps]
    assert len(shas) == len(set(shas)) == len(commits(state).dispatches)


def test_a_redelivered_upload_of_a_bisection_run_measures_and_dispatches_once(
    app: TestClient, database_url: str, bisecting: tuple[fake_github.State, Token]
) -> None:
    state, token = bisecting
    [first] = commits(state).dispatches
    at, bisection_id = first["inputs"]["commit"], first["inputs"]["bisection"]
    doc = make_results(
        configs=CONFIGS,
        slowdown={STEPPED: 1.10 if RANGE.index(at) >= CULPRIT else 1.0},
        seed=500,
        sha=at,
        event="workflow_dispatch",
        run_id=uuid.uuid4(),
    )
    data = body(doc)
    for _ in range(3):  # the action sends it again when an answer is lost
        headers = {**signed_headers(token.secret, data), "X-Kernalin-Bisection": bisection_id}
        r = app.post("/api/v1/runs", content=data, headers=headers)
        assert r.status_code in (200, 201), r.text
        run_due_jobs(app)
    assert len(commits(state).dispatches) == 2
    _, steps = read(database_url)
    assert [s.state for s in steps] == [bisections.MEASURED, bisections.DISPATCHED]


def test_a_range_longer_than_github_lists_unpaged_is_bisected_whole(
    database_url: str, github: tuple[str, fake_github.State]
) -> None:
    """GitHub's compare lists only the newest 250 commits unless asked page by page: a
    culprit among the oldest of 316 commits must still be found."""
    _, state = github
    more = [sha(2000 + i) for i in range(300)]
    add_commits(state, REPO, more)
    long_range = [*RANGE, sha(116), sha(117), *more[:-2]]
    culprit = 40  # among the 66 oldest: outside the newest 250
    with app_mode(database_url, github, bisect_budget=12) as app:
        token = create_token(database_url)
        for i in range(30):
            upload(app, token, sha(i), 1.0, seed=i)
        for n, at in enumerate(more[-3:]):
            upload(app, token, at, 1.10, seed=30 + n)
        run_due_jobs(app)
        ran = run_dispatches(app, state, token, commits_in_range=long_range, culprit=culprit)
    b, steps = read(database_url)
    assert len(b.commits) == len(long_range) == 316
    assert [c["sha"] for c in b.commits] == long_range
    assert b.state == bisections.FOUND and b.culprit_sha == long_range[culprit], (b, steps)
    assert ran == len(steps) <= 12
