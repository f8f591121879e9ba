"""Do viewers reloading /hardware slow uploads? (issue 35 #5, the hardware part.) Two real
servers side by side, one running this checkout and one another (`--other`, e.g. the main
checkout), each over its own SQLite database holding the same baselines: one workload's
baseline push in 6 environments, `--configs` configurations each. Each server is measured in
turn, in blocks that alternate between them: upload answer times with no viewer, then with
`--viewers` threads reloading the same 6-environment comparison as fast as it answers.

    .venv/bin/python -m benchmarks.server.hardware_page_load --other /work/main [--configs 24]
        [--viewers 2] [--uploads 12] [--rounds 2]

Prints per server: the page's first and later answer times, the uploads' median answer with
and without viewers, and their ratio (loaded / quiet), with a bootstrap interval.
"""

from __future__ import annotations

import argparse
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import numpy as np

from testbed.factories import body, make_results
from testbed.gate_helpers import LiveServer, create_token, signed_headers, start_server
from testbed.regate_cases import many_configs

REPO = "acme/kernels"
WORKLOAD = "kernels/attention.py"
ENVIRONMENTS = [f"env-bench-{i}" for i in range(6)]


def _seed(server: LiveServer, secret: str, configs: int) -> None:
    """One baseline push per environment, each machine a little faster than the last."""
    with httpx.Client(base_url=server.url, timeout=300) as client:
        for i, env in enumerate(ENVIRONMENTS):
            doc = make_results(
                environment=env,
                configs=many_configs(configs),
                seed=i,
                slowdown=1.0 / (1 + i),
                sha=f"{i + 1:040x}",
            )
            data = body(doc)
            r = client.post("/api/v1/runs", content=data, headers=signed_headers(secret, data))
            if r.status_code != 201:
                raise SystemExit(f"seeding answered {r.status_code}: {r.text[:300]}")


def _page_path() -> str:
    envs = "&".join(f"env={e}" for e in ENVIRONMENTS)
    return f"/hardware?repo={REPO}&branch=main&workload={WORKLOAD}&{envs}"


def _page_times(server: LiveServer, viewer: str, n: int) -> list[float]:
    out = []
    with httpx.Client(base_url=server.url, timeout=600) as client:
        for _ in range(n):
            started = time.perf_counter()
            r = client.get(_page_path(), headers={"Authorization": f"Bearer {viewer}"})
            out.append(time.perf_counter() - started)
            if r.status_code != 200 or "hw-table" not in r.text:
                raise SystemExit(f"/hardware answered {r.status_code}: {r.text[-300:]}")
    return out


def _uploads(server: LiveServer, secret: str, start: int, n: int) -> list[float]:
    """`n` pull request runs of 8 configurations in the first environment: answer seconds."""
    out = []
    with httpx.Client(base_url=server.url, timeout=600) as client:
        for k in range(start, start + n):
            doc = make_results(
                environment=ENVIRONMENTS[0],
                seed=1000 + k,
                branch="feature",
                pr_number=1 + k,
                sha=f"{100000 + k:040x}",
            )
            data = body(doc)
            began = time.perf_counter()
            r = client.post("/api/v1/runs", content=data, headers=signed_headers(secret, data))
            out.append(time.perf_counter() - began)
            if r.status_code != 201:
                raise SystemExit(f"upload answered {r.status_code}: {r.text[:300]}")
    return out


def _with_viewers(
    server: LiveServer, viewer: str, count: int, work: Callable[[], list[float]]
) -> tuple[list[float], int]:
    """work() while `count` viewers reload the comparison; (work's result, page loads)."""
    stop = threading.Event()
    loads = [0]

    def reload() -> None:
        with httpx.Client(base_url=server.url, timeout=600) as client:
            while not stop.is_set():
                client.get(_page_path(), headers={"Authorization": f"Bearer {viewer}"})
                loads[0] += 1

    threads = [threading.Thread(target=reload, daemon=True) for _ in range(count)]
    for t in threads:
        t.start()
    time.sleep(0.5)
    try:
        result = work()
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=600)
    return result, loads[0]


def _ratio(loaded: list[float], quiet: list[float], seed: int = 0) -> tuple[float, float, float]:
    """median(loaded) / median(quiet) with a 90% bootstrap interval."""
    rng = np.random.default_rng(seed)
    a, b = np.array(loaded), np.array(quiet)
    draws = [
        np.median(rng.choice(a, a.size)) / np.median(rng.choice(b, b.size)) for _ in range(2000)
    ]
    low, high = np.quantile(draws, [0.05, 0.95])
    return float(np.median(a) / np.median(b)), float(low), float(high)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--other", required=True, help="the other checkout (e.g. /work/main)")
    p.add_argument("--configs", type=int, default=24)
    p.add_argument("--viewers", type=int, default=2)
    p.add_argument("--uploads", type=int, default=12, help="uploads per block")
    p.add_argument("--rounds", type=int, default=2)
    args = p.parse_args()
    here = str(Path(__file__).resolve().parents[2])
    work = Path(tempfile.mkdtemp(prefix="rnx-hw-load-"))
    servers: dict[str, tuple[LiveServer, str, str]] = {}
    try:
        for name, checkout in (("this", here), ("other", args.other)):
            url = f"sqlite:///{work / (name + '.db')}"
            ci = create_token(url, repository=REPO)
            viewer = create_token(url, viewer=True)
            server = start_server(url, work, env={"PYTHONPATH": checkout})
            servers[name] = (server, ci.secret, viewer.secret)
            _seed(server, ci.secret, args.configs)
        quiet: dict[str, list[float]] = {n: [] for n in servers}
        loaded: dict[str, list[float]] = {n: [] for n in servers}
        pages: dict[str, list[float]] = {}
        loads: dict[str, int] = {n: 0 for n in servers}
        for name, (server, _, viewer) in servers.items():
            pages[name] = _page_times(server, viewer, 4)
        k = 0
        for _ in range(args.rounds):
            for name, (server, ci, viewer) in servers.items():
                quiet[name] += _uploads(server, ci, k, args.uploads)
                k += args.uploads
                times, n = _with_viewers(
                    server,
                    viewer,
                    args.viewers,
                    lambda s=server, c=ci, j=k: _uploads(s, c, j, args.uploads),
                )
                loaded[name] += times
                loads[name] += n
                k += args.uploads
        print(
            f"{len(ENVIRONMENTS)} environments x {args.configs} configurations; "
            f"{args.viewers} viewers reloading; {args.rounds} rounds of {args.uploads} uploads "
            "per block; 8-configuration PR uploads"
        )
        for name in servers:
            first, later = pages[name][0], float(np.median(pages[name][1:]))
            ratio, low, high = _ratio(loaded[name], quiet[name])
            print(
                f"{name:>5} ({'this checkout' if name == 'this' else args.other}): /hardware "
                f"first {first:.2f}s, later median {later:.3f}s; uploads median quiet "
                f"{np.median(quiet[name]) * 1000:.0f} ms, with viewers "
                f"{np.median(loaded[name]) * 1000:.0f} ms ({loads[name]} page loads meanwhile): "
                f"{ratio:.2f}x (90% {low:.2f}-{high:.2f})"
            )
    finally:
        for server, _, _ in servers.values():
            server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
