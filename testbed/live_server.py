"""A gate server on a loopback port in a subprocess, for the tests and the benchmarks."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class LiveServer:
    url: str
    database_url: str
    process: subprocess.Popen[bytes]
    log: Path

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)


def start_server(
    database_url: str,
    workdir: Path,
    *,
    env: dict[str, str] | None = None,
    timeout: float = 120.0,
    prelude: str | None = None,
) -> LiveServer:
    """`python -m gate_server serve` (what `rnx serve` runs) on a free loopback port, returned
    once /readyz answers 200 from this very process.

    The caller's RNX_* variables are dropped so only `env` sets the server's policy.
    `prelude`: Python run in the server process first, for a benchmark that measures a
    constant's other value side by side (e.g. SQLite's synchronous mode).
    `timeout` is generous because a busy machine (a CI runner of 2 cores running two test
    workers) can take tens of seconds to start a server; the wait ends as soon as it answers.
    The port was free a moment before the server binds it: should another process take it
    meanwhile (another test worker's server), the server is started again on another port."""
    for _ in range(3):
        server = _start_once(database_url, workdir, env=env, timeout=timeout, prelude=prelude)
        if server is not None:
            return server
    raise RuntimeError("three free ports in a row were taken before the server could bind them")


def _start_once(
    database_url: str,
    workdir: Path,
    *,
    env: dict[str, str] | None,
    timeout: float,
    prelude: str | None,
) -> LiveServer | None:
    """The server on one free port; None when another process took that port first."""
    port = free_port()
    log = workdir / f"server-{port}.log"
    clean = {k: v for k, v in os.environ.items() if not k.startswith("RNX_")}
    clean.update(env or {})
    if prelude is None:
        command = [sys.executable, "-m", "gate_server"]
    else:
        run = "import sys; from gate_server.cli.main import main; sys.exit(main(sys.argv[1:]))"
        command = [sys.executable, "-c", f"{prelude}\n{run}"]
    command += ["serve", "--host", "127.0.0.1"]
    command += ["--port", str(port), "--database-url", database_url, "--log-level", "warning"]
    with open(log, "wb") as out:
        process = subprocess.Popen(
            command, cwd=workdir, env=clean, stdout=out, stderr=subprocess.STDOUT
        )
    server = LiveServer(f"http://127.0.0.1:{port}", database_url, process, log)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            if "address already in use" in log.read_text().lower():
                return None
            raise RuntimeError(f"the server exited with {process.returncode}:\n{log.read_text()}")
        try:
            if httpx.get(f"{server.url}/readyz", timeout=5).status_code == 200:
                if _listens_on(process.pid, port):
                    return server
                server.stop()  # another process's server answered on the port it took
                return None
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    server.stop()
    raise RuntimeError(f"the server did not get ready in {timeout} s:\n{log.read_text()}")


def _listens_on(pid: int, port: int) -> bool:
    """Whether process `pid` holds the socket listening on loopback `port` (Linux's /proc; True
    where /proc cannot tell)."""
    try:
        rows = Path("/proc/net/tcp").read_text().splitlines()[1:]
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return True
    listening = set()
    for row in rows:
        fields = row.split()
        local, state, inode = fields[1], fields[3], fields[9]
        if state == "0A" and int(local.rsplit(":", 1)[1], 16) == port:  # 0A: LISTEN
            listening.add(f"socket:[{inode}]")
    for fd in fds:
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") in listening:
                return True
        except OSError:
            continue
    return False
