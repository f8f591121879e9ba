"""Change points on SQLite and PostgreSQL: every baseline run queues a look at its history in the
same transaction; a step is stored once, with its runs and ratio; a step back resolves it; the
API lists and acknowledges them."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any

import pytest
from starlette.testclient import TestClient

import stats
from gate_server.db import audit, open_database, outbox
from gate_server.domain.change_points import DETECT_KIND, EVENT_KIND, handle_detect, run_locations
from gate_server.jobs.worker import OutboxWorker
from gate_server.services import Services
from gate_server.settings import ServerSettings
from testbed.factories import body, make_results
from testbed.gate_helpers import (
    Token,
    app_without_worker,
    create_token,
    insert_change_point,
    outbox_jobs,
    run_due_jobs,
    signed_headers,
)

CONFIGS = (("pytorch_eager", "float32", 1), ("pytorch_eager", "float32", 8))
STEPPED = "pytorch_eager/float32/bs8"


@pytest.fixture
def app(database_url: str) -> Iterator[TestClient]:
    """The app in-process; the test runs its jobs (run_due_jobs)."""
    settings = ServerSettings(
        database_url=database_url, public_url="http://gate.test", outbox_poll_ms=60_000
    )
    with app_without_worker(settings) as c:
        yield c


class History:
    def __init__(self, client: TestClient, token: Token) -> None:
        self.client, self.token, self.runs = client, token, []  # type: list[dict[str, Any]]

    def push(self, factor: float, **kwargs: Any) -> dict[str, Any]:
        n = len(self.runs)
        doc = make_results(
            configs=CONFIGS,
            slowdown={STEPPED: factor},
            seed=n,
            sha=f"{n:040x}",
            **kwargs,
        )
        data = body(doc)
        r = self.client.post(
            "/api/v1/runs", content=data, headers=signed_headers(self.token.secret, data)
        )
        assert r.status_code == 201, r.text
        self.runs.append(r.json())
        return r.json()

    def change_points(self, token: Token | None = None, **params: str) -> list[dict[str, Any]]:
        r = self.client.get(
            "/api/v1/change-points",
            params={"repository": "acme/kernels", **params},
            headers={"Authorization": f"Bearer {(token or self.token).secret}"},
        )
        assert r.status_code == 200, r.text
        found: list[dict[str, Any]] = r.json()["change_points"]
        return found


def test_a_step_is_found_once_and_a_step_back_resolves_it(
    app: TestClient, database_url: str
) -> None:
    history = History(app, create_token(database_url))
    for _ in range(30):
        history.push(1.0)
    for _ in range(2):
        history.push(1.10)
    run_due_jobs(app)
    # The 32 baseline runs pushed before any look ran queued one look between them, which ran
    # over them all (a look reads the series when it runs).
    looks = outbox_jobs(database_url, DETECT_KIND)
    assert len(looks) == 1 and {job.state for job in looks} == {"done"}
    assert history.change_points() == []  # two runs at the new level are not yet enough
    history.push(1.10)  # the third: 3 runs above 30 is p = 2 / C(33, 3) = 0.0004
    run_due_jobs(app)
    [found] = history.change_points()
    assert found["configuration"] == STEPPED and found["status"] == "open"
    assert found["early"] is False  # 30 runs before it: the rank test's evidence
    assert found["before_run_id"] == history.runs[29]["run_id"]
    assert found["after_run_id"] == history.runs[30]["run_id"]
    assert (found["before_sha"], found["after_sha"]) == (f"{29:040x}", f"{30:040x}")
    assert found["low"] <= 1.10 <= found["high"] and 1.07 < found["ratio"] < 1.13
    assert found["compare_url"].endswith(f"/compare/{29:040x}...{30:040x}")
    assert (found["branch"], found["workload"]) == ("main", "kernels/attention.py")
    for _ in range(17):
        history.push(1.10)
    run_due_jobs(app)
    assert [c["id"] for c in history.change_points()] == [found["id"]]  # reported once
    for _ in range(4):  # 4 runs below 20: p = 2 / C(24, 4) = 0.0002
        history.push(1.0)
    run_due_jobs(app)
    back, first = history.change_points()
    assert back["after_run_id"] == history.runs[50]["run_id"] and back["ratio"] < 0.95
    assert back["undoes_id"] == first["id"]
    assert back["status"] == first["status"] == "resolved"
    assert history.change_points(status="open") == []
    # One event per change point for the alerts (handled: fanned out to no channel, as this
    # workspace has none; tests/gate_server/domain/test_alerts_delivery.py sends them).
    events = outbox_jobs(database_url, EVENT_KIND)
    detections = outbox_jobs(database_url, DETECT_KIND)
    assert [e.payload["change_point"]["id"] for e in events] == [first["id"], back["id"]]
    assert [e.payload["resolves"] for e in events] == [None, first["id"]]
    assert all(e.state == outbox.DONE and e.attempts == 1 for e in events)
    # One look per drain: the 1st, the 33rd, the 34th-50th and the 51st-54th runs' pushes.
    assert len(detections) == 4 and all(j.state == outbox.DONE for j in detections)


def test_a_step_in_a_new_series_is_stored_as_early(app: TestClient, database_url: str) -> None:
    # 6 runs, then 3 runs 10% slower: no rank test reaches the level with 9 runs (at best
    # 2 / C(9, 3) = 0.024), stats.detect's early test does, and the label is kept.
    history = History(app, create_token(database_url))
    for factor in [1.0] * 6 + [1.1] * 3:
        history.push(factor)
        run_due_jobs(app)
    [found] = history.change_points()
    assert found["configuration"] == STEPPED and found["early"] is True
    assert found["after_run_id"] == history.runs[6]["run_id"] and found["ratio"] > 1.05


def test_a_drift_is_stored_once_and_grows(app: TestClient, database_url: str) -> None:
    # 20 runs, a 10% drift over 20 runs, 8 runs at the new level, a look after every run: one
    # change point, a drift, updated as it grows (stats.ChangePoint.continues).
    history = History(app, create_token(database_url))
    ramp = [1.0 + 0.1 * (i + 1) / 20 for i in range(20)]
    for factor in [1.0] * 20 + ramp + [1.1] * 8:
        history.push(factor)
        run_due_jobs(app)
    [found] = history.change_points()
    assert found["configuration"] == STEPPED and found["drift"] is True
    after = [r["run_id"] for r in history.runs].index(found["after_run_id"])
    end = [r["run_id"] for r in history.runs].index(found["end_run_id"])
    assert 18 <= after <= 28 and 34 <= end <= 44, (after, end)
    assert 1.07 < found["ratio"] < 1.13
    assert found["compare_url"].endswith(f"...{found['end_sha']}")


def test_only_baseline_runs_queue_a_look(app: TestClient, database_url: str) -> None:
    token = create_token(database_url)
    history = History(app, token)
    history.push(1.0)
    history.push(1.0, event="pull_request", pr_number=7, branch="feature")
    history.push(1.0, branch="feature")  # not among the token's baseline branches
    history.push(1.0, event="schedule")  # a nightly run of main (rnx init --schedule)
    assert [r["is_baseline"] for r in history.runs] == [True, False, False, True]
    jobs = outbox_jobs(database_url, DETECT_KIND)
    # One look waits for main's series, for runs 0 and 3 both; none for the others.
    assert [(j.state, j.payload["branch"]) for j in jobs] == [(outbox.PENDING, "main")]
    run_due_jobs(app)
    # Accepting the pull request's run makes it history too.
    r = app.post(
        f"/api/v1/runs/{history.runs[1]['run_id']}/accept",
        json={"reason": "new normal"},
        headers={"Authorization": f"Bearer {token.secret}"},
    )
    assert r.status_code == 200, r.text
    jobs = outbox_jobs(database_url, DETECT_KIND)
    assert [j.state for j in jobs] == [outbox.DONE, outbox.PENDING]  # a new look for the accept
    assert jobs[-1].payload["branch"] == "main"


def _stepped(app: TestClient, database_url: str) -> tuple[History, dict[str, Any]]:
    history = History(app, create_token(database_url))
    for factor in [1.0] * 12 + [1.2] * 5:  # p = 2 / C(17, 5) = 0.0003
        history.push(factor)
    run_due_jobs(app)
    [found] = history.change_points()
    return history, found


def test_reading_change_points_by_token_and_filter(
    app: TestClient, database_url: str, viewer_token: Callable[..., Token]
) -> None:
    history, found = _stepped(app, database_url)
    viewer = viewer_token()
    assert [c["id"] for c in history.change_points(viewer)] == [found["id"]]
    for params, expected in [
        ({"branch": "main"}, 1),
        ({"branch": "release/1"}, 0),
        ({"environment": "linux-x86_64-cpu-test"}, 1),
        ({"environment": "other"}, 0),
        ({"workload": "kernels/attention.py"}, 1),
        ({"workload": "kernels/norm.py"}, 0),
        ({"status": "open"}, 1),
        ({"status": "acknowledged"}, 0),
    ]:
        assert len(history.change_points(**params)) == expected, params
    outsider = create_token(database_url, workspace="other", viewer=True)
    other_repo = create_token(database_url, repository="acme/other")
    for token, params, status, code in [
        (outsider, {"repository": "acme/kernels"}, 404, "repository_not_found"),
        (other_repo, {"repository": "acme/kernels"}, 403, "repository_out_of_scope"),
        (history.token, {}, 422, "missing_repository"),
        (history.token, {"repository": "acme/kernels", "status": "closed"}, 422, "invalid_status"),
        # PostgreSQL text cannot hold NUL: refused before any query, on both databases.
        (viewer, {"repository": "acme/kernels\x00"}, 400, "invalid_parameter"),
        (viewer, {"repository": "acme/kernels", "branch": "main\x00"}, 400, "invalid_parameter"),
        (viewer, {"repository": "acme/kernels", "environment": "\x00"}, 400, "invalid_parameter"),
        (viewer, {"repository": "acme/kernels", "workload": "\x00"}, 400, "invalid_parameter"),
        (viewer, {"repository": "acme/kernels", "workload": "k" * 1001}, 422, "invalid_parameter"),
    ]:
        r = app.get(
            "/api/v1/change-points",
            params=params,
            headers={"Authorization": f"Bearer {token.secret}"},
        )
        assert (r.status_code, r.json()["error"]["code"]) == (status, code)
    assert app.get("/api/v1/change-points?repository=acme/kernels").status_code == 401


def test_acknowledging_a_change_point(
    app: TestClient, database_url: str, viewer_token: Callable[..., Token]
) -> None:
    history, found = _stepped(app, database_url)
    url = f"/api/v1/change-points/{found['id']}/acknowledge"
    auth = {"Authorization": f"Bearer {history.token.secret}"}
    r = app.post(url, json={"note": "the new allocator; expected"}, headers=auth)
    assert r.status_code == 200, r.text
    assert r.json()["status"] == "acknowledged"
    assert r.json()["note"] == "the new allocator; expected"
    assert r.json()["acknowledged_by"] == f"token:{history.token.id}"
    assert [c["status"] for c in history.change_points()] == ["acknowledged"]
    database = open_database(database_url)
    try:
        with database.read() as conn:
            [logged] = audit.entries(conn, f"change_point:{found['id']}")
    finally:
        database.close()
    assert logged["action"] == "change_point.acknowledge"
    assert logged["token_id"] == history.token.id
    assert logged["details"]["note"] == "the new allocator; expected"
    other_repo = create_token(database_url, repository="acme/other")
    viewer = viewer_token()
    for token, path, payload, status, code in [
        (viewer, url, {"note": "x"}, 403, "viewer_token"),
        (other_repo, url, {"note": "x"}, 404, "change_point_not_found"),
        (
            history.token,
            "/api/v1/change-points/999999/acknowledge",
            {"note": "x"},
            404,
            "change_point_not_found",
        ),
        (
            history.token,
            "/api/v1/change-points/abc/acknowledge",
            {"note": "x"},
            404,
            "change_point_not_found",
        ),
        (history.token, url, {"note": "  "}, 422, "missing_note"),
        (history.token, url, {"reason": "x"}, 422, "missing_note"),
        (history.token, url, {"note": "x" * 2001}, 422, "note_too_long"),
        (history.token, url, {"note": "a\x00b"}, 422, "invalid_note"),
    ]:
        r = app.post(path, json=payload, headers={"Authorization": f"Bearer {token.secret}"})
        assert (r.status_code, r.json()["error"]["code"]) == (status, code), path
    r = app.post(url, content=b"{", headers={**auth, "Content-Type": "application/json"})
    assert (r.status_code, r.json()["error"]["code"]) == (400, "invalid_json")


def _first_job_held(barrier: threading.Barrier) -> Callable[[Any, Any], None]:
    """handle_detect, whose first call waits at `barrier` (one such handler per worker)."""
    first = [True]

    def handle(services: Any, job: Any) -> None:
        if first[0]:
            first[0] = False
            barrier.wait()
        handle_detect(services, job)

    return handle


def test_jobs_of_one_series_in_parallel_store_each_change_once(
    app: TestClient, database_url: str
) -> None:
    """Two workers, each with its own engine (as two server processes), run two jobs of one
    history at once (a series has one untried job at a time, but a push while its job runs
    queues another): both look at the same runs, and the change is stored once, with one
    event."""
    history = History(app, create_token(database_url))
    for factor in [1.0] * 30 + [1.10] * 6:
        history.push(factor)
    database = open_database(database_url)
    try:
        with database.write() as conn:
            [queued] = outbox.jobs(conn, kind=DETECT_KIND)
            outbox.enqueue(conn, DETECT_KIND, queued.payload)  # as if pushed while it ran
    finally:
        database.close()
    services = [
        Services.start(ServerSettings(database_url=database_url, public_url="http://gate.test"))
        for _ in range(2)
    ]
    # Each worker holds its first job until both hold one: a worker scheduled first on a busy
    # machine would otherwise drain both jobs before the other thread ran (as the outbox's
    # process test once did), and the two would never look at one history at the same time.
    both_hold_one = threading.Barrier(2, timeout=60)
    workers = [
        OutboxWorker(svc, {DETECT_KIND: _first_job_held(both_hold_one)}, poll_s=1, lease_s=60)
        for svc in services
    ]
    try:
        with ThreadPoolExecutor(2) as pool:
            ran = list(pool.map(lambda w: sum(1 for _ in iter(w.run_once, False)), workers))
    finally:
        for svc in services:
            svc.close()
    assert ran == [1, 1], ran  # both took part
    [found] = history.change_points()
    assert found["after_run_id"] == history.runs[30]["run_id"]
    events = outbox_jobs(database_url, EVENT_KIND)
    assert [e.payload["change_point"]["id"] for e in events] == [found["id"]]


def test_run_locations_summarise_what_they_can() -> None:
    doc = make_results(configs=CONFIGS, broken=["pytorch_eager/float32/bs1"], seed=3)
    found = run_locations(body(doc))
    assert list(found) == [STEPPED]
    [config] = [c for c in doc.configurations if c.id == STEPPED]
    assert config.samples is not None
    assert found[STEPPED] == pytest.approx(stats.run_location(config.samples.by_process()))
    for junk in (b"not json", b"[]", b'{"configurations": 3}', b'{"configurations": [{}]}'):
        assert run_locations(junk) == {}


ENV = "linux-x86_64-cpu-test"


def test_a_series_has_one_untried_look_waiting(app: TestClient, database_url: str) -> None:
    """A flood of pushes to one series queues one look (it reads the series when it runs); a
    push while that look runs, or after it failed once, queues another, and other series
    have looks of their own."""
    history = History(app, create_token(database_url))
    for _ in range(5):
        history.push(1.0)
    history.push(1.0, environment="other-machine")
    database = open_database(database_url)

    def looks() -> list[tuple[str, str, int]]:
        with database.read() as conn:
            return [
                (j.payload["environment_key"], j.state, j.attempts)
                for j in outbox.jobs(conn, kind=DETECT_KIND)
            ]

    try:
        assert looks() == [(ENV, "pending", 0), ("other-machine", "pending", 0)]
        with database.write() as conn:
            claimed = outbox.claim(conn, [DETECT_KIND], "worker", timedelta(seconds=60))
        assert claimed is not None and claimed.payload["environment_key"] == ENV
        history.push(1.0)  # while the look runs: it may have read the series already
        assert looks() == [
            (ENV, "pending", 1),
            ("other-machine", "pending", 0),
            (ENV, "pending", 0),
        ]
    finally:
        database.close()


def test_a_change_masked_by_a_stored_one_is_stored_at_its_own_run(
    app: TestClient, database_url: str
) -> None:
    # A 6% step at run 30 and a 12% one at run 40; the one at 40 is stored already (as a look
    # that found only it would have). The next look searches around it again: the step at 30
    # is stored at its own run, and the one at 40 is not stored twice.
    history = History(app, create_token(database_url))
    for factor in [1.0] * 30 + [1.06] * 10 + [1.06 * 1.12] * 15:
        history.push(factor)
    database = open_database(database_url)
    try:
        with database.write() as conn:
            [queued] = outbox.jobs(conn, kind=DETECT_KIND)
            p = queued.payload
            before, after = history.runs[39], history.runs[40]
            stored = insert_change_point(
                conn,
                repository_id=p["repository_id"],
                branch=p["branch"],
                environment_key=p["environment_key"],
                workload=p["workload"],
                configuration=STEPPED,
                before_run_id=before["run_id"],
                before_sha=f"{39:040x}",
                after_run_id=after["run_id"],
                after_sha=f"{40:040x}",
                ratio=1.12,
                low=1.10,
                high=1.14,
                p_value=1e-6,
            )
    finally:
        database.close()
    run_due_jobs(app)
    found = {c["after_run_id"]: c for c in history.change_points()}
    assert set(found) == {history.runs[30]["run_id"], history.runs[40]["run_id"]}
    assert found[history.runs[40]["run_id"]]["id"] == stored
    masked = found[history.runs[30]["run_id"]]
    assert 1.03 < masked["ratio"] < 1.09 and masked["undoes_id"] is None
    assert masked["before_run_id"] == history.runs[29]["run_id"]
    run_due_jobs(app)
    history.push(1.06 * 1.12)
    run_due_jobs(app)
    assert len(history.change_points()) == 2  # each reported once
