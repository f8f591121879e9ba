"""Instructions the gate server process executes per upload, counted by valgrind (callgrind).

    .venv/bin/python -m benchmarks.server.upload_instructions [--uploads 20] [--db postgresql]
        [--configs 48]

CPU time per upload depends on the machine's load even when it is the server's own: on a
shared machine of 2 cores the same server spent 7 ms per upload at one time and 15 ms at
another. The instructions it executes do not: one `rnx serve` process (on SQLite, or with
--db postgresql on a fresh schema of the test PostgreSQL, RNX_TEST_POSTGRES_URL) runs under
callgrind with counting off while it starts and takes six baseline pushes and five warm-up
uploads, then on for --uploads pull-request uploads of 8 configurations x 30 samples re-gated
against the six baselines (benchmarks/server/server_load.py's; --configs N:
benchmarks/server/regate_speed.py's
first N configurations), sent one at a time. User-space instructions only (the kernel's part,
sockets and fsync, is not counted, nor PostgreSQL's own processes); valgrind runs the
server about 50 times slower, so keep --uploads small. Needs valgrind on the PATH (Debian:
`apt-get install valgrind`).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import testbed.live_server as local
from benchmarks.server.regate_speed import _configs
from benchmarks.server.server_load import ENV, REPO, Client, prepare
from testbed.factories import DEFAULT_CONFIGS, body, make_results
from testbed.gate_helpers import fresh_postgres_schema, postgres_base_url

QUIET_OUTBOX = {"RNX_OUTBOX_POLL_MS": "60000"}


def _under_callgrind(out: Path) -> Any:
    """subprocess.Popen that starts the server (only) under callgrind, counting off."""
    popen = subprocess.Popen

    def start(command: list[str], *args: Any, **kwargs: Any) -> Any:
        if command[0] == sys.executable and "serve" in command:
            command = [
                "valgrind",
                "--tool=callgrind",
                "--instr-atstart=no",
                f"--callgrind-out-file={out}.%p",
                *command,
            ]
        return popen(command, *args, **kwargs)

    return start


def _control(*args: str) -> None:
    subprocess.run(["callgrind_control", *args], check=True, capture_output=True)


def _document(configs: int | None, **facts: Any) -> bytes:
    """A results document of server_load's (configs None: its 8 configurations) or of
    regate_speed's first `configs` configurations, 3 processes x 10 samples each."""
    shape = DEFAULT_CONFIGS if configs is None else _configs(configs)
    return body(make_results(repository=REPO, environment=ENV, configs=shape, **facts))


def measure(workdir: Path, uploads: int, url: str, configs: int | None = None) -> float:
    """Instructions per upload of the server process."""
    secret = prepare(url)[0]
    out = workdir / "callgrind.out"
    local.subprocess.Popen = _under_callgrind(out)  # type: ignore[misc]
    try:
        # The outbox worker polls once a second: about once per upload at valgrind's pace,
        # once per hundred at the server's. Polled once a minute, it stays out of the count.
        server = local.start_server(url, workdir, env=QUIET_OUTBOX, timeout=600)
    finally:
        local.subprocess.Popen = subprocess.Popen  # type: ignore[misc]
    try:
        client = Client(server.url, secret)
        for i in range(6):
            client.upload(_document(configs, branch="main", seed=10_000 + i))
        bodies = [
            _document(
                configs,
                event="pull_request",
                pr_number=1 + i % 500,
                branch=f"feature/{i}",
                seed=30_000 + i,
            )
            for i in range(uploads + 5)
        ]
        for data in bodies[:5]:  # warm: imports, caches, connections
            client.upload(data)
        pid = str(server.process.pid)
        _control("--instr=on", pid)
        for data in bodies[5:]:
            client.upload(data)
        _control("--instr=off", pid)
        _control("--dump", pid)
    finally:
        server.stop()
    total = 0
    for dump in workdir.glob("callgrind.out.*"):
        for line in dump.read_text().splitlines():
            if line.startswith("totals:"):  # (its "summary:" line holds the same number)
                total += int(line.split()[1])
    return total / uploads


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--uploads", type=int, default=20, help="counted uploads (20)")
    p.add_argument("--db", choices=("sqlite", "postgresql"), default="sqlite")
    p.add_argument(
        "--configs", type=int, help="regate_speed's documents of this many configurations"
    )
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        if args.db == "sqlite":
            per_upload = measure(
                Path(tmp), args.uploads, f"sqlite:///{Path(tmp) / 'i.db'}", args.configs
            )
        else:
            url, drop = fresh_postgres_schema(postgres_base_url())
            try:
                per_upload = measure(Path(tmp), args.uploads, url, args.configs)
            finally:
                drop()
    engine = "SQLite" if args.db == "sqlite" else "PostgreSQL"
    print(
        f"gate server process, {engine}, upload = {args.configs or 8} configurations x 30 "
        "samples re-gated against "
        f"6 baseline runs: {per_upload / 1e6:.2f} million instructions per upload "
        f"({args.uploads} uploads, one at a time; callgrind, user space)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
