"""Alerts through real servers to real receivers, with injected failures and kill -9: how many
events, how many deliveries arrived, how many arrived twice (by delivery id), how many were lost.

    .venv/bin/python -m benchmarks.reliability.alerts_delivery [--database sqlite,postgresql]
        [--events 30] [--fail-rate 0.2] [--kills 2] [--seed 0]

Per database: two `rnx serve` processes on one database (lease 2 s, poll 50 ms); four channels
(Slack, Teams, webhook: HTTP receivers on loopback; email: aiosmtpd with STARTTLS and a login),
each refusing a `--fail-rate` share of requests at random (HTTP 503, SMTP 451) and taking 50 ms
to answer the rest. --events BLOCK runs are uploaded to the second server while the first is
killed with SIGKILL --kills times mid-delivery, each time started again. Then it waits until
every recorded delivery is marked delivered (or 300 s pass) and counts at the receivers:
  events      BLOCK answers acknowledged (each is one event for each of the 4 channels)
  expected    events x 4
  delivered   distinct delivery ids received
  duplicates  receptions beyond the first of a delivery id (a send whose success the killed
              process never recorded is sent again after its lease: same id)
  lost        expected - delivered
  refused     sends refused by the injected failures (each retried with backoff)
"""

from __future__ import annotations

import argparse
import random
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

import httpx

from gate_server.db import alerts, open_database
from gate_server.domain.alerts import channels, manage
from testbed.factories import body, make_results
from testbed.gate_helpers import (
    create_token,
    fresh_postgres_schema,
    postgres_base_url,
    signed_headers,
)
from testbed.live_server import LiveServer, start_server
from testbed.receivers import HttpReceiver, SmtpReceiver

CONFIGS = [("pytorch_eager", "float32", 1), ("pytorch_eager", "float32", 8)]
CHANNELS = 4
WAIT_S = 300.0


def _failing(rate: float, seed: int) -> object:
    rng = random.Random(seed)
    lock = threading.Lock()

    def fail(_: int) -> bool:
        with lock:
            return rng.random() < rate

    return fail


def _add_channels(url: str, http: dict[str, HttpReceiver], smtp: SmtpReceiver) -> None:
    database = open_database(url)
    specs = [
        ("slack", channels.slack_channel(http["slack"].url + "/services/T/B/x")),
        ("teams", channels.teams_channel(http["teams"].url + "/workflows/x")),
        ("hook", channels.webhook_channel(http["hook"].url + "/kernalin")),
        ("mail", smtp.channel()),
    ]
    try:
        for name, spec in specs:
            manage.add_channel(
                database,
                workspace="acme",
                name=name,
                spec=spec,
                repository=None,
                events=["block"],
                actor="benchmark",
            )
    finally:
        database.close()


def _upload(server: LiveServer, secret: str, seed: int, slowdown: float) -> str:
    data = body(make_results(seed=seed, slowdown=slowdown, configs=CONFIGS))
    r = httpx.post(
        f"{server.url}/api/v1/runs", content=data, headers=signed_headers(secret, data), timeout=60
    )
    r.raise_for_status()
    return str(r.json()["tier"])


def _settled(url: str) -> dict[str, int]:
    database = open_database(url)
    try:
        deadline = time.monotonic() + WAIT_S
        while True:
            with database.read() as conn:
                counts = alerts.delivery_counts(conn)
            done = counts["deliveries"] == counts["delivered"]
            if done or time.monotonic() > deadline:
                return counts
            time.sleep(0.2)
    finally:
        database.close()


def run_one(url: str, work: Path, args: argparse.Namespace) -> dict[str, object]:
    token = create_token(url, branches=("main",))
    http = {
        name: HttpReceiver(
            status=202 if name == "teams" else 200,
            fail=_failing(args.fail_rate, args.seed + i),  # type: ignore[arg-type]
            delay_s=0.05,
        ).start()
        for i, name in enumerate(("slack", "teams", "hook"))
    }
    smtp = SmtpReceiver(work, fail=_failing(args.fail_rate, args.seed + 9)).start()  # type: ignore[arg-type]
    env = {
        "RNX_OUTBOX_LEASE_S": "2",
        "RNX_OUTBOX_POLL_MS": "50",
        "RNX_PUBLIC_URL": "https://gate.example.com",
        "SSL_CERT_FILE": str(smtp.ca_file),
    }
    servers: list[LiveServer] = []
    started = time.monotonic()
    try:
        _add_channels(url, http, smtp)
        killed = start_server(url, work, env=env)
        steady = start_server(url, work, env=env)
        servers += [killed, steady]
        _upload(steady, token.secret, 1, 1.0)  # the baseline
        events = 0
        kill_at = {args.events * (k + 1) // (args.kills + 1) for k in range(args.kills)}
        for i in range(args.events):
            if _upload(steady, token.secret, 100 + i, 1.5) == "BLOCK":
                events += 1
            # A PASS between BLOCKs: each is a regression of its own (repeats are grouped).
            _upload(steady, token.secret, 500 + i, 1.0)
            if i in kill_at:
                killed.process.kill()  # SIGKILL, mid-delivery: its worker is sending
                killed.process.wait(10)
                killed = start_server(url, work, env=env)
                servers.append(killed)
        counts = _settled(url)
    finally:
        for s in servers:
            s.stop()
        for r in http.values():
            r.stop()
        smtp.stop()
    received: Counter[str] = Counter()
    for r in http.values():
        received.update(r.delivery_ids())
    received.update(smtp.delivery_ids())
    expected = events * CHANNELS
    delivered = len(received)
    return {
        "events": events,
        "expected": expected,
        "delivered": delivered,
        "duplicates": sum(received.values()) - delivered,
        "lost": expected - delivered,
        "refused": sum(r.refused for r in http.values()) + smtp.refused,
        "kills": args.kills,
        "recorded": f"{counts['delivered']}/{counts['deliveries']}",
        "seconds": round(time.monotonic() - started, 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database", default="sqlite,postgresql")
    parser.add_argument("--events", type=int, default=30)
    parser.add_argument("--fail-rate", type=float, default=0.2)
    parser.add_argument("--kills", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    print(
        f"{args.events} BLOCK uploads, {CHANNELS} channels, fail rate {args.fail_rate}, "
        f"{args.kills} x kill -9, two server processes"
    )
    header = ("database", "events", "expected", "delivered", "duplicates", "lost", "refused")
    print(" ".join(f"{h:>10}" for h in header) + "   recorded  seconds")
    for engine in args.database.split(","):
        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp)
            drop = None
            if engine == "sqlite":
                url = f"sqlite:///{work / 'alerts.db'}"
            else:
                url, drop = fresh_postgres_schema(postgres_base_url())
            try:
                row = run_one(url, work, args)
            finally:
                if drop is not None:
                    drop()
        values = [engine] + [str(row[h]) for h in header[1:]]
        print(
            " ".join(f"{v:>10}" for v in values) + f"   {row['recorded']:>8}  {row['seconds']:>7}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
