"""Load on the real gate server over loopback: upload latency (p50/p99) and uploads per second,
on SQLite and PostgreSQL, with an empty database and with 1,000,000 stored runs.

    .venv/bin/python -m benchmarks.server.server_load [--uploads 100] [--runs 1000000]
    .venv/bin/python -m benchmarks.server.server_load --synchronous [--uploads 100]
    .venv/bin/python -m benchmarks.server.server_load --upload-slots [--uploads 100]
    .venv/bin/python -m benchmarks.server.server_load --db postgresql --upload-slots
    .venv/bin/python -m benchmarks.server.server_load --db postgresql --round-trips
    .venv/bin/python -m benchmarks.server.server_load --db postgresql --against /tmp/old
    .venv/bin/python -m benchmarks.server.server_load --db postgresql --variant 'import ...; ...'

--synchronous: SQLite only, the cost of durability. Two empty databases, each behind its own
`rnx serve`: one with the server's PRAGMA synchronous=FULL (an acknowledged upload survives a
power loss), one started with NORMAL (the setting before; the last commits before a power
loss could vanish); the same uploads to both, alternating, then threaded throughput on each.
--upload-slots: the server's bound on uploads ingested at once per process
(gate_server/http/api.py UPLOADS_AT_ONCE) against anyio's thread pool bound of 40, on the first
engine of --db. --round-trips (PostgreSQL): an upload's lookups without a transaction and
pooled connections pinged only after a second idle (gate_server/db/engine.py), against a
transaction around each lookup and a ping on every checkout (pool_pre_ping), as before.
--against DIR: this tree's server against one whose code comes from DIR (`git worktree add
--detach DIR COMMIT`; DIR goes first on the server process's PYTHONPATH), so two commits are
compared in one run, alternating, on a machine whose speed changes from minute to minute.
--variant CODE: this tree's server against the same code with CODE run in the server process
before it starts (a constant set, a function replaced): an idea tried side by side before it
is written (`a.LOOP_BODY_BYTES = 0` after `import gate_server.http.api as a`: every upload in a
worker thread, as before they moved into the event loop). The two servers of a side-by-side mode
each have an empty database of that engine.

Per engine, two databases each behind its own `rnx serve` process: one empty, one holding
1,000,000 filler runs. Each upload is a results document of 8 configurations x 30 samples, a
pull-request run that the server re-gates against the same six baseline runs on both sides;
the same bytes go to both servers, alternating which goes first, so the only difference is how
many rows the baseline lookup has to get past, and background load falls on both alike. The
filler runs are written straight into the runs table with one INSERT ... SELECT; a quarter of
them belong to the measured repository, and ~8,000 are older baselines for the very same
(repository, branch, environment, workload), as many again of another workload. Everything
is bounded by counts and by --max-seconds. Throughput: --throughput-uploads from --threads
threads to each server and to a bare Starlette echo of the same bodies, in --rounds rounds
whose order alternates, so the machine's changing load falls on all three alike.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import text

from gate_server.db import Database
from gate_server.db import runs as stored_runs
from gate_server.http.api import UPLOADS_AT_ONCE
from testbed.factories import body, make_results
from testbed.gate_helpers import (
    create_token,
    free_port,
    fresh_postgres_schema,
    postgres_base_url,
    signed_headers,
    start_server,
)

ROOT = Path(__file__).resolve().parents[2]

REPO = "acme/kernels"
ENV = "bench-env"
WORKLOAD = "kernels/attention.py"  # the factory's workload: the uploads' baselines are its


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    k = (len(ordered) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


class Client:
    def __init__(self, url: str, secret: str):
        self.secret = secret
        self.local = threading.local()
        self.url = url

    def http(self) -> httpx.Client:
        if not hasattr(self.local, "client"):
            self.local.client = httpx.Client(base_url=self.url, timeout=120)
        return self.local.client  # type: ignore[no-any-return]

    def upload(self, data: bytes) -> tuple[float, dict[str, Any]]:
        start = time.perf_counter()
        r = self.http().post(
            "/api/v1/runs", content=data, headers=signed_headers(self.secret, data)
        )
        elapsed = time.perf_counter() - start
        if r.status_code != 201:
            raise RuntimeError(f"upload failed: {r.status_code} {r.text[:300]}")
        return elapsed, r.json()

    def connect(self, everyone: threading.Barrier) -> None:
        """This thread's HTTP client and its connection, opened before a timed window: making
        an httpx.Client builds a TLS context, even for plain HTTP, and inside the window four
        of them held back the first uploads of every round."""
        self.http().get("/healthz")  # any answer: the connection is open and kept alive
        everyone.wait()  # one call per worker thread: each waits until all threads have one


def pr_bodies(count: int, seed0: int) -> list[bytes]:
    return [
        body(
            make_results(
                repository=REPO,
                environment=ENV,
                event="pull_request",
                pr_number=1 + i % 500,
                branch=f"feature/{i}",
                seed=seed0 + i,
            )
        )
        for i in range(count)
    ]


def latency(pair: list[Client], count: int, seed0: int, deadline: float) -> list[dict[str, float]]:
    """The same documents to both servers, alternating which goes first."""
    bodies = pr_bodies(count + 1, seed0)
    for client in pair:
        client.upload(bodies[0])  # warm: imports, caches, connections
    times: list[list[float]] = [[] for _ in pair]
    for i, data in enumerate(bodies[1:]):
        if time.monotonic() > deadline:
            break
        order = list(range(len(pair)))
        for k in order if i % 2 == 0 else order[::-1]:
            elapsed, answer = pair[k].upload(data)
            assert len(answer["baseline"]["run_ids"]) == 6, answer["baseline"]
            times[k].append(elapsed)
    return [
        {
            "n": len(t),
            "p50_ms": 1000 * statistics.median(t),
            "p99_ms": 1000 * percentile(t, 0.99),
            "mean_ms": 1000 * statistics.fmean(t),
        }
        for t in times
    ]


def process_cpu_s(pid: int) -> float:
    """CPU time (user + system) a process has used so far, from /proc (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def context_switches(pid: int) -> int:
    """Context switches of all of a process's threads so far, from /proc (Linux): a thread
    that waits for the GIL, a lock or I/O gives up its core, and each costs the kernel's time."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            status = (task / "status").read_text()
        except FileNotFoundError:  # a thread that ended meanwhile
            continue
        for line in status.splitlines():
            if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")):
                total += int(line.split()[1])
    return total


def throughput(
    client: Client, count: int, threads: int, seed0: int, pid: int | None = None
) -> dict[str, float]:
    """Uploads per second from `threads` threads; with the server's `pid`, also the CPU time
    the server process spent per upload, which the neighbours on a shared machine do not
    change (the machine's load only adds waiting)."""
    bodies = pr_bodies(count, seed0)
    with ThreadPoolExecutor(max_workers=threads) as pool:
        everyone = threading.Barrier(threads)
        list(pool.map(lambda _: client.connect(everyone), range(threads)))
        cpu0 = process_cpu_s(pid) if pid is not None else 0.0
        switches0 = context_switches(pid) if pid is not None else 0
        start = time.perf_counter()
        list(pool.map(client.upload, bodies))
        elapsed = time.perf_counter() - start
    out = {"n": count, "threads": threads, "seconds": elapsed, "uploads_per_s": count / elapsed}
    if pid is not None:
        cpu = process_cpu_s(pid) - cpu0
        out["cpu_ms_per_upload"] = 1000 * cpu / count
        out["uploads_per_cpu_s"] = count / cpu if cpu > 0 else float("inf")
        out["switches_per_upload"] = (context_switches(pid) - switches0) / count
    return out


@contextmanager
def echo_server() -> Iterator[tuple[Client, int]]:
    """A bare Starlette echo (benchmarks/server/echo_app.py) in one uvicorn process: (client,
    pid)."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "benchmarks.server.echo_app:app", "--port", str(port)]
        + ["--log-level", "warning"],
        cwd=ROOT,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx.post(f"{url}/api/v1/runs", content=b"{}", timeout=2)
                break
            except httpx.TransportError:
                if time.monotonic() > deadline:
                    raise RuntimeError("the echo app did not start") from None
                time.sleep(0.1)
        yield Client(url, "unused"), proc.pid
    finally:
        proc.terminate()
        proc.wait()


def alternating_throughput(
    clients: list[Client], pids: list[int], args: argparse.Namespace
) -> list[dict[str, float]]:
    """Threaded uploads to each server in args.rounds rounds of the same bodies, the order
    reversed every round, so a change in the machine's load falls on every server alike."""
    per_round = max(1, args.throughput_uploads // args.rounds)
    sums = [{"n": 0.0, "seconds": 0.0, "cpu_ms": 0.0, "switches": 0.0} for _ in clients]
    for r in range(args.rounds):
        order = list(range(len(clients)))
        for k in order if r % 2 == 0 else order[::-1]:
            t = throughput(clients[k], per_round, args.threads, 30_000 + per_round * r, pids[k])
            sums[k]["n"] += t["n"]
            sums[k]["seconds"] += t["seconds"]
            sums[k]["cpu_ms"] += t["cpu_ms_per_upload"] * t["n"]
            sums[k]["switches"] += t["switches_per_upload"] * t["n"]
    return [
        {
            "n": s["n"],
            "threads": args.threads,
            "seconds": s["seconds"],
            "uploads_per_s": s["n"] / s["seconds"],
            "cpu_ms_per_upload": s["cpu_ms"] / s["n"],
            "uploads_per_cpu_s": 1000 * s["n"] / s["cpu_ms"] if s["cpu_ms"] > 0 else math.inf,
            "switches_per_upload": s["switches"] / s["n"],
        }
        for s in sums
    ]


def bulk_insert(storage: Database, runs: int, repo_id: int, ws_id: int, others: list[int]) -> None:
    """`runs` filler runs in one INSERT ... SELECT: older than every real run, so the real
    baselines stay the newest, but in the same repository and environment often enough that
    an unindexed lookup would have to wade through them."""
    cols = (
        "run_id, workspace_id, repository_id, token_id, sha, branch, base_branch, event, "
        "environment_key, workload, tier, answer, document, body_sha256, signature, "
        "created_at, received_at, baseline_branch, baseline_at"
    )
    first_other, n_other = others[0], len(others)
    if storage.dialect == "postgresql":
        stamp = "timestamptz '2020-01-01' + i * interval '1 second'"
        sql = f"""
        INSERT INTO runs ({cols})
        SELECT lpad(to_hex(i), 8, '0') || '-0000-4000-8000-' || lpad(to_hex(i), 12, '0'),
               {ws_id},
               CASE WHEN i % 4 = 0 THEN {repo_id} ELSE {first_other} + i % {n_other} END,
               NULL, md5(i::text),
               CASE WHEN i % 10 = 0 THEN 'main' ELSE 'feature/' || (i % 5000) END, 'main',
               CASE WHEN i % 10 = 0 THEN 'push' ELSE 'pull_request' END,
               CASE WHEN i % 3 = 0 THEN '{ENV}' ELSE 'env-' || (i % 50) END,
               CASE WHEN i % 8 = 0 THEN '{WORKLOAD}' ELSE 'kernels/other.py' END,
               'PASS', '{{}}', convert_to('{{}}', 'UTF8'), md5(i::text) || md5(i::text),
               'sha256=filler', {stamp}, {stamp},
               CASE WHEN i % 10 = 0 THEN 'main' END,
               CASE WHEN i % 10 = 0 THEN {stamp} END
        FROM generate_series(1, {runs}) AS i
        """
    else:
        stamp = "strftime('%Y-%m-%d %H:%M:%f000', '2020-01-01', '+' || i || ' seconds')"
        sql = f"""
        WITH RECURSIVE seq(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM seq WHERE i < {runs})
        INSERT INTO runs ({cols})
        SELECT printf('%08x-0000-4000-8000-%012x', i, i), {ws_id},
               CASE WHEN i % 4 = 0 THEN {repo_id} ELSE {first_other} + i % {n_other} END,
               NULL, printf('%040x', i),
               CASE WHEN i % 10 = 0 THEN 'main' ELSE 'feature/' || (i % 5000) END, 'main',
               CASE WHEN i % 10 = 0 THEN 'push' ELSE 'pull_request' END,
               CASE WHEN i % 3 = 0 THEN '{ENV}' ELSE 'env-' || (i % 50) END,
               CASE WHEN i % 8 = 0 THEN '{WORKLOAD}' ELSE 'kernels/other.py' END,
               'PASS', '{{}}', CAST('{{}}' AS BLOB), printf('%064x', i), 'sha256=filler',
               {stamp}, {stamp},
               CASE WHEN i % 10 = 0 THEN 'main' END,
               CASE WHEN i % 10 = 0 THEN {stamp} END
        FROM seq
        """
    with storage.write() as conn:
        conn.execute(text(sql))
    with storage.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.exec_driver_sql("ANALYZE")


def prepare(url: str) -> tuple[str, int, int, list[int]]:
    """Tokens for the measured repository and 20 others: (secret, repo id, workspace, others)."""
    token = create_token(url, workspace="bench", repository=REPO, branches=("main",))
    for i in range(20):
        create_token(url, workspace="bench", repository=f"other/repo-{i}", branches=("main",))
    storage = Database(url)
    try:
        with storage.read() as conn:
            repo_ids = dict(conn.execute(text("SELECT name, id FROM repositories")).all())
            ws_id = conn.execute(text("SELECT id FROM workspaces WHERE name='bench'")).scalar_one()
    finally:
        storage.close()
    return token.secret, repo_ids[REPO], ws_id, [v for k, v in repo_ids.items() if k != REPO]


def bench_engine(
    name: str, urls: list[str], workdir: Path, args: argparse.Namespace
) -> dict[str, Any]:
    deadline = time.monotonic() + args.max_seconds / len(args.db)
    prepared = [prepare(url) for url in urls]
    out: dict[str, Any] = {"database": name}
    servers = []
    try:
        servers = [start_server(url, workdir) for url in urls]
        pair = [Client(server.url, p[0]) for server, p in zip(servers, prepared, strict=True)]
        for i in range(6):  # six baseline pushes: the lookup's answer in every upload below
            doc = body(
                make_results(repository=REPO, environment=ENV, branch="main", seed=10_000 + i)
            )
            for client in pair:
                client.upload(doc)
        full = Database(urls[1])
        try:
            t0 = time.perf_counter()
            _, repo_id, ws_id, others = prepared[1]
            bulk_insert(full, args.runs, repo_id, ws_id, others)
            out["bulk_insert_s"] = time.perf_counter() - t0
            with full.read() as conn:
                out["stored_runs"] = stored_runs.count(conn)
            key = stored_runs.BaselineKey(repo_id, "main", ENV, WORKLOAD)
            out["plan"] = full.explain(stored_runs.baselines_query(key, 6))
        finally:
            full.close()
        out["empty"], out["full"] = latency(pair, args.uploads, 20_000, deadline)
        out["ratio_p50"] = out["full"]["p50_ms"] / out["empty"]["p50_ms"]
        out["ratio_p99"] = out["full"]["p99_ms"] / out["empty"]["p99_ms"]
        pids = [server.process.pid for server in servers]
        with echo_server() as (echo, echo_pid):
            flows = alternating_throughput([*pair, echo], [*pids, echo_pid], args)
        out["throughput"], out["throughput_full"], out["echo"] = flows
    finally:
        for server in servers:
            server.stop()
    return out


# Side-by-side modes: the server's value of one constant against another, set in the second
# server's process before it starts (start_server's prelude).
# (column, ratio, [(name, prelude) for each of the two servers])
SideBySide = tuple[str, str, list[tuple[str, str | None]]]
SIDE_BY_SIDE: dict[str, SideBySide] = {
    "synchronous": (
        "synchronous",
        "FULL / NORMAL",
        [
            ("FULL", None),
            ("NORMAL", "import gate_server.db.engine as e; e.SQLITE_SYNCHRONOUS = 'NORMAL'"),
        ],
    ),
    "upload_slots": (
        "uploads at once",
        f"{UPLOADS_AT_ONCE} / 40",
        # 40: anyio's thread pool, the bound every upload had before
        [
            (str(UPLOADS_AT_ONCE), None),
            ("40", "import gate_server.http.api as a; a.UPLOADS_AT_ONCE = 40"),
        ],
    ),
    "round_trips": (
        "round trips",
        "now / before",
        # before: a transaction around each lookup, and a ping on every checkout
        [
            ("now", None),
            (
                "before",
                "import gate_server.db.engine as e; "
                "e.Database.lookup = e.Database.read; e.PING_AFTER_IDLE_S = 0.0",
            ),
        ],
    ),
}


def bench_side_by_side(
    workdir: Path,
    args: argparse.Namespace,
    side_by_side: SideBySide,
    envs: tuple[dict[str, str] | None, ...] = (None, None),
) -> int:
    """Two servers on two empty databases (of the first engine in --db) that differ in one
    constant (a prelude) or in their code (an environment with PYTHONPATH), the same uploads to
    both: sequential latency, then threaded throughput in alternating rounds."""
    column, ratio, modes = side_by_side
    engine = args.db[0]
    drops = []
    if engine == "sqlite":
        urls = [f"sqlite:///{workdir / f'side-{k}.db'}" for k in range(len(modes))]
    else:
        made = [fresh_postgres_schema(postgres_base_url()) for _ in modes]
        urls, drops = [m[0] for m in made], [m[1] for m in made]
    secrets = [prepare(url)[0] for url in urls]
    servers = []
    try:
        for url, (_, prelude), env in zip(urls, modes, envs, strict=True):
            servers.append(start_server(url, workdir, prelude=prelude, env=env))
        pair = [Client(server.url, secret) for server, secret in zip(servers, secrets, strict=True)]
        for i in range(6):
            doc = body(
                make_results(repository=REPO, environment=ENV, branch="main", seed=10_000 + i)
            )
            for client in pair:
                client.upload(doc)
        deadline = time.monotonic() + args.max_seconds
        timed = latency(pair, args.uploads, 20_000, deadline)
        pids = [server.process.pid for server in servers]
        flows = alternating_throughput(pair, pids, args)
    finally:
        for server in servers:
            server.stop()
        for drop in drops:
            drop()
    print(
        f"{engine}, upload = 8 configurations x 30 samples re-gated against 6 baselines; "
        f"{args.uploads} sequential uploads to each server, alternating; then "
        f"{args.throughput_uploads} uploads from {args.threads} threads to each, in "
        f"{args.rounds} alternating rounds; load average {os.getloadavg()[0]:.1f}"
    )
    print(
        f"{column:<16} {'n':>4} {'p50 ms':>8} {'p99 ms':>8} {'mean ms':>8} {'uploads/s':>10} "
        f"{'CPU ms/upload':>14} {'switches/upload':>16}"
    )
    for (name, _), t, f in zip(modes, timed, flows, strict=True):
        print(
            f"{name:<16} {t['n']:>4} {t['p50_ms']:>8.1f} {t['p99_ms']:>8.1f} "
            f"{t['mean_ms']:>8.1f} {f['uploads_per_s']:>10.2f} {f['cpu_ms_per_upload']:>14.2f} "
            f"{f['switches_per_upload']:>16.1f}"
        )
    print(
        f"{ratio}: p50 {timed[0]['p50_ms'] / timed[1]['p50_ms']:.2f}, "
        f"throughput {flows[0]['uploads_per_s'] / flows[1]['uploads_per_s']:.2f}"
    )
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", default="sqlite,postgresql")
    parser.add_argument("--uploads", type=int, default=100, help="timed uploads per server")
    parser.add_argument("--throughput-uploads", type=int, default=200)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--runs", type=int, default=1_000_000, help="filler runs")
    parser.add_argument("--max-seconds", type=float, default=900)
    parser.add_argument("--json", help="also write the figures to this file")
    parser.add_argument("--rounds", type=int, default=4, help="throughput rounds, alternating")
    parser.add_argument(
        "--synchronous", action="store_true", help="SQLite: synchronous FULL against NORMAL"
    )
    parser.add_argument(
        "--upload-slots",
        action="store_true",
        help="the server's bound on uploads ingested at once against the thread pool's 40 "
        "(use --db)",
    )
    parser.add_argument(
        "--round-trips",
        action="store_true",
        help="PostgreSQL: an upload's round trips now against before (use --db postgresql)",
    )
    parser.add_argument(
        "--variant",
        metavar="CODE",
        help="this tree's server against one that runs CODE (Python) before it starts: a "
        "constant set or a function replaced, to try an idea side by side (use --db)",
    )
    parser.add_argument(
        "--against",
        metavar="DIR",
        help="this tree's server against one run from DIR, a checkout of other code (use --db)",
    )
    args = parser.parse_args()
    args.db = [d.strip() for d in args.db.split(",") if d.strip()]
    if args.against:
        other = Path(args.against).resolve()
        code: SideBySide = (
            "code",
            f"this tree / {other.name}",
            [("this tree", None), (other.name, None)],
        )
        with tempfile.TemporaryDirectory() as tmp:
            # Put first, not alone: whatever else the server finds on PYTHONPATH (wheels
            # installed into a folder, benchmarks/server/server_load_device.sh) it still needs.
            path = os.pathsep.join([str(other), *filter(None, [os.environ.get("PYTHONPATH")])])
            return bench_side_by_side(Path(tmp), args, code, (None, {"PYTHONPATH": path}))
    if args.variant:
        variant: SideBySide = ("code", "now / variant", [("now", None), ("variant", args.variant)])
        with tempfile.TemporaryDirectory() as tmp:
            return bench_side_by_side(Path(tmp), args, variant)
    for mode, side_by_side in SIDE_BY_SIDE.items():
        if getattr(args, mode):
            with tempfile.TemporaryDirectory() as tmp:
                return bench_side_by_side(Path(tmp), args, side_by_side)

    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.db:
            drops = []
            if name == "sqlite":
                urls = [f"sqlite:///{Path(tmp) / f'bench-{k}.db'}" for k in ("empty", "full")]
            else:
                made = [fresh_postgres_schema(postgres_base_url()) for _ in range(2)]
                urls, drops = [m[0] for m in made], [m[1] for m in made]
            try:
                print(f"[{name}] running ...", file=sys.stderr, flush=True)
                results.append(bench_engine(name, urls, Path(tmp), args))
            finally:
                for drop in drops:
                    drop()

    print(
        f"upload = 8 configurations x 30 samples, re-gated against 6 baseline runs; "
        f"{args.uploads} sequential uploads to each of two servers (empty database; "
        f"{args.runs:,} filler runs), alternating; one server process each"
    )
    print(
        f"{'database':<11} {'stored runs':<16} {'n':>4} {'p50 ms':>8} {'p99 ms':>8} {'mean ms':>8}"
    )
    for r in results:
        for phase, label in (("empty", "empty"), ("full", f"{r['stored_runs']:,}")):
            p = r[phase]
            print(
                f"{r['database']:<11} {label:<16} {p['n']:>4} {p['p50_ms']:>8.1f} "
                f"{p['p99_ms']:>8.1f} {p['mean_ms']:>8.1f}"
            )
    print()
    for r in results:
        t, tf = r["throughput"], r["throughput_full"]
        print(
            f"{r['database']:<11} throughput: {t['uploads_per_s']:.2f} uploads/s empty, "
            f"{tf['uploads_per_s']:.2f} uploads/s with {r['stored_runs']:,} runs "
            f"({t['n']:.0f} uploads from {t['threads']} threads each, in {args.rounds} rounds "
            f"alternating with the other server and the echo); "
            f"bulk insert {r['bulk_insert_s']:.1f} s"
        )
        echo = r["echo"]["uploads_per_s"]
        print(
            f"{r['database']:<11} bare Starlette echo of the same bodies: {echo:.2f} uploads/s; "
            f"server / echo {t['uploads_per_s'] / echo:.3f} (empty), "
            f"{tf['uploads_per_s'] / echo:.3f} (full)"
        )
        e = r["echo"]
        print(
            f"{r['database']:<11} CPU of the server process per upload: "
            f"{t['cpu_ms_per_upload']:.2f} ms empty ({t['uploads_per_cpu_s']:.0f} uploads per "
            f"CPU-second), {tf['cpu_ms_per_upload']:.2f} ms full "
            f"({tf['uploads_per_cpu_s']:.0f}); echo {e['cpu_ms_per_upload']:.2f} ms "
            f"({e['uploads_per_cpu_s']:.0f}); context switches per upload "
            f"{t['switches_per_upload']:.1f} / {tf['switches_per_upload']:.1f}, echo "
            f"{e['switches_per_upload']:.1f}"
        )
        verdict = "ok" if r["ratio_p50"] <= 1.5 else "OVER 1.5"
        print(
            f"{r['database']:<11} {r['stored_runs']:,} runs / empty latency ratio: "
            f"p50 {r['ratio_p50']:.2f} ({verdict}), p99 {r['ratio_p99']:.2f}"
        )
        print(f"{r['database']:<11} baseline lookup plan: {r['plan']}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    return 0 if all(r["ratio_p50"] <= 1.5 for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
