"""python -m benchmarks.quality.changepoint_quality --quick runs end to end on a recorded corpus."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_quick_benchmark_prints_its_table() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "benchmarks.quality.changepoint_quality", "--quick"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    rows = {
        line.split("|")[2].strip(): line
        for line in result.stdout.splitlines()
        if line.startswith("| Q |")
    }
    assert set(rows) == {"ours", "plain 10%", "plain 5%"}
    # Seeded: every quick history's 10% step is found within 3 runs, and no unchanged run
    # of the quiet corpus is called a change.
    cells = [c.strip() for c in rows["ours"].split("|")[3:-1]]
    assert cells[0].startswith("100%")
    assert cells[-1].startswith("0.00 ")
    assert "placed exactly" in result.stdout
    assert "speed: stats.detect on 48 configurations" in result.stdout
