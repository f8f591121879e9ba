"""The outbox worker: each server process runs one, started and stopped with the app.

It claims due jobs from the outbox table (gate_server/db/outbox.py) under a lease, runs the
handler registered for the job's kind (gate_server/jobs/handlers.py) in a thread, and marks the job
done, or due again later with exponential backoff when the handler raised. It runs its lanes side by
side, each claiming only its own kinds (gate_server/jobs/handlers.py: LANES), so that sends to a
slow receiver never hold up change-point detection or the alerts' fan-out. A job whose kind has no
handler in this process is never claimed: it stays pending for a process that has one. A
process killed mid-job loses nothing: the job's lease runs out and another claim runs it again,
so handlers must be safe to run twice (they are: each checks what it already did).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import random
import socket
import time
import uuid
from collections.abc import Callable, Collection, Mapping, Sequence
from datetime import timedelta

from starlette.concurrency import run_in_threadpool

from gate_server.db import outbox
from gate_server.db.outbox import OutboxJob
from gate_server.domain.job_context import JobContext
from gate_server.errors import PermanentFailure, TryLater

log = logging.getLogger("gate_server.outbox")

# A handler does one job; it raises to have the job tried again later (PermanentFailure: never).
Handler = Callable[[JobContext, OutboxJob], None]

MAX_ATTEMPTS = 10  # then the job is FAILED: 5 s, 10 s, ... 21 min apart, ~43 min in all
FIRST_RETRY_S = 5.0
LONGEST_RETRY_S = 3600.0
KEEP_FINISHED = timedelta(days=7)  # done jobs are kept this long (their delivery ids with them)
PURGE_EVERY_S = 3600.0


def retry_delay(attempts: int, rng: random.Random, first_s: float = FIRST_RETRY_S) -> timedelta:
    """Exponential backoff after the `attempts`-th failed try, with +-20% jitter so that jobs
    that failed together (a receiver down) are not all tried again at the same moment."""
    base = min(first_s * 2 ** max(attempts - 1, 0), LONGEST_RETRY_S)
    return timedelta(seconds=base * rng.uniform(0.8, 1.2))


def new_owner() -> str:
    """This process's name in leases: host, pid and a random part (a pid is reused)."""
    return f"{socket.gethostname()[:60]}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class OutboxWorker:
    def __init__(
        self,
        services: JobContext,
        handlers: Mapping[str, Handler],
        *,
        poll_s: float,
        lease_s: float,
        rng: random.Random | None = None,
        first_retry_s: float = FIRST_RETRY_S,
        lanes: Sequence[Collection[str]] = (),
    ) -> None:
        """lanes: the kinds each loop claims (default: one loop claiming every kind)."""
        self.services = services
        self.handlers = dict(handlers)
        self.lanes = [sorted(kinds) for kinds in lanes] or [sorted(self.handlers)]
        self.poll_s = poll_s
        self.lease = timedelta(seconds=lease_s)
        self.owner = new_owner()
        self.rng = rng or random.Random()
        self.first_retry_s = first_retry_s
        self._stop = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._purged_at = 0.0

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._tasks = [
            loop.create_task(self._run(kinds), name=f"outbox-worker-{n}")
            for n, kinds in enumerate(self.lanes)
        ]

    async def stop(self, timeout: float = 10.0) -> None:
        """Stop after the jobs at hand (their leases cover them if they outlast `timeout`)."""
        self._stop.set()
        if self._tasks:
            try:
                await asyncio.wait_for(asyncio.shield(asyncio.gather(*self._tasks)), timeout)
            except asyncio.TimeoutError:
                log.warning("outbox worker still busy at shutdown; its lease will expire")

    async def _run(self, kinds: list[str]) -> None:
        while not self._stop.is_set():
            try:
                busy = await run_in_threadpool(self.run_once, kinds)
            except Exception:  # the database went away, say: log it and try again later
                log.exception("outbox worker: claiming a job failed")
                busy = False
            if not busy:
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._stop.wait(), self.poll_s)

    def run_once(self, kinds: list[str] | None = None) -> bool:
        """Claim and run one due job of `kinds` (default: any); False when there was none."""
        self._purge_now_and_then()
        database = self.services.database
        kinds = kinds or sorted(self.handlers)
        with database.read() as conn:
            if not outbox.has_due(conn, kinds):
                return False
        with database.write() as conn:
            job = outbox.claim(conn, kinds, self.owner, self.lease)
        if job is None:
            return False
        try:
            self.handlers[job.kind](self.services, job)
        except Exception as e:
            self._failed(job, e)
            return True
        with database.write() as conn:
            if not outbox.complete(conn, job.id, self.owner):
                log.warning("outbox job %s outlasted its lease; it may run again", job.id)
        return True

    def _failed(self, job: OutboxJob, error: Exception) -> None:
        permanent = isinstance(error, PermanentFailure) or job.attempts >= MAX_ATTEMPTS
        retry_in = None if permanent else retry_delay(job.attempts, self.rng, self.first_retry_s)
        text = f"{type(error).__name__}: {error}"
        log.warning(
            "outbox job %s (%s) attempt %s failed: %s; %s",
            job.id,
            job.kind,
            job.attempts,
            text,
            "giving up" if retry_in is None else f"again in {retry_in.total_seconds():.0f} s",
            exc_info=not isinstance(error, (PermanentFailure, TryLater)),
        )
        with self.services.database.write() as conn:
            outbox.fail(conn, job.id, self.owner, text, retry_in=retry_in)

    def _purge_now_and_then(self) -> None:
        now = time.monotonic()
        if now - self._purged_at < PURGE_EVERY_S:
            return
        self._purged_at = now
        with self.services.database.write() as conn:
            outbox.purge_finished(conn, KEEP_FINISHED)
