"""`--database-url-file`: a database password never in a process's arguments or environment."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from sqlalchemy.engine import make_url

from testbed.live_server import free_port

PASSWORD = "Pa55-only-in-the-file"


def _with_password(url: str) -> str:
    # The test server trusts loopback: the password is carried, never needed.
    return make_url(url).set(password=PASSWORD).render_as_string(hide_password=False)


def _seen_by_others(pid: int) -> str:
    """What any user of the machine can read of a process and its children: arguments (and,
    being root here, the environment)."""
    seen = []
    children = Path(f"/proc/{pid}/task/{pid}/children")
    pids = [pid, *map(int, children.read_text().split())] if children.exists() else [pid]
    for p in pids:
        for part in ("cmdline", "environ"):
            with contextlib.suppress(OSError):  # a child that has exited meanwhile
                seen.append(Path(f"/proc/{p}/{part}").read_bytes().decode("utf-8", "replace"))
    return "\n".join(seen)


@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)
def test_the_server_reads_its_database_url_from_a_file(tmp_path: Path, database_url: str) -> None:
    secret_file = tmp_path / "database-url"
    secret_file.write_text(_with_password(database_url) + "\n")
    secret_file.chmod(0o600)
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("RNX_")}
    command = [sys.executable, "-m", "gate_server", "serve", "--host", "127.0.0.1"]
    command += ["--port", str(port), "--database-url-file", str(secret_file)]
    server = subprocess.Popen(command, env=env, cwd=tmp_path, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert server.poll() is None, server.stderr.read() if server.stderr else ""
            assert time.monotonic() < deadline, "the server did not become ready"
            time.sleep(0.2)
        assert PASSWORD not in _seen_by_others(server.pid)
    finally:
        server.terminate()
        server.wait(30)


def test_commands_take_the_file_and_say_what_is_wrong_with_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # In this process: `python -m gate_server` runs this main (the server's start above and
    # every live server's show the entry point itself).
    from gate_server.cli.main import main

    url_file = tmp_path / "url"
    url_file.write_text(f"sqlite:///{tmp_path / 'gate.db'}\n")
    run = ["token", "create", "--workspace", "acme", "--repo", "acme/k", "--branches", "main"]
    assert main([*run, "--database-url-file", str(url_file)]) == 0, capsys.readouterr().err
    assert (tmp_path / "gate.db").is_file()
    for args, expected in (
        (["--database-url-file", str(tmp_path / "missing")], "cannot read --database-url-file"),
        (["--database-url-file", os.devnull], "is empty"),
        (["--database-url-file", str(url_file), "--database-url", "sqlite://"], "not both"),
    ):
        capsys.readouterr()
        assert main([*run, *args]) == 2
        err = capsys.readouterr().err
        assert expected in err and "Traceback" not in err, err
