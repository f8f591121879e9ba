"""benchmarks/quality/verdict_model.py --jobs: replays split over processes and merged."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np

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
    per_head = two["coverage_by_config_head"]
    assert sum(n for counts in per_head.values() for _, n in counts) == held
    # Each configuration's squared errors and draws' variances are summed over the shards, in
    # every replay with a truth: variances are positive, so each configuration has some.
    assert two["errors"].keys() == two["coverage"].keys()
    assert all(sq >= 0 and var > 0 for sq, var in two["errors"].values())
    # The head's condition alternates within each kind of replay, in each shard.
    quiet, busy = two["by_condition"]["flagged"]
    assert quiet[1] == busy[1] == 48
    # Every 15% slowdown that PASSed is read again for its slowed configuration's own verdict.
    missed = two["by_condition"]["missed"]
    assert [m[1] for m in missed] == [quiet[1] - quiet[0], busy[1] - busy[0]]
    assert all(0 <= held <= n for held, n in missed)


def test_coverage_pooled_over_corpora_of_one_setting_counts_every_head() -> None:
    from benchmarks.quality.verdict_model import _pooled_coverage_lines

    # Two corpora at baseline runs of 9 processes (heads: intervals covered, intervals), one at 3.
    corpora = {
        "a": {"base_processes": 9, "coverage_by_head": [[9, 10], [10, 10], [0, 0]]},
        "b": {"base_processes": 9, "coverage_by_head": [[7, 10], [8, 10]]},
        "c": {"base_processes": 3, "coverage_by_head": [[5, 10], [5, 10]]},
    }
    (line,) = _pooled_coverage_lines(corpora, "GPU corpora")  # one corpus at 3: nothing pooled
    assert line.startswith("coverage of 90% intervals, the 2 GPU corpora with baseline runs of 9")
    assert "0.850 (" in line and "; 4 heads)" in line  # 34 of 40; the head with none left out
    lo, hi = (float(x) for x in line.split("(")[1].split(" ")[0].split("-"))
    assert 0.7 <= lo < 0.85 < hi <= 0.95


def test_a_configuration_whose_coverage_is_its_own_is_told_from_its_heads() -> None:
    # 24 configurations, 20 heads, 100 intervals each. Alike: each (configuration, head)
    # covers by chance around 90%. Own: the same, but six configurations cover 70% under
    # every head, so they are low in both halves of the heads.
    from benchmarks.quality.verdict_model import _own_coverage_lines

    rng = np.random.default_rng(1)

    def counts(shares: np.ndarray) -> dict[str, list[list[int]]]:
        held = rng.binomial(100, shares[:, None] * np.ones(20))
        return {f"c{i}": [[int(h), 100] for h in row] for i, row in enumerate(held)}

    def p_value(line: str) -> float:
        return float(line.split("p = ")[1].split(")")[0])

    alike = _own_coverage_lines(counts(np.full(24, 0.9)))
    own = _own_coverage_lines(counts(np.r_[np.full(18, 0.9), np.full(6, 0.7)]))
    assert p_value(alike[0]) > 0.05
    assert p_value(own[0]) < 0.01
    worst = own[0].split("worst in two halves: ")[1].split(", ")
    assert all(int(w.split()[0][1:]) >= 18 for w in worst)  # the six that cover 70%
