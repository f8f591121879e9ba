"""benchmarks/gpu/gpu_roofline.py runs on a CPU: measured peaks, each case's work and bound,
no do_bench."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_gpu_roofline_script_runs_on_the_cpu(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.gpu.gpu_roofline", "--device", "cpu", "--out", tmp_path],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads((tmp_path / "roofline.json").read_text())
    assert result["peaks"]["source"] == "measured"
    cases = {c["case"]: c for c in result["cases"]}
    assert cases["matmul 512^3"]["flops"] == 2 * 512**3
    assert cases["matmul 512^3"]["harness"]["bound"] == "compute"
    assert cases["add 2^24"]["flops"] == 0 and cases["add 2^24"]["harness"]["bound"] == "memory"
    assert cases["add 2^24"]["bytes"] == 3 * 4 * (1 << 24)
    assert all("do_bench" not in c for c in cases.values())  # no do_bench on a CPU
    assert "SOL" in done.stdout and "%BW" in done.stdout
