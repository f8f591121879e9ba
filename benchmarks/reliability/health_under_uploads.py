"""/readyz and /healthz under sustained large uploads, side by side: today's main and this
branch (or any checkouts, --code NAME=PATH), each a real server on its own database.

    .venv/bin/python -m benchmarks.reliability.health_under_uploads [--database sqlite|postgresql]
        [--seconds 20] [--uploaders 2] [--samples 3000] [--rounds 2]

Per phase, one server: `--uploaders` clients push large baseline documents back to back (48
configurations x `--samples` samples a side, each a new run) while a prober asks /readyz and
/healthz in turn every 0.25 s. The sides take turns, `--rounds` phases each, so both see the
machine's same background. Prints per side the probes' answer times (median, p90, max, how
many over 1 s) and the uploads answered.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
import uuid
from pathlib import Path

import httpx

from testbed.code_sides import sides, start_code_server
from testbed.factories import body, make_results
from testbed.gate_helpers import (
    create_token,
    fresh_postgres_schema,
    postgres_base_url,
    signed_headers,
)
from testbed.live_server import LiveServer

CONFIGS_48 = [
    (runtime, dtype, bs)
    for runtime in ("pytorch_eager", "onnxruntime", "torch_compile")
    for dtype in ("float32", "float16", "bfloat16", "float64")
    for bs in (1, 8, 32, 64)
]


def _upload_loop(
    server: LiveServer, secret: str, template: bytes, stop: threading.Event, answered: list[int]
) -> None:
    old = str(uuid.UUID(int=7)).encode()
    with httpx.Client(timeout=600) as client:
        while not stop.is_set():
            data = template.replace(old, str(uuid.uuid4()).encode(), 1)
            r = client.post(
                f"{server.url}/api/v1/runs", content=data, headers=signed_headers(secret, data)
            )
            answered.append(r.status_code)


def _probe(server: LiveServer, stop: threading.Event, times: dict[str, list[float]]) -> None:
    with httpx.Client(timeout=60) as client:
        while not stop.is_set():
            for path in ("/readyz", "/healthz"):
                start = time.perf_counter()
                r = client.get(server.url + path)
                times[path].append(time.perf_counter() - start)
                if r.status_code != 200:
                    times.setdefault(f"{path} not 200", []).append(r.status_code)
                time.sleep(0.25)


def phase(
    server: LiveServer, secret: str, template: bytes, seconds: float, uploaders: int
) -> tuple[dict[str, list[float]], list[int]]:
    stop = threading.Event()
    times: dict[str, list[float]] = {"/readyz": [], "/healthz": []}
    answered: list[int] = []
    threads = [
        threading.Thread(target=_upload_loop, args=(server, secret, template, stop, answered))
        for _ in range(uploaders)
    ]
    threads.append(threading.Thread(target=_probe, args=(server, stop, times)))
    for t in threads:
        t.start()
    time.sleep(seconds)
    stop.set()
    for t in threads:
        t.join()
    return times, answered


def _database(kind: str, tmp: Path, name: str) -> tuple[str, object]:
    if kind == "sqlite":
        return f"sqlite:///{tmp / f'{name}.db'}", None
    return fresh_postgres_schema(postgres_base_url())


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--database", choices=("sqlite", "postgresql"), default="sqlite")
    p.add_argument("--seconds", type=float, default=20.0)
    p.add_argument("--uploaders", type=int, default=2)
    p.add_argument("--samples", type=int, default=3000)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--code", action="append", help="NAME=PATH of a checkout (repeatable)")
    args = p.parse_args(argv)
    code = sides(args.code)
    template = body(
        make_results(configs=CONFIGS_48, n=args.samples, processes=10, run_id=uuid.UUID(int=7))
    )
    print(
        f"{args.database}: {args.uploaders} uploaders of {len(template) / 2**20:.1f} MiB "
        f"documents (48 configurations x {args.samples} samples), {args.rounds} phases of "
        f"{args.seconds:.0f} s per side, taking turns",
        flush=True,
    )
    probes: dict[str, dict[str, list[float]]] = {n: {"/readyz": [], "/healthz": []} for n in code}
    uploads: dict[str, list[int]] = {n: [] for n in code}
    drops = []
    with tempfile.TemporaryDirectory(prefix="rnx-health-") as tmp:
        servers, secrets = {}, {}
        try:
            for name, root in code.items():
                url, drop = _database(args.database, Path(tmp), name)
                if drop is not None:
                    drops.append(drop)
                servers[name] = start_code_server(root, url, Path(tmp))
                secrets[name] = create_token(url).secret
            for _ in range(args.rounds):
                for name, server in servers.items():
                    times, answered = phase(
                        server, secrets[name], template, args.seconds, args.uploaders
                    )
                    for path, values in times.items():
                        probes[name].setdefault(path, []).extend(values)
                    uploads[name].extend(answered)
        finally:
            for server in servers.values():
                server.stop()
            for drop in drops:
                drop()  # type: ignore[operator]
    for name in code:
        statuses = sorted(set(uploads[name]))
        print(f"{name}: {len(uploads[name])} uploads answered (statuses {statuses})")
        for path in ("/readyz", "/healthz"):
            values = sorted(probes[name][path])
            p90 = values[int(0.9 * (len(values) - 1))]
            slow = sum(v > 1.0 for v in values)
            print(
                f"  {path:<8} n={len(values):3d} median {1000 * statistics.median(values):7.1f} ms"
                f"  p90 {1000 * p90:7.1f} ms  max {1000 * values[-1]:7.1f} ms  over 1 s: {slow}"
            )
        for path, values in probes[name].items():
            if path.endswith("not 200"):
                print(f"  {path}: {len(values)} answers {sorted(set(values))}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
