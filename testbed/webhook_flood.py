"""Unsigned webhook deliveries sent at once, and a process's memory from /proc (for
tests/reliability/test_reliability_holes.py and benchmarks/server/webhook_memory.py)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

from gate_server.http.webhook import WEBHOOK_PATH
from testbed.live_server import LiveServer

SECRET = "webhook-memory-secret"


def memory_mib(pid: int, field: str) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {field} in /proc/{pid}/status")


def flood(server: LiveServer, bodies: int, mib: int) -> list[int]:
    """`bodies` unsigned deliveries of `mib` MiB at once; their statuses."""
    payload = b'{"zen": "' + b"x" * (mib * 1024 * 1024 - 12) + b'"}'
    headers = {
        "Content-Type": "application/json",
        "X-GitHub-Event": "ping",
        "X-GitHub-Delivery": "flood",
        "X-Hub-Signature-256": "sha256=" + "0" * 64,
    }

    def send(_: int) -> int:
        with httpx.Client(timeout=300) as client:
            return client.post(
                server.url + WEBHOOK_PATH, content=payload, headers=headers
            ).status_code

    with ThreadPoolExecutor(max_workers=bodies) as pool:
        return list(pool.map(send, range(bodies)))
