"""The server's memory with large baseline documents, side by side: today's main and this
branch (or any checkouts, --code NAME=PATH), each a real server on its own SQLite file, the
same documents uploaded to both.

    .venv/bin/python -m benchmarks.server.server_memory [--series 30] [--runs 3] [--samples 1000]
        [--readers 4] [--code main=/work/main --code branch=.]

Phase 1 (the parsed-document cache): `--series` workloads, each with `--runs` baseline pushes
of 48 configurations x `--samples` samples a side; every push is re-gated against its
workload's earlier runs, whose parsed documents the server keeps. Phase 2 (GET
/api/v1/baselines): `--readers` clients at once read the baselines of one workload, three
times. Prints each server's resident memory (VmRSS) before, and its peak (VmHWM) after each
phase, from /proc.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path

import httpx

from testbed.code_sides import sides, start_code_server
from testbed.factories import body, make_results
from testbed.gate_helpers import create_token, signed_headers
from testbed.live_server import LiveServer
from testbed.webhook_flood import memory_mib

CONFIGS_48 = [
    (runtime, dtype, bs)
    for runtime in ("pytorch_eager", "onnxruntime", "torch_compile")
    for dtype in ("float32", "float16", "bfloat16", "float64")
    for bs in (1, 8, 32, 64)
]
ENV = "linux-x86_64-cpu-test"


def _documents(series: int, runs: int, samples: int) -> list[bytes]:
    return [
        body(
            make_results(
                configs=CONFIGS_48,
                n=samples,
                processes=10,
                seed=s * 1000 + r,
                workload=f"kernels/k{s}.py",
                sha=f"{s * 1000 + r:040x}",
            )
        )
        for r in range(runs)
        for s in range(series)
    ]


def _read(server: LiveServer, secret: str, workload: str) -> int:
    query = {"branch": "main", "environment": ENV, "workload": workload}
    with httpx.Client(timeout=600) as client:
        r = client.get(
            f"{server.url}/api/v1/baselines",
            params=query,
            headers={"Authorization": f"Bearer {secret}"},
        )
    if r.status_code != 200:
        raise RuntimeError(f"GET /api/v1/baselines answered {r.status_code}: {r.text[:200]}")
    return len(r.content)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--series", type=int, default=30)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--samples", type=int, default=1000)
    p.add_argument("--readers", type=int, default=4)
    p.add_argument("--code", action="append", help="NAME=PATH of a checkout (repeatable)")
    args = p.parse_args(argv)
    code = sides(args.code)
    documents = _documents(args.series, args.runs, args.samples)
    print(
        f"{len(documents)} baseline documents of {len(CONFIGS_48)} configurations x "
        f"{args.samples} samples, {sum(map(len, documents)) / 2**20:.0f} MiB in all "
        f"({len(documents[0]) / 2**20:.2f} MiB each); {args.series} workloads",
        flush=True,
    )
    with tempfile.TemporaryDirectory(prefix="rnx-server-memory-") as tmp:
        servers, secrets = {}, {}
        try:
            for name, root in code.items():
                url = f"sqlite:///{Path(tmp) / f'{name}.db'}"
                servers[name] = start_code_server(root, url, Path(tmp))
                secrets[name] = create_token(url).secret
            before = {n: memory_mib(s.process.pid, "VmRSS") for n, s in servers.items()}
            spent = dict.fromkeys(servers, 0.0)
            for data in documents:  # alternating: the same load on both at the same time
                for name, server in servers.items():
                    start = time.perf_counter()
                    r = httpx.post(
                        f"{server.url}/api/v1/runs",
                        content=data,
                        headers=signed_headers(secrets[name], data),
                        timeout=600,
                    )
                    spent[name] += time.perf_counter() - start
                    if r.status_code != 201:
                        raise RuntimeError(f"{name}: upload answered {r.status_code}: {r.text}")
            after_uploads = {n: memory_mib(s.process.pid, "VmHWM") for n, s in servers.items()}
            for name, server in servers.items():
                reads = [f"kernels/k{i % args.series}.py" for i in range(3 * args.readers)]
                with ThreadPoolExecutor(args.readers) as pool:
                    sizes = list(pool.map(partial(_read, server, secrets[name]), reads))
                after = memory_mib(server.process.pid, "VmHWM")
                print(
                    f"{name:<8} RSS before {before[name]:6.0f} MiB | after {len(documents)} "
                    f"uploads: peak {after_uploads[name]:6.0f} MiB "
                    f"(+{after_uploads[name] - before[name]:.0f}; {spent[name]:.0f} s) | after "
                    f"{len(reads)} baseline reads, {args.readers} at once "
                    f"({sizes[0] / 2**20:.1f} MiB each): peak {after:6.0f} MiB "
                    f"(+{after - after_uploads[name]:.0f})",
                    flush=True,
                )
        finally:
            for server in servers.values():
                server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
