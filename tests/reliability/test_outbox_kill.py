"""kill -9 of a real server in the middle of an outbox job, on SQLite and PostgreSQL: nothing is
lost, and after a restart the job runs again and its work is done once."""

from __future__ import annotations

import time
from pathlib import Path

import httpx

from gate_server.db import Database, change_points, open_database, outbox
from gate_server.db.outbox import OutboxJob
from gate_server.db.runs import BaselineKey
from gate_server.domain.change_points import DETECT_KIND, EVENT_KIND
from testbed.factories import body, make_results
from testbed.gate_helpers import LiveServer, create_token, signed_headers, start_server

STEPPED = "pytorch_eager/float32/bs8"
LEASE_S = 2
ENV = {"RNX_OUTBOX_POLL_MS": "20", "RNX_OUTBOX_LEASE_S": str(LEASE_S)}


def _upload(server: LiveServer, secret: str, n: int, factor: float) -> str:
    doc = make_results(slowdown={STEPPED: factor}, seed=n, sha=f"{n:040x}")
    data = body(doc)
    r = httpx.post(
        f"{server.url}/api/v1/runs", content=data, headers=signed_headers(secret, data), timeout=60
    )
    assert r.status_code == 201, r.text
    return str(doc.run_id)


def _detect_jobs(database: Database) -> list[OutboxJob]:
    with database.read() as conn:
        return outbox.jobs(conn, kind=DETECT_KIND)


def _wait_until_done(database: Database, timeout: float = 60.0) -> list[OutboxJob]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        jobs = _detect_jobs(database)
        if jobs and all(j.state == outbox.DONE for j in jobs):
            return jobs
        time.sleep(0.05)
    raise AssertionError(f"detection jobs not done in {timeout} s: {_detect_jobs(database)}")


def _kill_while_leased(database: Database, server: LiveServer, run_id: str) -> OutboxJob | None:
    """Hold off every write to the outbox, look at the job of `run_id`, let go; once the server
    has claimed it (leased, not done), kill -9 the server while the hold keeps the job from
    finishing. None when the job finished before it could be caught."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with database.write() as conn:  # SQLite: BEGIN IMMEDIATE holds every writer off
            if database.dialect == "postgresql":
                conn.exec_driver_sql("LOCK TABLE outbox IN EXCLUSIVE MODE")
            # The newest look of the series: the one queued for run_id, or the untried one
            # run_id joined.
            job = outbox.jobs(conn, kind=DETECT_KIND)[-1]
            if job.state == outbox.DONE:
                return None
            if job.lease_owner is not None:
                server.process.kill()  # SIGKILL: no shutdown, the lease stays
                server.process.wait(timeout=10)
                return job
        time.sleep(0.001)
    raise AssertionError("the server never claimed the job")


def test_kill_9_during_a_job_loses_nothing(database_url: str, tmp_path: Path) -> None:
    token = create_token(database_url)
    database = open_database(database_url)
    first = start_server(database_url, tmp_path, env=ENV)
    try:
        for n in range(30):
            _upload(first, token.secret, n, 1.0)
        for n in range(30, 32):
            _upload(first, token.secret, n, 1.10)
        _wait_until_done(database)
        # The third slower run makes the change detectable; catch its job (or a later one's,
        # should a job finish before it can be caught) in the middle of its work. Up to 15
        # tries, not 5: on a loaded machine the test, descheduled between two looks, can miss
        # a job that starts and finishes meanwhile.
        caught = None
        for n in range(32, 47):
            run_id = _upload(first, token.secret, n, 1.10)
            caught = _kill_while_leased(database, first, run_id)
            if caught is not None:
                break
        assert caught is not None, "no job could be caught while leased"
        assert first.process.returncode == -9
        [stuck] = [j for j in _detect_jobs(database) if j.id == caught.id]
        assert stuck.state == outbox.PENDING and stuck.attempts == 1 and stuck.lease_owner
    finally:
        first.stop()

    second = start_server(database_url, tmp_path, env=ENV)
    try:
        jobs = _wait_until_done(database, timeout=LEASE_S + 60)
    finally:
        second.stop()
    [rerun] = [j for j in jobs if j.id == caught.id]
    assert rerun.attempts == 2  # claimed again after the dead process's lease ran out
    assert all(j.attempts == 1 for j in jobs if j.id != caught.id)
    key = BaselineKey(1, "main", "linux-x86_64-cpu-test", "kernels/attention.py")
    with database.read() as conn:
        found = change_points.of_series(conn, key)
        events = outbox.jobs(conn, kind=EVENT_KIND)
    database.close()
    [change] = found  # stored once, whichever process ran the job that found it
    assert change.configuration == STEPPED and change.after_sha == f"{30:040x}"
    assert [e.payload["change_point"]["id"] for e in events] == [change.id]
