"""How fast the dashboard's history page renders for a repository with 10,000 runs, against one
with 100, side by side on the real server over loopback.

    .venv/bin/python -m benchmarks.server.dashboard_history [--runs 10000] [--small 100]
    [--requests 40]
                                                     [--db sqlite|postgresql]

Both repositories live in one database; their runs are bulk-inserted through the database
module (the same row an upload writes: the document bytes, an answer with per-configuration
ratios, baseline marks), because gating 10,000 uploads one by one would take longer than the
measurement is worth. One run in 500 is BLOCKed, one in 1,000 accepted, and the environment
changes once, so the page draws all its markers. Requests alternate between the two pages, so
both see the same machine state; the first (cold) request of each page is reported apart,
since the dashboard caches what it reads from each stored document and the charts it drew.
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import statistics
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import httpx
from sqlalchemy import text

from gate_server.db import Database, open_database, repositories
from gate_server.db import runs as stored_runs
from gate_server.db.runs import NewRun
from testbed.factories import body, make_results
from testbed.gate_helpers import (
    create_token,
    fresh_postgres_schema,
    postgres_base_url,
    start_server,
)

ROOT = Path(__file__).resolve().parents[2]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    k = (len(ordered) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def _repo_ids(storage: Database, names: list[str]) -> tuple[int, dict[str, int]]:
    with storage.write() as conn:
        workspace_id = repositories.ensure_workspace(conn, "acme")
        return workspace_id, {n: repositories.ensure(conn, workspace_id, n) for n in names}


def bulk_insert(
    storage: Database, workspace_id: int, repository_id: int, name: str, count: int
) -> None:
    """`count` runs on main, oldest first, as uploads would have stored them."""
    start = datetime(2026, 1, 1, tzinfo=timezone.utc)
    previous: dict[str, float] = {}
    batch = 500
    for first in range(0, count, batch):
        with storage.write() as conn:
            for i in range(first, min(first + batch, count)):
                blocked = i % 500 == 499
                accepted = i % 1000 == 749
                drift = 1 + 0.00002 * i + (0.5 if blocked else 0.0)
                doc = make_results(
                    repository=name,
                    sha=hashlib.sha1(f"{name}{i}".encode()).hexdigest(),
                    environment="cpu-a" if i < count // 2 else "cpu-b",
                    median_ns=1e6 * drift,
                    seed=i,
                )
                medians = {
                    c.id: statistics.median(c.samples.ns) for c in doc.configurations if c.samples
                }
                comparisons = [
                    {"id": cid, "ratio": m / previous[cid] if cid in previous else None}
                    for cid, m in medians.items()
                ]
                if not blocked:
                    previous = medians
                when = start + timedelta(minutes=10 * i)
                answer = {
                    "run_id": str(doc.run_id),
                    "tier": "BLOCK" if blocked else "PASS",
                    "reasons": ["slower beyond the block threshold"] if blocked else [],
                    "comparisons": comparisons,
                    "baseline": None,
                    "is_baseline": not blocked,
                    "url": f"/runs/{doc.run_id}",
                    "receipt": "",
                }
                data = body(doc)
                run = NewRun(
                    run_id=str(doc.run_id),
                    workspace_id=workspace_id,
                    repository_id=repository_id,
                    token_id=None,
                    sha=doc.git.sha,
                    branch="main",
                    base_branch=None,
                    event="push",
                    pr_number=None,
                    environment_key=doc.environment.key,
                    workload=doc.workload.path,
                    tier=str(answer["tier"]),
                    answer=answer,
                    document=data,
                    body_sha256=hashlib.sha256(data).hexdigest(),
                    signature="sha256=bulk",
                    created_at=when,
                    received_at=when,
                    baseline_branch=None if blocked else "main",
                )
                stored_runs.insert_run(conn, run)
                if accepted:
                    stored_runs.mark_accepted(
                        conn,
                        run.run_id,
                        branch="main",
                        when=when,
                        accepted_by="bench",
                        reason="intended",
                        via="api",
                    )


def timed_get(client: httpx.Client, path: str) -> tuple[float, httpx.Response]:
    t0 = time.perf_counter()
    response = client.get(path)
    elapsed = time.perf_counter() - t0
    response.raise_for_status()
    return elapsed, response


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--small", type=int, default=100)
    parser.add_argument("--requests", type=int, default=40)
    parser.add_argument("--db", choices=["sqlite", "postgresql"], default="sqlite")
    args = parser.parse_args(argv)

    workdir = Path(tempfile.mkdtemp(prefix="rnx-dash-bench-"))
    drop = None
    if args.db == "sqlite":
        url = f"sqlite:///{workdir / 'bench.db'}"
    else:
        url, drop = fresh_postgres_schema(postgres_base_url())
    try:
        viewer = create_token(url, viewer=True)
        big, small = "acme/long-history", "acme/short-history"
        storage = open_database(url)
        workspace_id, ids = _repo_ids(storage, [big, small])
        t0 = time.perf_counter()
        bulk_insert(storage, workspace_id, ids[big], big, args.runs)
        bulk_insert(storage, workspace_id, ids[small], small, args.small)
        with storage.read() as conn:
            stored = stored_runs.count(conn)
        if storage.dialect == "postgresql":
            # What autovacuum does within a minute of a bulk load; measured right after the
            # load, PostgreSQL would otherwise plan from the statistics of an empty table.
            with storage.engine.connect() as conn:
                conn.execute(text("ANALYZE runs"))
                conn.commit()
        storage.close()
        print(f"inserted {stored} runs in {time.perf_counter() - t0:.1f} s ({args.db})")

        server = start_server(url, workdir)
        try:
            headers = {"Authorization": f"Bearer {viewer.secret}"}
            pages = {args.runs: f"/repos/{big}", args.small: f"/repos/{small}"}
            cold: dict[int, float] = {}
            sizes: dict[int, tuple[int, int]] = {}
            times: dict[int, list[float]] = {n: [] for n in pages}
            with httpx.Client(base_url=server.url, headers=headers, timeout=60) as client:
                for n, path in pages.items():
                    cold[n], response = timed_get(client, path)
                    sizes[n] = (len(response.content), response.text.count('class="pt '))
                for _ in range(3):  # warm-up
                    for path in pages.values():
                        timed_get(client, path)
                overview: list[float] = []
                for _ in range(args.requests):
                    for n, path in pages.items():
                        times[n].append(timed_get(client, path)[0])
                    overview.append(timed_get(client, "/")[0])
        finally:
            server.stop()
    finally:
        if drop is not None:
            drop()
        shutil.rmtree(workdir, ignore_errors=True)

    print(f"history page over loopback, {args.requests} requests each, alternating ({args.db}):")
    print(f"{'runs':>8} {'cold ms':>9} {'median ms':>10} {'p95 ms':>8} {'KiB':>6} {'points':>7}")
    for n in pages:
        print(
            f"{n:>8} {cold[n] * 1000:>9.1f} {statistics.median(times[n]) * 1000:>10.1f} "
            f"{percentile(times[n], 0.95) * 1000:>8.1f} {sizes[n][0] / 1024:>6.0f} {sizes[n][1]:>7}"
        )
    ratio_median = statistics.median(times[args.runs]) / statistics.median(times[args.small])
    ratio_p95 = percentile(times[args.runs], 0.95) / percentile(times[args.small], 0.95)
    print(f"ratio {args.runs} / {args.small} runs: median {ratio_median:.2f}, p95 {ratio_p95:.2f}")
    print(
        f"overview of the workspace ({stored} runs): "
        f"median {statistics.median(overview) * 1000:.1f} ms, "
        f"p95 {percentile(overview, 0.95) * 1000:.1f} ms"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
