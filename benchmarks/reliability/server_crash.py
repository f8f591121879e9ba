"""Crash the gate server (kill -9) and restart PostgreSQL under it, both mid-burst of uploads,
then prove that nothing acknowledged is lost, nothing is half-stored, and retries store once.

    .venv/bin/python -m benchmarks.reliability.server_crash [--database sqlite,postgresql]
    [--pg-restart]
        [--uploads 240] [--threads 4]

kill -9: `rnx serve` on loopback takes a burst of signed uploads from --threads uploaders (one
attempt each, so every upload is either acknowledged or not); after a third of them the server
is killed with SIGKILL, then started again on the same database. Checks:
  1. every acknowledged run is stored (its 201 came after the commit);
  2. no run is half-stored: each stored run's bytes hash to its body_sha256, parse as a
     results document, carry a stored answer, and have exactly one "run.upload" audit entry
     (written in the same transaction); no upload audit entry lacks its run;
  3. the action's upload client (action/upload.py, same bytes, fresh signature) retries every
     unacknowledged upload: each is stored exactly once (a 200 tells it was committed before
     the crash and only the answer was lost), and the total is one row per document.
--pg-restart (PostgreSQL only; needs root): the same burst, but PostgreSQL is restarted with
pg_ctlcluster while the server keeps running; the server must answer again without a restart
of its own, and checks 1-3 hold. PostgreSQL is started again whatever happens.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from sqlalchemy import create_engine, select, text
from sqlalchemy.engine import make_url

from action.upload import Credential, UploadAnswer, upload
from gate_server.db import Database
from gate_server.db import runs as stored_runs
from gate_server.db.schema import audit_log, runs
from rnx.schema import ResultsDocument, parse_results
from testbed.factories import body, make_results
from testbed.gate_helpers import (
    LiveServer,
    create_token,
    fresh_postgres_schema,
    postgres_base_url,
    signed_headers,
    start_server,
)

ROOT = Path(__file__).resolve().parents[2]

REPO = "acme/kernels"
CONFIGS = [("pytorch_eager", "float32", 1), ("pytorch_eager", "float32", 8)]


@dataclass
class Burst:
    acked: dict[str, int] = field(default_factory=dict)  # run_id -> status
    refused: dict[str, int] = field(default_factory=dict)  # run_id -> 4xx/5xx status
    lost: list[str] = field(default_factory=list)  # no answer: transport error
    why_lost: dict[str, int] = field(default_factory=dict)  # its exception's name -> count
    lock: threading.Lock = field(default_factory=threading.Lock)


def _documents(n: int) -> list[ResultsDocument]:
    # Pushes to main: each may become a baseline, so later uploads read what earlier ones wrote.
    return [
        make_results(repository=REPO, configs=CONFIGS, sha=f"{i:040x}", seed=i, n=16)
        for i in range(n)
    ]


def _burst(
    server_url: str, secret: str, docs: list[ResultsDocument], threads: int, fault: threading.Event
) -> Burst:
    out = Burst()
    queue = list(docs)
    qlock = threading.Lock()

    def worker() -> None:
        with httpx.Client(timeout=15) as client:
            while True:
                with qlock:
                    if not queue:
                        return
                    doc = queue.pop(0)
                raw = body(doc)
                run_id = str(doc.run_id)
                try:
                    r = client.post(
                        f"{server_url}/api/v1/runs",
                        content=raw,
                        headers=signed_headers(secret, raw),
                    )
                except httpx.HTTPError as e:
                    with out.lock:
                        out.lost.append(run_id)
                        out.why_lost[type(e).__name__] = out.why_lost.get(type(e).__name__, 0) + 1
                    continue
                with out.lock:
                    if r.status_code in (200, 201):
                        out.acked[run_id] = r.status_code
                    else:
                        out.refused[run_id] = r.status_code

    with ThreadPoolExecutor(threads) as pool:
        for _ in range(threads):
            pool.submit(worker)
    fault.set()
    return out


def _check_storage(database_url: str) -> dict[str, object]:
    """Every stored run whole; one upload audit entry per run, none for a missing run."""
    storage = Database(database_url)
    problems: list[str] = []
    try:
        with storage.read() as conn:
            rows = conn.execute(
                select(runs.c.run_id, runs.c.document, runs.c.body_sha256, runs.c.answer)
            ).all()
            audits = conn.execute(
                select(audit_log.c.subject).where(audit_log.c.action == "run.upload")
            ).scalars()
            audit_counts: dict[str, int] = {}
            for subject in audits:
                audit_counts[subject] = audit_counts.get(subject, 0) + 1
    finally:
        storage.close()
    stored = set()
    for run_id, document, digest, answer in rows:
        stored.add(run_id)
        if hashlib.sha256(bytes(document)).hexdigest() != digest:
            problems.append(f"{run_id}: bytes do not match body_sha256")
        try:
            parse_results(bytes(document))
            assert json.loads(answer)["run_id"] == run_id
        except Exception as e:  # any failure here is a half-stored run: report, do not stop
            problems.append(f"{run_id}: {type(e).__name__}: {e}")
        if audit_counts.get(f"run:{run_id}", 0) != 1:
            problems.append(
                f"{run_id}: {audit_counts.get(f'run:{run_id}', 0)} upload audit entries"
            )
    orphans = [s for s in audit_counts if s.removeprefix("run:") not in stored]
    problems += [f"audit entry for {s} but no such run" for s in orphans]
    return {"stored": stored, "problems": problems}


def _retry_unacknowledged(url: str, secret: str, docs: dict[str, ResultsDocument], ids: list[str]):
    statuses: dict[str, str] = {}
    for run_id in ids:
        answer = upload(docs[run_id], url=url, credentials=[Credential("token", secret)])
        statuses[run_id] = answer.run_id if isinstance(answer, UploadAnswer) else answer.cause
    return statuses


def _wait_ready(url: str, timeout: float) -> float:
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        try:
            if httpx.get(f"{url}/readyz", timeout=1).status_code == 200:
                return time.monotonic() - started
        except httpx.HTTPError:
            pass
        time.sleep(0.05)
    raise RuntimeError(f"{url} not ready after {timeout} s")


def _report(name: str, docs: list[ResultsDocument], burst: Burst, url: str, secret: str, db: str):
    by_id = {str(d.run_id): d for d in docs}
    before = _check_storage(db)
    stored_before: set[str] = before["stored"]  # type: ignore[assignment]
    missing_acked = [r for r in burst.acked if r not in stored_before]
    unacked = burst.lost + list(burst.refused)
    committed_unacked = [r for r in unacked if r in stored_before]
    started = time.monotonic()
    retried = _retry_unacknowledged(url, secret, by_id, unacked)
    retry_s = time.monotonic() - started
    retry_failures = {r: s for r, s in retried.items() if s != r}
    # Every acknowledged upload sent again (same bytes, fresh signature): the stored answer.
    again = []
    with httpx.Client(timeout=15) as client:
        for run_id in list(burst.acked)[:40]:
            raw = body(by_id[run_id])
            r = client.post(f"{url}/api/v1/runs", content=raw, headers=signed_headers(secret, raw))
            again.append(r.status_code == 200 and r.json()["run_id"] == run_id)
    after = _check_storage(db)
    stored_after: set[str] = after["stored"]  # type: ignore[assignment]
    never_sent = [r for r in by_id if r not in burst.acked and r not in unacked]
    ok = not (missing_acked or before["problems"] or after["problems"] or retry_failures)
    ok = ok and stored_after == set(by_id) - set(never_sent) and all(again)
    refused = sorted(set(burst.refused.values()))
    print(f"## {name}")
    print(f"documents sent in the burst:          {len(by_id) - len(never_sent)}")
    print(f"acknowledged (200/201):               {len(burst.acked)}")
    print(f"no answer (connection cut):           {len(burst.lost)} {burst.why_lost or ''}")
    print(f"answered with an error:               {len(burst.refused)} (statuses {refused})")
    print(f"acknowledged but not stored:          {len(missing_acked)}")
    print(f"half-stored runs / orphan audits:     {len(before['problems'])}")  # type: ignore[arg-type]
    print(f"unacknowledged yet committed:         {len(committed_unacked)}")
    print(
        f"retried by action/upload.py:          {len(retried)} in {retry_s:.1f} s, "
        f"{len(retry_failures)} failed"
    )
    print(
        f"acknowledged ones sent again:         {len(again)}, "
        f"{sum(again)} answered 200 (the stored answer)"
    )
    print(
        f"stored after retries:                 {len(stored_after)} rows for "
        f"{len(by_id) - len(never_sent)} documents (duplicates impossible: {len(stored_after)} "
        f"distinct run ids), problems after: {len(after['problems'])}"  # type: ignore[arg-type]
    )
    for p in (before["problems"] + after["problems"])[:10]:  # type: ignore[operator]
        print("  PROBLEM", p)
    for r, s in list(retry_failures.items())[:5]:
        print("  RETRY FAILED", r, s)
    print(f"result: {'OK' if ok else 'FAILED'}\n", flush=True)
    return ok


def _until_stored(db: str, count: int, fault: threading.Event) -> None:
    """Wait until `count` runs are stored (the fault then lands mid-burst) or the burst is over."""
    storage = Database(db)
    try:
        while not fault.is_set():
            with storage.read() as conn:
                if stored_runs.count(conn) >= count:
                    return
            time.sleep(0.01)
    finally:
        storage.close()


def kill_during_burst(db: str, work: Path, uploads: int, threads: int) -> bool:
    token = create_token(db)
    server = start_server(db, work)
    docs = _documents(uploads)
    fault = threading.Event()

    def killer() -> None:
        # Kill once a third of the burst is acknowledged, so the kill lands mid-stream.
        _until_stored(db, uploads // 3, fault)
        server.process.kill()  # SIGKILL: no shutdown handler runs
        server.process.wait()

    thread = threading.Thread(target=killer)
    thread.start()
    burst = _burst(server.url, token.secret, docs, threads, fault)
    thread.join()
    restarted = start_server(db, work)
    try:
        return _report(
            f"kill -9 mid-burst ({db.split(':')[0]})", docs, burst, restarted.url, token.secret, db
        )
    finally:
        restarted.stop()


def _pg_cluster() -> list[str]:
    version = sorted(p.name for p in Path("/etc/postgresql").iterdir())[-1]
    return ["pg_ctlcluster", "--skip-systemctl-redirect", version, "main"]


def _ensure_postgres_running() -> None:
    status = subprocess.run([*_pg_cluster(), "status"], capture_output=True, text=True)
    if status.returncode != 0:
        subprocess.run([*_pg_cluster(), "start"], check=True)


def pg_restart_during_burst(db: str, work: Path, uploads: int, threads: int) -> bool:
    token = create_token(db)
    servers: list[LiveServer] = [start_server(db, work)]
    server = servers[0]
    docs = _documents(uploads)
    fault = threading.Event()
    timeline: dict[str, float] = {}

    def restarter() -> None:
        _until_stored(db, uploads // 3, fault)
        t0 = time.monotonic()
        subprocess.run([*_pg_cluster(), "restart"], check=True, capture_output=True)
        timeline["restart_s"] = time.monotonic() - t0

    thread = threading.Thread(target=restarter)
    try:
        thread.start()
        burst = _burst(server.url, token.secret, docs, threads, fault)
        thread.join()
        timeline["ready_again_s"] = _wait_ready(server.url, 30)
        alive = server.process.poll() is None
        print(
            f"PostgreSQL restart took {timeline.get('restart_s', float('nan')):.1f} s; the server "
            f"process {'kept running' if alive else 'DIED'} and answered /readyz "
            f"{timeline['ready_again_s']:.2f} s after the burst ended"
        )
        return alive and _report(
            "PostgreSQL restarted mid-burst", docs, burst, server.url, token.secret, db
        )
    finally:
        _ensure_postgres_running()
        for s in servers:
            s.stop()


def _fresh_schema() -> tuple[str, Callable[[], None]]:
    """gate_helpers' schema, dropped through a new connection: PostgreSQL's restart has
    closed every connection the helper's engine pooled."""
    url, _ = fresh_postgres_schema(postgres_base_url())
    schema = make_url(url).query["options"].split("=", 1)[1]  # type: ignore[union-attr]

    def drop() -> None:
        _ensure_postgres_running()
        engine = create_engine(postgres_base_url(), isolation_level="AUTOCOMMIT")
        try:
            with engine.connect() as conn:
                conn.execute(text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
        finally:
            engine.dispose()

    return url, drop


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--database", default="sqlite,postgresql")
    p.add_argument("--uploads", type=int, default=240)
    p.add_argument("--threads", type=int, default=4)
    p.add_argument("--pg-restart", action="store_true", help="also restart PostgreSQL mid-burst")
    args = p.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="rnx-crash-"))
    results = []
    for engine in args.database.split(","):
        if engine == "sqlite":
            results.append(
                kill_during_burst(
                    f"sqlite:///{work / 'crash.db'}", work, args.uploads, args.threads
                )
            )
            continue
        url, drop = _fresh_schema()
        try:
            results.append(kill_during_burst(url, work, args.uploads, args.threads))
        finally:
            drop()
        if args.pg_restart:
            url, drop = _fresh_schema()
            try:
                results.append(pg_restart_during_burst(url, work, args.uploads, args.threads))
            finally:
                _ensure_postgres_running()
                drop()
    print(f"{sum(results)} of {len(results)} scenarios OK")
    return 0 if all(results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
