"""The durable outbox on SQLite and PostgreSQL: jobs live and die with their transaction, one
process at a time holds a job, failures come back after a backoff, unknown kinds wait."""

from __future__ import annotations

import multiprocessing
import random
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest

from gate_server.db import Database, open_database, outbox
from gate_server.errors import PermanentFailure
from gate_server.jobs.worker import MAX_ATTEMPTS, OutboxWorker, retry_delay

LEASE = timedelta(seconds=60)


def _enqueue(storage: Database, kind: str = "test.kind", **payload: Any) -> outbox.OutboxJob:
    with storage.write() as conn:
        return outbox.enqueue(conn, kind, payload)


def test_a_job_exists_only_when_its_transaction_commits(storage: Database) -> None:
    class Boom(Exception):
        pass

    with pytest.raises(Boom), storage.write() as conn:
        outbox.enqueue(conn, "test.kind", {"n": 1})
        raise Boom
    job = _enqueue(storage, n=2)
    with storage.read() as conn:
        assert [j.payload for j in outbox.jobs(conn)] == [{"n": 2}]
    assert job.state == outbox.PENDING and job.attempts == 0
    assert len(job.delivery_id) == 36


def test_one_owner_at_a_time_until_the_lease_runs_out(storage: Database) -> None:
    job = _enqueue(storage)
    with storage.write() as conn:
        first = outbox.claim(conn, ["test.kind"], "a", LEASE)
    with storage.write() as conn:
        second = outbox.claim(conn, ["test.kind"], "b", LEASE)
    assert first is not None and first.id == job.id and first.attempts == 1
    assert first.lease_owner == "a"
    assert second is None
    # Owner "a" dies; a lease that has run out (here: one of no length) is taken over.
    with storage.write() as conn:
        outbox.fail(conn, job.id, "a", "x", retry_in=timedelta(0))
        again = outbox.claim(conn, ["test.kind"], "a", timedelta(0))
    with storage.write() as conn:
        taken = outbox.claim(conn, ["test.kind"], "b", LEASE)
    assert again is not None and taken is not None
    assert taken.lease_owner == "b" and taken.attempts == 3
    with storage.write() as conn:
        assert not outbox.complete(conn, job.id, "a")  # "a" lost it
        assert outbox.complete(conn, job.id, "b")
    with storage.read() as conn:
        done = outbox.get(conn, job.id)
    assert done is not None and done.state == outbox.DONE and done.lease_owner is None


def test_a_failed_job_waits_for_its_retry_and_can_fail_for_good(storage: Database) -> None:
    job = _enqueue(storage)
    with storage.write() as conn:
        outbox.claim(conn, ["test.kind"], "a", LEASE)
        assert outbox.fail(conn, job.id, "a", "receiver down", retry_in=timedelta(hours=1))
    with storage.write() as conn:
        assert outbox.claim(conn, ["test.kind"], "a", LEASE) is None
        found = outbox.get(conn, job.id)
    assert found is not None and found.last_error == "receiver down"
    assert found.state == outbox.PENDING
    other = _enqueue(storage)
    with storage.write() as conn:
        outbox.claim(conn, ["test.kind"], "a", LEASE)
        outbox.fail(conn, other.id, "a", "bad payload", retry_in=None)
        gone = outbox.get(conn, other.id)
    assert gone is not None and gone.state == outbox.FAILED and gone.done_at is not None


def test_a_kind_without_a_handler_stays_pending(storage: Database) -> None:
    _enqueue(storage, "event.nobody_handles_this")
    wanted = _enqueue(storage, "test.kind")
    with storage.read() as conn:
        assert not outbox.has_due(conn, ["test.other"]) and outbox.has_due(conn, ["test.kind"])
    with storage.write() as conn:
        assert outbox.claim(conn, [], "a", LEASE) is None
        job = outbox.claim(conn, ["test.kind", "other"], "a", LEASE)
        assert outbox.claim(conn, ["test.kind"], "a", LEASE) is None
    assert job is not None and job.id == wanted.id


def test_backoff_doubles_with_jitter_and_is_bounded() -> None:
    rng = random.Random(1)
    seconds = [retry_delay(n, rng).total_seconds() for n in range(1, 12)]
    assert 4.0 <= seconds[0] <= 6.0 and 8.0 <= seconds[1] <= 12.0
    assert all(s <= 3600 * 1.2 for s in seconds)
    assert seconds[-1] >= 3600 * 0.8


# ---- several processes claiming at once


def _drain(url: str, owner: str, out: Any, start: Any, first_held: Any) -> None:
    """A process that claims and completes jobs until none are left; reports what it took.
    Every process claims its first job at once (start, a barrier) and holds it until all hold
    one (first_held): so the processes really run side by side even on a busy machine, where a
    process scheduled first would otherwise drain the whole outbox alone."""
    database = Database(url)
    taken: list[int] = []
    start.wait(timeout=120)
    try:
        while True:
            with database.write() as conn:
                job = outbox.claim(conn, ["test.kind"], owner, LEASE)
            if not taken:
                first_held.wait(timeout=120)
            if job is None:
                break
            taken.append(job.id)
            with database.write() as conn:
                if not outbox.complete(conn, job.id, owner):
                    taken.append(-job.id)  # a lease lost: never expected here
    finally:
        database.close()
    out.put((owner, taken))


def test_several_processes_never_take_the_same_job(database_url: str) -> None:
    database = open_database(database_url)
    try:
        with database.write() as conn:
            ids = {outbox.enqueue(conn, "test.kind", {"n": n}).id for n in range(120)}
    finally:
        database.close()
    # Fresh processes (no state of this one), forked from one server that imported this module
    # once: spawning four interpreters that each import it took seconds on 2 cores.
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload([__name__])
    results = context.Queue()
    start, first_held = context.Barrier(4), context.Barrier(4)
    workers = [
        context.Process(target=_drain, args=(database_url, f"p{i}", results, start, first_held))
        for i in range(4)
    ]
    for w in workers:
        w.start()
    found = [results.get(timeout=120) for _ in workers]
    for w in workers:
        w.join(timeout=30)
    taken = [job for _, jobs in found for job in jobs]
    assert sorted(taken) == sorted(ids)  # each once, none lost, no lease lost
    assert all(jobs for _, jobs in found), "a process found no job to claim while 116 were pending"


# ---- the worker


@dataclass
class _Services:
    """What the worker and these handlers use of gate_server.services.Services."""

    database: Database


def test_the_worker_retries_with_backoff_then_succeeds(storage: Database) -> None:
    calls: list[int] = []

    def flaky(_svc: Any, job: outbox.OutboxJob) -> None:
        calls.append(job.attempts)
        if job.attempts < 3:
            raise ConnectionError("receiver down")

    worker = OutboxWorker(
        _Services(storage),  # type: ignore[arg-type]
        {"test.kind": flaky},
        poll_s=0.01,
        lease_s=60,
        first_retry_s=0.0,
    )
    job = _enqueue(storage)
    while worker.run_once():
        pass
    with storage.read() as conn:
        found = outbox.get(conn, job.id)
    assert calls == [1, 2, 3]
    assert found is not None and found.state == outbox.DONE and found.attempts == 3
    assert found.last_error == "ConnectionError: receiver down"


def test_the_worker_gives_up(storage: Database) -> None:
    def never(_svc: Any, job: outbox.OutboxJob) -> None:
        raise RuntimeError("still down")

    def refuse(_svc: Any, job: outbox.OutboxJob) -> None:
        raise PermanentFailure("the channel was deleted")

    worker = OutboxWorker(
        _Services(storage),  # type: ignore[arg-type]
        {"test.kind": never, "test.refused": refuse},
        poll_s=0.01,
        lease_s=60,
        first_retry_s=0.0,
    )
    retried = _enqueue(storage)
    refused = _enqueue(storage, "test.refused")
    while worker.run_once():
        pass
    with storage.read() as conn:
        a, b = outbox.get(conn, retried.id), outbox.get(conn, refused.id)
    assert a is not None and a.state == outbox.FAILED and a.attempts == MAX_ATTEMPTS
    assert b is not None and b.state == outbox.FAILED and b.attempts == 1
    assert b.last_error == "PermanentFailure: the channel was deleted"
