"""Record Apache Otava's E-Divisive results on fixed series, for tests/stats/test_changepoints.py.

Otava pins numpy 2.2 and brings many dependencies, so it is not a dependency of this project;
run this once in a separate virtual environment and commit its output:

    python3 -m venv /tmp/otava && /tmp/otava/bin/pip install --no-deps apache-otava==0.8.0 \\
        && /tmp/otava/bin/pip install numpy==2.2.0 "scipy>=1.16,<1.17"
    /tmp/otava/bin/python tests/data/otava_reference.py > tests/data/otava-reference.json

For each series it records Otava's E-Divisive statistic Q(tau, kappa) over the whole series
(PairDistanceCalculator) as the best split with at least 2 and at least 3 runs on each side
(our `min_runs`), and the change points Otava's own detector reports (compute_change_points:
E-Divisive with Student's t-test, max_pvalue 0.001, windows of 50).
"""

from __future__ import annotations

import json
import sys

import numpy as np
from otava.analysis import compute_change_points
from otava.change_point_divisive.calculator import PairDistanceCalculator


def series() -> dict[str, list[float]]:
    rng = np.random.default_rng(20261201)

    def noise(n: int, sd: float) -> np.ndarray:
        return rng.normal(0.0, sd, n)

    return {
        "noise": noise(60, 0.01).tolist(),
        "step at 40": (noise(50, 0.01) + np.r_[np.zeros(40), np.full(10, 0.095)]).tolist(),
        "step at 20 of 25": (noise(25, 0.01) + np.r_[np.zeros(20), np.full(5, 0.05)]).tolist(),
        "up at 30, down at 45": (
            noise(70, 0.01) + np.r_[np.zeros(30), np.full(15, 0.1), np.zeros(25)]
        ).tolist(),
        "three steps": (
            noise(90, 0.005)
            + np.r_[np.zeros(25), np.full(20, 0.05), np.full(25, 0.12), np.full(20, 0.07)]
        ).tolist(),
        "heavy tail": (
            noise(80, 0.01) + (rng.random(80) < 0.1) * rng.uniform(0.05, 0.2, 80)
        ).tolist(),
    }


def best_split(q: np.ndarray, min_runs: int) -> dict[str, float]:
    """Otava's Q[i, j] is Q(tau = i + 1, kappa = j + 2); the largest with both sides big enough."""
    tau = np.arange(1, q.shape[0] + 1)[:, None]
    kappa = np.arange(2, q.shape[1] + 2)[None, :]
    valid = (tau >= min_runs) & (kappa - tau >= min_runs)
    masked = np.where(valid, q, -np.inf)
    i, j = np.unravel_index(int(np.argmax(masked)), masked.shape)
    return {"tau": int(i + 1), "kappa": int(j + 2), "q": float(q[i, j])}


def main() -> int:
    out = {}
    for name, values in series().items():
        z = np.array(values)
        q = PairDistanceCalculator(z)._get_Q_vals(0, len(z))
        change_points, _ = compute_change_points(values)
        out[name] = {
            "series": values,
            "best_split": {str(m): best_split(q, m) for m in (2, 3)},
            "otava_change_points": [int(cp.index) for cp in change_points],
        }
    json.dump({"otava": "apache-otava 0.8.0", "cases": out}, sys.stdout, indent=1)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
