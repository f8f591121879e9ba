"""stats.median_interval: one side's median time and its credible interval."""

from __future__ import annotations

import numpy as np
import pytest

import stats


def test_the_interval_holds_the_median_and_narrows_with_more_samples() -> None:
    rng = np.random.default_rng(0)
    few = 1e6 * np.exp(rng.normal(0, 0.05, 12))
    many = 1e6 * np.exp(rng.normal(0, 0.05, 1200))
    a = stats.median_interval(few, seed=1)
    b = stats.median_interval(many, seed=1)
    assert a.low <= a.median <= a.high and b.low <= b.median <= b.high
    assert a.median == pytest.approx(np.median(few))
    assert (b.high - b.low) < (a.high - a.low) / 3
    assert b.low < 1e6 < b.high
    assert (a.samples, a.groups) == (12, 1)


def test_spread_between_processes_widens_the_interval() -> None:
    rng = np.random.default_rng(2)
    same = [1e6 * np.exp(rng.normal(0, 0.01, 20)) for _ in range(4)]
    apart = [g * f for g, f in zip(same, (0.9, 1.0, 1.1, 1.2), strict=True)]
    tight = stats.median_interval(same, seed=3)
    wide = stats.median_interval(apart, seed=3)
    assert tight.groups == 4 and tight.samples == 80
    assert np.log(wide.high / wide.low) > 3 * np.log(tight.high / tight.low)


def test_seeded_results_repeat_and_bad_input_is_named() -> None:
    data = [3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0]
    assert stats.median_interval(data, seed=5) == stats.median_interval(data, seed=5)
    with pytest.raises(ValueError, match="samples"):
        stats.median_interval([], seed=0)


def test_many_at_once_agree_with_one_at_a_time() -> None:
    rng = np.random.default_rng(4)
    sides = [[1e3 * f * np.exp(rng.normal(0, 0.02, 30)) for _ in range(3)] for f in (1, 5, 25)]
    together = stats.median_intervals(sides, seed=6)
    for side, many in zip(sides, together, strict=True):
        one = stats.median_interval(side, seed=7)
        assert many.median == one.median and many.samples == 90 and many.groups == 3
        assert many.low == pytest.approx(one.low, rel=0.01)
        assert many.high == pytest.approx(one.high, rel=0.01)
    with pytest.raises(ValueError, match=r"sides\[1\]"):
        stats.median_intervals([[1.0] * 8, []], seed=0)
