"""Soak: concurrent uploaders and readers against the real gate server on loopback for minutes,
then prove nothing was lost or duplicated, and show latency, throughput and memory over time.

    .venv/bin/python -m benchmarks.reliability.soak --database sqlite [--seconds 180] [--servers 1]
    .venv/bin/python -m benchmarks.reliability.soak --database postgresql --servers 2 [--seconds
    180]

--uploaders threads upload signed results documents (4 configurations x 20 samples: pushes to
main that become baselines, and pull-request runs gated against them), round-robin over the
--servers `rnx serve` processes on one database. --readers threads read stored runs through
the API (a CI token) and the repository's history page (a viewer token). Every --window
seconds: uploads/s, p50/p99 of uploads and of reads, errors, and each server's RSS (from
/proc). At the end: every acknowledged upload is stored once, nothing else is stored, and the
RSS of the last quarter is compared with the third (the first half is warm-up). Bounded by
--seconds and --max-uploads.
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from sqlalchemy import func, select

from gate_server.db import Database
from gate_server.db.schema import runs
from testbed.factories import body, make_results
from testbed.gate_helpers import (
    create_token,
    fresh_postgres_schema,
    postgres_base_url,
    signed_headers,
    start_server,
)

ROOT = Path(__file__).resolve().parents[2]

REPO = "acme/kernels"
CONFIGS = [("pytorch_eager", dt, bs) for dt in ("float32", "float16") for bs in (1, 8)]


@dataclass
class Sample:
    at: float
    kind: str  # "upload" | "read"
    seconds: float
    ok: bool


@dataclass
class Shared:
    samples: list[Sample] = field(default_factory=list)
    acked: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    rss: list[tuple[float, list[int]]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    uploads_left: int = 0


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    k = (len(ordered) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def uploader(
    n: int, urls: list[str], secret: str, shared: Shared, start: float, stop: float
) -> None:
    rng = random.Random(n)
    i = 0
    with httpx.Client(timeout=30) as client:
        while time.monotonic() < stop:
            with shared.lock:
                if shared.uploads_left <= 0:
                    return
                shared.uploads_left -= 1
            i += 1
            pr = rng.random() < 0.5
            doc = make_results(
                repository=REPO,
                branch=f"feature-{n}-{i}" if pr else "main",
                pr_number=1000 * n + i if pr else None,
                sha=f"{n:08x}{i:032x}",
                configs=CONFIGS,
                n=20,
                seed=rng.randrange(2**31),
                slowdown=rng.choice([1.0, 1.0, 1.0, 1.3]),
            )
            raw = body(doc)
            url = urls[i % len(urls)]
            t0 = time.monotonic()
            try:
                r = client.post(
                    f"{url}/api/v1/runs", content=raw, headers=signed_headers(secret, raw)
                )
                ok = r.status_code == 201
                why = f"upload {r.status_code}: {r.text[:120]}"
            except httpx.HTTPError as e:
                ok, why = False, f"upload {type(e).__name__}: {e}"
            took = time.monotonic() - t0
            with shared.lock:
                shared.samples.append(Sample(t0 - start, "upload", took, ok))
                if ok:
                    shared.acked.append(str(doc.run_id))
                else:
                    shared.errors.append(why)


def reader(
    n: int, urls: list[str], ci: str, viewer: str, shared: Shared, start: float, stop: float
) -> None:
    rng = random.Random(1000 + n)
    with httpx.Client(timeout=30) as client:
        while time.monotonic() < stop:
            with shared.lock:
                known = shared.acked[-200:]
            url = rng.choice(urls)
            t0 = time.monotonic()
            try:
                if known and rng.random() < 0.7:
                    r = client.get(
                        f"{url}/api/v1/runs/{rng.choice(known)}",
                        headers={"Authorization": f"Bearer {ci}"},
                    )
                else:
                    r = client.get(
                        f"{url}/repos/{REPO}?branch=main",
                        headers={"Authorization": f"Bearer {viewer}"},
                    )
                ok, why = r.status_code == 200, f"read {r.status_code}: {r.text[:120]}"
            except httpx.HTTPError as e:
                ok, why = False, f"read {type(e).__name__}: {e}"
            took = time.monotonic() - t0
            with shared.lock:
                shared.samples.append(Sample(t0 - start, "read", took, ok))
                if not ok:
                    shared.errors.append(why)
            time.sleep(0.02)  # readers are people and dashboards, not a flood


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--database", choices=["sqlite", "postgresql"], default="sqlite")
    p.add_argument("--servers", type=int, default=1)
    p.add_argument("--seconds", type=float, default=180)
    p.add_argument("--uploaders", type=int, default=4)
    p.add_argument("--readers", type=int, default=4)
    p.add_argument("--window", type=float, default=30)
    p.add_argument("--max-uploads", type=int, default=20_000)
    args = p.parse_args(argv)

    work = Path(tempfile.mkdtemp(prefix="rnx-soak-"))
    drop = None
    if args.database == "sqlite":
        db = f"sqlite:///{work / 'soak.db'}"
    else:
        db, drop = fresh_postgres_schema(postgres_base_url())
    ci = create_token(db)
    viewer = create_token(db, viewer=True)
    servers = [start_server(db, work) for _ in range(args.servers)]
    urls = [s.url for s in servers]
    shared = Shared(uploads_left=args.max_uploads)
    start = time.monotonic()
    stop = start + args.seconds
    try:
        threads = [
            threading.Thread(target=uploader, args=(n, urls, ci.secret, shared, start, stop))
            for n in range(args.uploaders)
        ] + [
            threading.Thread(
                target=reader, args=(n, urls, ci.secret, viewer.secret, shared, start, stop)
            )
            for n in range(args.readers)
        ]
        for t in threads:
            t.start()
        while time.monotonic() < stop:
            shared.rss.append((time.monotonic() - start, [rss_kib(s.process.pid) for s in servers]))
            time.sleep(min(5.0, max(0.0, stop - time.monotonic())))
        for t in threads:
            t.join()
        shared.rss.append((time.monotonic() - start, [rss_kib(s.process.pid) for s in servers]))
        alive = [s.process.poll() is None for s in servers]
    finally:
        for s in servers:
            s.stop()

    storage = Database(db)
    try:
        with storage.read() as conn:
            stored = list(conn.execute(select(runs.c.run_id)).scalars())
            distinct = conn.execute(select(func.count(func.distinct(runs.c.run_id)))).scalar_one()
    finally:
        storage.close()
        if drop is not None:
            drop()

    print(
        f"soak: {args.database}, {args.servers} server process(es), {args.uploaders} uploaders, "
        f"{args.readers} readers, {args.seconds:.0f} s; latencies in ms"
    )
    print(
        "| window (s) | uploads/s | upload p50 | upload p99 | reads/s | read p50 | read p99 "
        "| errors | RSS MiB per server |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    edges = [w * args.window for w in range(int(args.seconds // args.window) + 1)]
    if edges[-1] < args.seconds:
        edges.append(args.seconds)
    for lo, hi in zip(edges, edges[1:], strict=False):
        inside = [s for s in shared.samples if lo <= s.at < hi]
        ups = [s.seconds * 1000 for s in inside if s.kind == "upload" and s.ok]
        reads = [s.seconds * 1000 for s in inside if s.kind == "read" and s.ok]
        errors = sum(not s.ok for s in inside)
        rss = [r for t, r in shared.rss if lo <= t < hi] or [shared.rss[-1][1]]
        mib = "/".join(f"{r / 1024:.0f}" for r in rss[-1])
        print(
            f"| {lo:.0f}-{hi:.0f} | {len(ups) / (hi - lo):.1f} | {percentile(ups, 0.5):.0f} | "
            f"{percentile(ups, 0.99):.0f} | {len(reads) / (hi - lo):.1f} | "
            f"{percentile(reads, 0.5):.0f} | {percentile(reads, 0.99):.0f} | {errors} | {mib} |"
        )
    ups = [s.seconds * 1000 for s in shared.samples if s.kind == "upload" and s.ok]
    reads = [s.seconds * 1000 for s in shared.samples if s.kind == "read" and s.ok]
    # Memory: caches fill while the first runs arrive (the dashboard's summaries, SQLAlchemy's
    # compiled statements, the allocator's arenas), so the first half is warm-up. "Flat" means
    # the last quarter is within 5% of the third; both ratios are printed.
    quarter = args.seconds / 4
    growth, warmup = [], []
    for i in range(len(servers)):

        def mean_rss(lo: float, hi: float, i: int = i) -> float:
            values = [r[i] for t, r in shared.rss if lo <= t < hi] or [shared.rss[-1][1][i]]
            return statistics.mean(values)

        first_half = mean_rss(0, 2 * quarter)
        third, last = mean_rss(2 * quarter, 3 * quarter), mean_rss(3 * quarter, args.seconds + 1)
        warmup.append(third / first_half)
        growth.append(last / third)
    acked = set(shared.acked)
    lost = acked - set(stored)
    extra = set(stored) - acked
    print(
        f"\ntotal: {len(ups)} uploads ({len(ups) / args.seconds:.1f}/s), upload p50 "
        f"{percentile(ups, 0.5):.0f} ms p99 {percentile(ups, 0.99):.0f} ms; {len(reads)} reads, "
        f"p50 {percentile(reads, 0.5):.0f} ms p99 {percentile(reads, 0.99):.0f} ms"
    )
    print(
        f"errors: {len(shared.errors)}; acknowledged {len(acked)}, stored {len(stored)} "
        f"({distinct} distinct), lost {len(lost)}, unexpected {len(extra)}; servers alive "
        f"{alive}; RSS third quarter / first half: "
        + ", ".join(f"{g:.3f}" for g in warmup)
        + "; RSS last quarter / third quarter: "
        + ", ".join(f"{g:.3f}" for g in growth)
    )
    for e in list(dict.fromkeys(shared.errors))[:10]:
        print("  ERROR", e)
    flat = all(g < 1.05 for g in growth)
    ok = not shared.errors and not lost and not extra and distinct == len(stored) and all(alive)
    print(f"result: {'OK' if ok and flat else 'FAILED'} (memory {'flat' if flat else 'GROWING'})")
    return 0 if ok and flat else 1


if __name__ == "__main__":
    raise SystemExit(main())
