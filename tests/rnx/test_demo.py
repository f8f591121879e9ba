"""`make demo`'s ending: the dashboard it leaves behind, the command that brings it back,
the legend of the tiers, and the server kept up until Ctrl-C. (The gates themselves take a
minute of measuring: `make demo` runs them; benchmarks/quality/live_gate.py uses the same
helpers.)"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

from rnx_cli import demo

ROOT = Path(__file__).resolve().parents[2]


def _wait_ready(url: str, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert proc.poll() is None, "the printed command exited"
        try:
            if httpx.get(f"{url}/readyz", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise AssertionError("the printed command's server did not get ready")


def test_the_printed_command_brings_the_dashboard_back(tmp_path: Path) -> None:
    database_url = f"sqlite:///{tmp_path / 'gate.db'}"
    demo._create_token(tmp_path, database_url)
    viewer = demo._create_viewer_token(tmp_path, database_url)
    assert viewer.stat().st_mode & 0o077 == 0  # the secret is a file only its owner reads
    port = demo._free_port()
    url = f"http://127.0.0.1:{port}"
    lines = demo.dashboard_lines(url, viewer)
    assert lines[0].startswith(f"dashboard: {url}/") and str(viewer) in lines[0]
    legend = lines[-3:]
    assert [line.split()[0] for line in legend] == ["PASS", "WARN", "BLOCK"]
    assert "CI job succeeds" in legend[0] and "CI job fails" in legend[2]
    assert "paired mode" in demo.SETTINGS_NOTE and "rope 10%" in demo.SETTINGS_NOTE

    command = demo.serve_command(port, database_url)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RNX_", "KERNALIN_"))}
    env["PYTHONPATH"] = str(ROOT)
    server = subprocess.Popen(
        ["bash", "-c", command],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        _wait_ready(url, server)
        token = viewer.read_text().strip()
        page = httpx.get(f"{url}/", headers={"Authorization": f"Bearer {token}"}, timeout=10)
        assert page.status_code == 200 and "demo/kernels" in page.text
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)


def test_the_server_stays_up_until_ctrl_c() -> None:
    # SIGINT back to Python's own handler: a suite started as a background job (`cmd &` in a
    # script) hands its children SIGINT ignored, and then Ctrl-C could never reach _hold.
    code = (
        "import signal; signal.signal(signal.SIGINT, signal.default_int_handler); "
        "from rnx_cli import demo; demo._hold('http://127.0.0.1:1')"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    assert "until Ctrl-C" in proc.stdout.readline() + proc.stdout.readline()
    time.sleep(0.2)
    assert proc.poll() is None  # still holding
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=10) == 0
