"""benchmarks/quality/interval_coverage.py: the estimates set against the truth (`--parts`)."""

from __future__ import annotations

import math

from benchmarks.quality.interval_coverage import coverage
from stats import runlevel


def test_parts_trace_the_interval_to_its_estimates_without_changing_the_draws() -> None:
    setting = dict(
        runs=3,
        processes=3,
        sims=40,
        configs=6,
        shift=0.05,
        samples=10,
        sd_sample=0.03,
        outliers=0.05,
        seed=3,
    )
    # Process spread far above the runs' own: the estimates' truths differ 16-fold.
    plain = coverage(sd_e=0.04, **setting)  # type: ignore[arg-type]
    parts = coverage(sd_e=0.04, parts=True, **setting)  # type: ignore[arg-type]
    assert {k: parts[k] for k in plain} == plain  # the same pull requests, the same intervals
    assert runlevel.fit.__module__ == "stats.runlevel"  # the comparison's own fit, put back
    ratios = [parts[k] for k in parts if k not in plain]  # and the head's scale, phi
    assert len(ratios) == 7 and all(math.isfinite(r) and r > 0 for r in ratios)
    assert parts["phi"] == 1.0  # 6 configurations: the head's scale is not read
    # sigma_e^2 is measured from 100+ process deviations: within a factor of 2 of its truth.
    assert 0.5 < parts["sigma_e"] < 2.0
