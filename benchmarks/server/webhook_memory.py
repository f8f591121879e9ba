"""The webhook's memory under unsigned bodies: 8 concurrent 24 MiB deliveries with a wrong
X-Hub-Signature-256, sent to the real server with its bound on unverified reads
(gate_server/http/webhook.py, MAX_UNVERIFIED_READS) and, side by side, to one without it.

    .venv/bin/python -m benchmarks.server.webhook_memory [--bodies 8] [--mib 24] [--rounds 2]

Per server: its resident memory before (VmRSS) and its peak after (VmHWM, from /proc), and the
growth; every delivery must be answered 401. Prints the growths and their ratio.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from gate_server.http.webhook import MAX_UNVERIFIED_READS
from testbed.gate_helpers import LiveServer, start_server
from testbed.webhook_flood import SECRET, flood, memory_mib

UNBOUNDED = "import gate_server.http.webhook as w; w.MAX_UNVERIFIED_READS = 1_000_000"


def measure(server: LiveServer, bodies: int, mib: int, rounds: int) -> tuple[float, float]:
    """(RSS before, peak after) of the server, in MiB."""
    before = memory_mib(server.process.pid, "VmRSS")
    for _ in range(rounds):
        statuses = flood(server, bodies, mib)
        if set(statuses) != {401}:
            raise RuntimeError(f"expected 401 for every unsigned delivery, got {statuses}")
    return before, memory_mib(server.process.pid, "VmHWM")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bodies", type=int, default=8)
    p.add_argument("--mib", type=int, default=24)
    p.add_argument("--rounds", type=int, default=2)
    args = p.parse_args(argv)
    growth = {}
    with tempfile.TemporaryDirectory(prefix="rnx-webhook-mem-") as tmp:
        for name, prelude in (("bounded", None), ("unbounded", UNBOUNDED)):
            url = f"sqlite:///{Path(tmp) / f'{name}.db'}"
            env = {"RNX_GITHUB_WEBHOOK_SECRET": SECRET}
            server = start_server(url, Path(tmp), env=env, prelude=prelude)
            try:
                before, peak = measure(server, args.bodies, args.mib, args.rounds)
            finally:
                server.stop()
            growth[name] = peak - before
            limit = MAX_UNVERIFIED_READS if prelude is None else "none"
            print(
                f"{name:<9} (reads at once: {limit}): RSS before {before:.0f} MiB, peak "
                f"{peak:.0f} MiB, growth {growth[name]:.0f} MiB "
                f"({args.rounds} x {args.bodies} concurrent {args.mib} MiB unsigned bodies, "
                "all 401)",
                flush=True,
            )
    print(f"growth unbounded / bounded: {growth['unbounded'] / growth['bounded']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
