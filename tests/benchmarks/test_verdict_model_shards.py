"""benchmarks/quality/verdict_model.py --jobs: replays split over processes and merged."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "benchmarks" / "data" / "corpus-crossload.npz"


def _figures(tmp_path: Path, *more: str) -> dict[str, Any]:
    argv = [sys.executable, "-m", "benchmarks.quality.verdict_model", "--json"]
    argv += ["--runs-dir", str(tmp_path), "--unchanged", "0", "--per-config", "0"]
    argv += ["--sims", "0", "--repeat", "0", "--cpu-corpus", str(CORPUS)]
    argv += ["--cpu-unchanged", "6", "--cpu-per-config", "2", *more]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    return json.loads(done.stdout)["busy_cpu"]["corpus-crossload"]


def test_shards_add_up_to_the_replays_asked_for(tmp_path: Path) -> None:
    one = _figures(tmp_path)
    two = _figures(tmp_path, "--jobs", "2")
    assert (two["replays"], two["per_config"]) == (one["replays"], one["per_config"]) == (6, 2)
    assert two["flagged_15"].keys() == one["flagged_15"].keys()
    assert all(0 <= v <= 1 for v in two["flagged_15"].values())
    # Every interval of every replay is counted once: 48 configurations a replay, the
    # unchanged and the 15% slower ones.
    held = sum(n for _, n in two["coverage"].values())
    assert held == sum(n for _, n in one["coverage"].values()) == 48 * (6 + 48 * 2)
    assert sum(n for _, n in two["coverage_by_head"]) == held
    # The head's condition alternates within each kind of replay, in each shard.
    quiet, busy = two["by_condition"]["flagged"]
    assert quiet[1] == busy[1] == 48
