"""How long one channel's alerts wait while another channel's receiver accepts connections and
never answers, for two checkouts side by side (this one and, say, /work/main).

    .venv/bin/python -m benchmarks.reliability.alert_latency [--trees .,/work/main] [--events 10]
        [--database sqlite]

Per checkout (its own `python -m gate_server serve`, PYTHONPATH set to it, a fresh database):
two Slack channels take every BLOCK: "hung" points at a loopback socket that accepts and never
answers, "ops" at a receiver that answers 200 at once. --events BLOCK runs are uploaded, and
for each the time from the upload's answer to its "ops" alert arriving is taken (a PASS is
uploaded after each, so every BLOCK is a regression of its own, alerted on either checkout).
Printed per checkout: the median and the longest of those waits, the time until the last "ops" alert
arrived (from the first upload), and how many connections the silent receiver was sent.
Waits are capped at --wait-s (an alert that never came counts as that).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
from pathlib import Path

import httpx

from gate_server.db import open_database
from gate_server.domain.alerts import channels, manage
from testbed.factories import body, make_results
from testbed.gate_helpers import create_token, signed_headers
from testbed.live_server import start_server
from testbed.receivers import HttpReceiver, SilentReceiver

CONFIGS = [("pytorch_eager", "float32", 1)]


def _add_channel(url: str, name: str, target: str) -> None:
    database = open_database(url)
    try:
        spec = channels.slack_channel(target)
        manage.add_channel(
            database,
            workspace="acme",
            name=name,
            spec=spec,
            repository=None,
            events=("block",),
            actor="bench",
        )
    finally:
        database.close()


def run_one(tree: Path, work: Path, events: int, wait_s: float) -> dict[str, float | int]:
    url = f"sqlite:///{work / 'alerts.db'}"
    token = create_token(url, branches=("main",))
    arrivals: dict[int, float] = {}
    lock = threading.Lock()

    def arrived(n: int) -> bool:
        with lock:
            arrivals[n] = time.monotonic()
        return False  # answered at once

    ops = HttpReceiver(hold=arrived).start()
    silent = SilentReceiver().start()
    _add_channel(url, "hung", silent.url + "/services/T1/B1/hung")
    _add_channel(url, "ops", ops.url + "/services/T2/B2/ops")
    env = {"PYTHONPATH": str(tree), "RNX_OUTBOX_POLL_MS": "50"}
    server = start_server(url, work, env=env)
    answered: dict[str, float] = {}
    try:
        with httpx.Client(timeout=60) as client:

            def upload(seed: int, slowdown: float) -> dict[str, str]:
                data = body(make_results(seed=seed, slowdown=slowdown, configs=CONFIGS))
                r = client.post(
                    f"{server.url}/api/v1/runs",
                    content=data,
                    headers=signed_headers(token.secret, data),
                )
                r.raise_for_status()
                found: dict[str, str] = r.json()
                return found

            upload(1, 1.0)  # the baseline
            started = time.monotonic()
            for i in range(events):
                answer = upload(100 + i, 1.5)
                if answer["tier"] == "BLOCK":
                    answered[answer["run_id"]] = time.monotonic()
                upload(500 + i, 1.0)  # fixed again: each BLOCK is news, never a grouped repeat
        deadline = started + wait_s
        while len(ops.received) < len(answered) and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        server.stop()
        ops.stop()
        silent.stop()
    waits = []
    with lock:
        for n, got in enumerate(ops.received):
            run_id = got.body.decode().split("/runs/")[-1][:36]
            if run_id in answered and n in arrivals:
                waits.append(arrivals[n] - answered.pop(run_id))
    waits += [wait_s] * len(answered)  # never arrived within the cap
    last = max(arrivals.values(), default=started + wait_s) - started
    return {
        "median_s": statistics.median(waits),
        "max_s": max(waits),
        "last_s": last,
        "hung_connections": silent.accepted,
        "ops_alerts": len(ops.received),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trees", default=".,/work/main")
    parser.add_argument("--events", type=int, default=10)
    parser.add_argument("--wait-s", type=float, default=300.0)
    args = parser.parse_args(argv)
    print(
        f"{args.events} BLOCK uploads; channels 'hung' (accepts, never answers) and 'ops'; "
        "wait = upload answered -> its 'ops' alert received"
    )
    print(f"{'checkout':<28} {'median':>8} {'max':>8} {'last':>8} {'ops':>5} {'hung conns':>10}")
    for tree in args.trees.split(","):
        path = Path(tree).resolve()
        with tempfile.TemporaryDirectory() as tmp:
            got = run_one(path, Path(tmp), args.events, args.wait_s)
        print(
            f"{str(path):<28} {got['median_s']:>7.2f}s {got['max_s']:>7.2f}s "
            f"{got['last_s']:>7.2f}s {got['ops_alerts']:>5} {got['hung_connections']:>10}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
