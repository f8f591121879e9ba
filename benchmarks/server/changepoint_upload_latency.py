"""Does the change-point check slow the upload's answer? Two real servers side by side, one with
detection on (every baseline upload queues a detect_changes job that its outbox worker runs
right after) and one with RNX_DETECT_CHANGES=off, each over its own database holding the same
history; baseline uploads alternate between them, and the answer times are compared.

    .venv/bin/python -m benchmarks.server.changepoint_upload_latency [--history 150] [--pairs 40]
        [--database sqlite|postgresql] [--gap-ms 0] [--configs 8|48] [--flood 1]
        [--code main=/work/main --code branch=.]

--flood K sends K baseline pushes to a server at once in each turn (a flood of pushes), each
timed. --code NAME=PATH (twice) compares two checkouts instead, both with detection on (today's
main against this branch: one detection job per push against one waiting job per series).

--gap-ms is the pause after each pair: 0 sends uploads back to back, so each detection job
runs while the next uploads are answered (the worst case for the answer time). Prints the
answer times of both servers, their ratio with a bootstrap interval, and how long the
detection jobs took (from queued to done, and the handler alone).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import numpy as np

from gate_server.db import open_database, outbox
from gate_server.domain.change_points import DETECT_KIND
from testbed.code_sides import sides, start_code_server
from testbed.factories import DEFAULT_CONFIGS as DEFAULT
from testbed.factories import body, make_results
from testbed.gate_helpers import (
    create_token,
    fresh_postgres_schema,
    postgres_base_url,
    signed_headers,
    start_server,
)


def _flood(clients: list[httpx.Client], secret: str, documents: list[bytes]) -> list[float]:
    """The documents pushed at once, one client each; their answer times."""
    with ThreadPoolExecutor(len(documents)) as pool:
        return list(
            pool.map(lambda c, d: _upload(c, secret, 0, d), clients[: len(documents)], documents)
        )


def _database(kind: str, work: Path, name: str) -> tuple[str, Callable[[], None]]:
    if kind == "sqlite":
        return f"sqlite:///{work / (name + '.db')}", lambda: None
    return fresh_postgres_schema(postgres_base_url())


CONFIGS_48 = [
    (runtime, dtype, bs)
    for runtime in ("pytorch_eager", "onnxruntime", "torch_compile")
    for dtype in ("float32", "float16", "bfloat16", "float64")
    for bs in (1, 8, 32, 64)
]


def _document(n: int, configs: int) -> bytes:
    doc = make_results(seed=n, sha=f"{n:040x}", configs=CONFIGS_48 if configs == 48 else DEFAULT)
    return body(doc)


def _upload(client: httpx.Client, secret: str, n: int, data: bytes | None = None) -> float:
    """One baseline push (`data`, else one of 8 configurations); the seconds until its
    answer."""
    data = data if data is not None else _document(n, 8)
    started = time.perf_counter()
    r = client.post("/api/v1/runs", content=data, headers=signed_headers(secret, data))
    elapsed = time.perf_counter() - started
    if r.status_code != 201 or not r.json()["is_baseline"]:
        raise SystemExit(f"upload {n} answered {r.status_code}: {r.text[:300]}")
    return elapsed


def _wait_idle(url: str, timeout: float = 600.0) -> None:
    """Until no detection job is pending (the history's own jobs, before measuring)."""
    database = open_database(url)
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with database.read() as conn:
                if not outbox.jobs(conn, kind=DETECT_KIND, state=outbox.PENDING):
                    return
            time.sleep(0.2)
    finally:
        database.close()
    raise SystemExit("detection jobs still pending after the history was uploaded")


def _job_seconds(url: str, since: int) -> list[float]:
    """Queued-to-done seconds of the detection jobs after id `since`."""
    database = open_database(url)
    try:
        with database.read() as conn:
            jobs = [j for j in outbox.jobs(conn, kind=DETECT_KIND) if j.id > since]
    finally:
        database.close()
    return [(j.done_at - j.created_at).total_seconds() for j in jobs if j.done_at is not None]


def _last_job(url: str) -> int:
    database = open_database(url)
    try:
        with database.read() as conn:
            jobs = outbox.jobs(conn, kind=DETECT_KIND)
    finally:
        database.close()
    return jobs[-1].id if jobs else 0


def _handler_seconds(url: str, repeats: int = 5) -> float:
    """The detection handler alone on the full history, in this process (best of `repeats`)."""
    from gate_server.db.outbox import OutboxJob
    from gate_server.domain.change_points import handle_detect
    from gate_server.services import Services
    from gate_server.settings import ServerSettings

    svc = Services.start(ServerSettings(database_url=url))
    try:
        with svc.database.read() as conn:
            job: OutboxJob = outbox.jobs(conn, kind=DETECT_KIND)[-1]
        best = float("inf")
        for _ in range(repeats):
            started = time.perf_counter()
            handle_detect(svc, job)
            best = min(best, time.perf_counter() - started)
    finally:
        svc.close()
    return best


def _summary(label: str, seconds: list[float]) -> str:
    ms = np.array(seconds) * 1000
    return (
        f"{label:<15} n={len(ms)} median {np.median(ms):.1f} ms, mean {ms.mean():.1f} ms, "
        f"p90 {np.percentile(ms, 90):.1f} ms, max {ms.max():.1f} ms"
    )


def _ratio_interval(on: list[float], off: list[float], seed: int = 0) -> tuple[float, float, float]:
    """Median(on)/median(off) of the paired uploads, with a 95% bootstrap interval (pairs
    resampled together, so drift in the machine's load cancels)."""
    a, b = np.array(on), np.array(off)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(a), size=(5000, len(a)))
    boot = np.median(a[idx], axis=1) / np.median(b[idx], axis=1)
    return float(np.median(a) / np.median(b)), *np.percentile(boot, [2.5, 97.5]).tolist()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--history", type=int, default=150, help="baseline runs stored first")
    p.add_argument("--pairs", type=int, default=40, help="measured turns per server")
    p.add_argument("--database", choices=["sqlite", "postgresql"], default="sqlite")
    p.add_argument("--gap-ms", type=float, default=0.0, help="pause after each pair")
    p.add_argument("--configs", type=int, choices=[8, 48], default=8)
    p.add_argument("--flood", type=int, default=1, help="pushes sent at once per turn")
    p.add_argument("--code", action="append", help="NAME=PATH of a checkout (twice)")
    args = p.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="rnx-cp-latency-"))
    urls, drops, servers = {}, [], {}
    started = time.monotonic()
    code = sides(args.code) if args.code else None
    names = list(code) if code else ["on", "off"]
    try:
        for name in names:
            url, drop = _database(args.database, work, name)
            urls[name] = url
            drops.append(drop)
            if code:
                servers[name] = start_code_server(code[name], url, work)
            else:
                servers[name] = start_server(url, work, env={"RNX_DETECT_CHANGES": name})
        tokens = {name: create_token(url) for name, url in urls.items()}
        clients = {
            n: [httpx.Client(base_url=s.url, timeout=300) for _ in range(args.flood)]
            for n, s in servers.items()
        }
        for n in range(args.history):
            data = _document(n, args.configs)
            for name in names:
                _upload(clients[name][0], tokens[name].secret, n, data)
        for name in names:
            _wait_idle(urls[name])
        since = {name: _last_job(urls[name]) for name in names}
        times: dict[str, list[float]] = {name: [] for name in names}
        for k in range(args.pairs):
            first = args.history + k * args.flood
            documents = [_document(first + i, args.configs) for i in range(args.flood)]
            for name in names if k % 2 == 0 else names[::-1]:
                times[name] += _flood(clients[name], tokens[name].secret, documents)
            time.sleep(args.gap_ms / 1000)
        for name in names:
            _wait_idle(urls[name])
        jobs = {name: _job_seconds(urls[name], since[name]) for name in names}
        for each in clients.values():
            for c in each:
                c.close()
        handler = _handler_seconds(urls[names[0]])
        _report(args, names, times, jobs, handler, time.monotonic() - started)
    finally:
        for s in servers.values():
            s.stop()
        for drop in drops:
            drop()
    return 0


def _report(
    args: argparse.Namespace,
    names: list[str],
    times: dict[str, list[float]],
    jobs: dict[str, list[float]],
    handler: float,
    seconds: float,
) -> None:
    a, b = names
    ratio, low, high = _ratio_interval(times[a], times[b])
    print(
        f"{args.database}: {args.history} baseline runs stored per server ({args.configs} "
        f"configurations x 30 samples), then {args.pairs} turns of {args.flood} baseline "
        f"uploads at once per server, alternating, {args.gap_ms:.0f} ms between pairs; "
        f"{seconds:.0f} s"
    )
    for name in names:
        label = f"detection {name}" if name in ("on", "off") else f"{name} (detection on)"
        print(_summary(label, times[name]))
    print(f"answer time, median {a}/{b}: {ratio:.3f} (95% bootstrap interval {low:.3f}-{high:.3f})")
    for name in names:
        ms = np.array(jobs[name] or [0.0]) * 1000
        print(
            f"{name}: detection jobs: {len(jobs[name])} done, queued to done median "
            f"{np.median(ms):.0f} ms, max {ms.max():.0f} ms"
        )
    print(
        f"the handler alone on {min(args.history + args.pairs * args.flood, 200)} runs "
        f"(this checkout's code, {names[0]}'s database): {handler * 1000:.0f} ms (best of 5)"
    )


if __name__ == "__main__":
    raise SystemExit(main())
