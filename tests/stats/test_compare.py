"""stats.compare: known answers with seeded data, robustness, groups, paired mode, validation."""

from __future__ import annotations

import importlib
import math
from typing import Any

import numpy as np
import pytest

import stats


def lognormal(
    rng: np.random.Generator, n: int, median: float = 1e5, sigma: float = 0.02
) -> np.ndarray:
    return median * np.exp(rng.normal(0.0, sigma, n))


def test_known_slowdown_is_found_with_its_size() -> None:
    rng = np.random.default_rng(1)
    base = lognormal(rng, 30)
    head = lognormal(rng, 30, median=1.1e5)
    c = stats.compare(base, head, seed=0)
    assert c.verdict == "slower"
    assert c.low < 1.10 < c.high
    assert 1.08 < c.ratio < 1.12
    assert c.p_slower >= 0.95 and c.p_faster == 0.0
    assert math.isclose(c.p_slower + c.p_faster + c.p_equivalent, 1.0)
    assert c.base_samples == c.head_samples == 30
    assert c.base_median == pytest.approx(np.median(base))


def test_known_speedup_and_equivalence() -> None:
    rng = np.random.default_rng(2)
    base = lognormal(rng, 40, sigma=0.005)
    assert (
        stats.compare(base, lognormal(rng, 40, median=0.9e5, sigma=0.005), seed=0).verdict
        == "faster"
    )
    same = stats.compare(base, lognormal(rng, 40, sigma=0.005), seed=0)
    assert same.verdict == "equivalent"
    assert same.p_equivalent >= 0.95
    assert "equivalent" in same.reason


def test_seed_makes_it_reproducible() -> None:
    rng = np.random.default_rng(3)
    base, head = lognormal(rng, 20), lognormal(rng, 20, median=1.03e5)
    a = stats.compare(base, head, seed=42)
    b = stats.compare(base, head, seed=42)
    assert a == b
    assert np.array_equal(a.log_ratio_draws, b.log_ratio_draws)
    c = stats.compare(base, head, seed=43)
    assert not np.array_equal(a.log_ratio_draws, c.log_ratio_draws)
    assert a.log_ratio_draws.size == 2000


def test_p_exceeds_matches_the_draws() -> None:
    rng = np.random.default_rng(4)
    c = stats.compare(lognormal(rng, 30), lognormal(rng, 30, median=1.3e5, sigma=0.1), seed=0)
    assert c.p_exceeds(c.rope) == pytest.approx(c.p_slower)
    assert c.p_exceeds(0.0) >= c.p_exceeds(0.25) >= c.p_exceeds(1.0)
    assert 0 < c.p_not_exceeding(10.0) <= 1
    assert c.p_not_exceeding(-0.9) == pytest.approx(1 / 2001)


def test_fewer_than_eight_samples_is_undecided_with_the_reason() -> None:
    rng = np.random.default_rng(5)
    c = stats.compare(lognormal(rng, 5), lognormal(rng, 30, median=3e5), seed=0)
    assert c.verdict == "undecided"
    assert c.reason == "fewer than 8 samples on a side (base 5, head 30)"
    assert not c.sufficient
    p = stats.compare(lognormal(rng, 7), lognormal(rng, 7, median=3e5), seed=0, paired=True)
    assert p.verdict == "undecided" and p.reason == "fewer than 8 paired rounds (7)"


def test_heavy_tails_do_not_fake_a_difference_and_do_not_hide_one() -> None:
    """Preemption-like outliers: 10% of samples 3-20x slower, on either side at random."""
    rng = np.random.default_rng(6)

    def noisy(median: float) -> np.ndarray:
        x = lognormal(rng, 30, median=median, sigma=0.01)
        hit = rng.random(30) < 0.10
        x[hit] *= rng.uniform(3, 20, hit.sum())
        return x

    aa = stats.compare_many([(noisy(1e5), noisy(1e5)) for _ in range(100)], seed=0)
    assert sum(c.verdict in ("slower", "faster") for c in aa) <= 5
    assert sum(c.verdict == "equivalent" for c in aa) >= 80
    real = stats.compare_many([(noisy(1e5), noisy(1.1e5)) for _ in range(50)], seed=1)
    assert sum(c.verdict == "slower" for c in real) >= 48
    assert all(1.05 < c.ratio < 1.15 for c in real)


def test_bimodal_timings_are_handled() -> None:
    """Two allocator states: 70% of samples at 1.0, 30% at 1.3, mixed afresh on each side."""
    rng = np.random.default_rng(7)

    def bimodal(scale: float) -> np.ndarray:
        x = lognormal(rng, 30, median=1e5 * scale, sigma=0.01)
        return np.where(rng.random(30) < 0.3, x * 1.3, x)

    aa = stats.compare_many([(bimodal(1.0), bimodal(1.0)) for _ in range(100)], seed=0)
    assert sum(c.verdict in ("slower", "faster") for c in aa) <= 3
    real = stats.compare_many([(bimodal(1.0), bimodal(1.2)) for _ in range(100)], seed=1)
    assert sum(c.verdict == "slower" for c in real) >= 75
    assert not any(c.verdict == "faster" for c in real)
    # The estimator stays with the main mode: 1.2 is the answer, not a mix of the two modes.
    assert 1.15 < np.median([c.ratio for c in real]) < 1.25


def interfered(rng: np.random.Generator, x: np.ndarray, share: float = 0.3) -> np.ndarray:
    """A noisy neighbour: a share of the samples takes 10% to 100% longer, never less."""
    hit = rng.random(x.shape) < share
    return np.where(hit, x * (1 + rng.uniform(0.1, 1.0, x.shape)), x)


def test_interference_that_only_adds_time_is_seen_through() -> None:
    """The low band follows what the code costs, not how often a neighbour got in the way."""
    rng = np.random.default_rng(21)

    def side(median: float) -> np.ndarray:
        return interfered(rng, lognormal(rng, 30, median=median, sigma=0.01))

    aa = stats.compare_many([(side(1e5), side(1e5)) for _ in range(100)], seed=0)
    assert sum(c.verdict in ("slower", "faster") for c in aa) <= 3
    real = stats.compare_many([(side(1e5), side(1.05e5)) for _ in range(100)], seed=1)
    assert sum(c.verdict == "slower" for c in real) >= 90
    assert 1.03 < np.median([c.ratio for c in real]) < 1.07


def test_paired_mode_sees_through_interference_on_either_side_of_a_round() -> None:
    """A third of the rounds has base or head (at random) hit by a neighbour; the rest of the
    round's noise (10%) is shared by both."""
    rng = np.random.default_rng(22)

    def rounds(slowdown: float) -> tuple[np.ndarray, np.ndarray]:
        shared = 1e5 * np.exp(rng.normal(0, 0.1, 30))
        base = shared * np.exp(rng.normal(0, 0.01, 30))
        head = shared * (1 + slowdown) * np.exp(rng.normal(0, 0.01, 30))
        on_head = rng.random(30) < 0.5
        return (
            np.where(on_head, base, interfered(rng, base, 0.33)),
            np.where(on_head, interfered(rng, head, 0.33), head),
        )

    aa = stats.compare_many([rounds(0.0) for _ in range(100)], seed=0, paired=True)
    assert sum(c.verdict in ("slower", "faster") for c in aa) <= 2
    real = stats.compare_many([rounds(0.10) for _ in range(100)], seed=1, paired=True)
    assert sum(c.verdict == "slower" for c in real) >= 95


def test_separate_processes_with_tight_samples_are_not_called_different() -> None:
    """Each process has its own offset (3% spread) and tight samples (0.3%) within."""
    rng = np.random.default_rng(8)

    def run(groups: int) -> list[np.ndarray]:
        return [
            lognormal(rng, 10, median=1e5 * math.exp(rng.normal(0, 0.03)), sigma=0.003)
            for _ in range(groups)
        ]

    pairs = [(run(3), run(3)) for _ in range(200)]
    grouped = stats.compare_many(pairs, seed=0)
    pooled = stats.compare_many([(np.concatenate(b), np.concatenate(h)) for b, h in pairs], seed=0)
    called_grouped = sum(c.verdict in ("slower", "faster") for c in grouped)
    called_pooled = sum(c.verdict in ("slower", "faster") for c in pooled)
    # Pooling treats 30 tight samples as independent and calls far more pairs different.
    assert called_pooled >= 25
    assert called_grouped <= 10

    # The interval is wider with groups: between-process spread is part of the uncertainty.
    def width(cs: list[stats.Comparison]) -> float:
        return float(np.median([math.log(c.high / c.low) for c in cs]))

    assert width(grouped) > 2 * width(pooled)


def test_several_baseline_runs_are_groups_too() -> None:
    rng = np.random.default_rng(9)
    history = [lognormal(rng, 30, median=1e5 * (1 + 0.01 * k)) for k in range(5)]
    c = stats.compare(history, lognormal(rng, 30, median=1.5e5), seed=0)
    assert c.verdict == "slower" and c.base_groups == 5 and c.base_samples == 150


def test_paired_mode_cancels_shared_round_noise() -> None:
    """Each round's noise (20%) hits base and head alike; head is 5% slower."""
    rng = np.random.default_rng(10)
    shared = np.exp(rng.normal(0, 0.2, 30))
    base = 1e5 * shared * np.exp(rng.normal(0, 0.003, 30))
    head = 1.05e5 * shared * np.exp(rng.normal(0, 0.003, 30))
    paired = stats.compare(base, head, seed=0, paired=True)
    assert paired.verdict == "slower"
    assert paired.low < 1.05 < paired.high and paired.high / paired.low < 1.01
    assert stats.compare(base, head, seed=0).verdict == "undecided"
    grouped = stats.compare([base[:15], base[15:]], [head[:15], head[15:]], seed=0, paired=True)
    assert grouped.verdict == "slower" and grouped.base_groups == 2


def test_compare_many_matches_one_by_one_verdicts() -> None:
    rng = np.random.default_rng(11)
    pairs = [(lognormal(rng, 30), lognormal(rng, 30, median=m)) for m in (1e5, 1.2e5, 0.8e5)]
    pairs.append(([lognormal(rng, 10) for _ in range(3)], lognormal(rng, 12)))
    many = stats.compare_many(pairs, seed=0)
    single = [stats.compare(b, h, seed=5) for b, h in pairs]
    assert [c.verdict for c in many] == [c.verdict for c in single]
    for a, b in zip(many, single, strict=True):
        assert a.ratio == pytest.approx(b.ratio, rel=0.01)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"base": [1.0, float("nan")] * 5}, "base contains NaN"),
        ({"head": [1.0, -2.0] * 5}, "head contains a time <= 0"),
        ({"base": [[1.0] * 8, []]}, r"base\[1\] is empty"),
        ({"base": []}, "base has no samples"),
        ({"head": "fast"}, "head must be a sequence"),
        ({"base": [1.0, [2.0]]}, "base mixes numbers and sequences"),
        ({"base": [["x"] * 9]}, r"base\[0\] must contain only numbers"),
        ({"rope": 0.0}, "rope must lie strictly between"),
        ({"probability": 1.0}, "probability must lie strictly between"),
        ({"resamples": 100}, "resamples must be at least 2000"),
        ({"seed": "abc"}, "seed must be"),
        ({"paired": True, "head": [1.0] * 9}, "paired=True needs base and head of the same shape"),
        ({"base_runs": [0, 1]}, r"base_runs\[0\] must give one run label per base group"),
        ({"base_runs": [0], "paired": True}, "base_runs is for unpaired comparisons"),
        ({"base_runs": [0], "run_shift_sd": 0.0}, "run_shift_sd must lie strictly between"),
    ],
)
def test_bad_input_is_refused_naming_the_argument(kwargs: dict, message: str) -> None:
    args = {"base": [1.0] * 10, "head": [1.1] * 10} | kwargs
    with pytest.raises((ValueError, TypeError), match=message):
        stats.compare(args.pop("base"), args.pop("head"), **args)


def test_result_is_frozen() -> None:
    c = stats.compare([1.0] * 10, [1.0] * 10, seed=0)
    with pytest.raises(AttributeError):
        c.verdict = "slower"  # type: ignore[misc]
    with pytest.raises(ValueError):
        c.log_ratio_draws[0] = 1.0
    with pytest.raises(ValueError):  # nor made writable again: its rows are the run's draws
        c.log_ratio_draws.setflags(write=True)


def test_three_or_more_processes_give_the_unbiased_variance_of_their_mean() -> None:
    """Known answer: groups at log-locations 1, 2, 3 (s^2 = 1) give a posterior variance s^2/G."""
    from stats.bootstrap import LOW, location_draws

    groups = [np.full(10, 1.0), np.full(10, 2.0), np.full(10, 3.0)]
    draws = location_draws([groups], 20_000, np.random.default_rng(0), LOW)[0]
    assert draws.mean() == pytest.approx(2.0, abs=0.02)
    assert draws.var() == pytest.approx(1 / 3, rel=0.05)
    assert draws.min() >= 1.0 and draws.max() <= 3.0


def test_medians_and_quantiles_are_numpys() -> None:
    from stats.compare import _quantiles
    from stats.prepared import medians as _medians

    rng = np.random.default_rng(11)
    sides = [[rng.random(n) for n in sizes] for sizes in ([10, 10, 10], [30], [7, 8], [10] * 18)]
    expected = [np.median(np.concatenate(side)) for side in sides]
    assert list(_medians(sides)) == expected
    # The quantiles: the order statistics of a partition at the points (as before the sort),
    # with the same linear rule, to the last bit; and numpy's own to rounding.
    draws = rng.standard_normal((5, 2000))
    qs = (0.05, 0.5, 0.95)
    pos = np.array(qs) * 1999
    lo = np.floor(pos).astype(int)
    hi = np.minimum(lo + 1, 1999)
    part = np.partition(draws, np.unique(np.concatenate([lo, hi])), axis=1)
    frac = (pos - lo)[:, None]
    before = part[:, lo].T * (1 - frac) + part[:, hi].T * frac
    assert np.array_equal(_quantiles(draws, qs), before)
    assert np.allclose(_quantiles(draws, qs), np.quantile(draws, qs, axis=1), rtol=1e-14)


def test_plain_lists_of_times_convert_as_the_general_checks_do() -> None:
    from stats._validate import _plain_groups, as_groups

    same = [[1, 2, 3], [4.5, 5, 6]]
    ragged = [[1, 2, 3], [4, 5]]
    for value in (same, ragged):
        fast = _plain_groups(value)
        assert fast is not None
        assert [g.tolist() for g in fast] == [[float(x) for x in g] for g in value]
        assert all(g.dtype == np.float64 for g in fast)
    # Anything else goes to the general checks, which name what is wrong.
    for bad in ([[1, 2], []], [[1, -2]], [[1, float("nan")]], [[1, "x"]], [1, 2], [[1, [2]]]):
        assert _plain_groups(bad) is None
    with pytest.raises(ValueError, match=r"base\[0\] contains a time <= 0"):
        as_groups([[1, -2]], "base")


def test_sides_alike_convert_together_as_each_on_its_own() -> None:
    from stats._validate import _plain_groups, plain_sides

    sides = [[[1, 2, 3], (4.5, 5, 6)], [[7, 8, 9], [1e9, 2, 3]]]
    together = plain_sides(sides)
    assert together is not None
    for side, groups in zip(sides, together, strict=True):
        alone = _plain_groups(side)
        assert alone is not None
        assert [g.tobytes() for g in groups] == [g.tobytes() for g in alone]
    # Groups that are arrays already (rnx.schema's process_arrays) convert to the same rows.
    arrays = plain_sides([[np.array(g, dtype=np.float64) for g in side] for side in sides])
    assert arrays is not None

    def as_bytes(converted: list[list[np.ndarray]]) -> list[list[bytes]]:
        return [[g.tobytes() for g in side] for side in converted]

    assert as_bytes(arrays) == as_bytes(together)
    # Sides not all alike, or not plain, are left to each side's own checks.
    for bad in (
        [[[1, 2]], [[1, 2], [3, 4]]],
        [[[1, 2]], [[1, 2, 3]]],
        [[[1, 2]], [[1, -2]]],
        [[[1, 2]], [[1, "x"]]],
        [[[1, 2]], [[1, [2]]]],
        [[np.ones(2)], [np.ones((2, 2))]],
        [[np.ones(1)], [np.array(1.0)]],
        [[[1, 2]], [1, 2]],
        [[[1, 2]], []],
        [],
    ):
        assert plain_sides(bad) is None


def test_the_first_bad_pair_is_named_whichever_side_checks_it() -> None:
    good = [[1.0] * 8, [1.1] * 8]
    with pytest.raises(ValueError, match=r"pairs\[1\]\.base\[0\] contains a time <= 0"):
        stats.compare_many([(good, good), ([[1.0] * 7 + [-1.0], good[1]], good), (good, [[0.0]])])
    with pytest.raises(ValueError, match=r"pairs\[2\] must be a \(base, head\) pair"):
        stats.compare_many([(good, good), (good, good), (good,)])


def _run_pairs(rng: np.random.Generator, configs: int, frozen: bool) -> tuple[list, list]:
    """A head run of 3 processes against 4 baseline runs of 3, per configuration."""
    pairs, labels = [], []
    for c in range(configs):
        base = [rng.lognormal(math.log(100 + c), 0.03, 10) for _ in range(12)]
        head = [rng.lognormal(math.log(103 + c), 0.03, 10) for _ in range(3)]
        side = list(stats.frozen_groups(base)) if frozen else [g.tolist() for g in base]
        pairs.append((side, [g.tolist() for g in head]))
        labels.append([r for r in range(4) for _ in range(3)])
    return pairs, labels


def _compare_module() -> Any:
    """stats/compare.py itself (the package's `stats.compare` is the function)."""
    return importlib.import_module("stats.compare")


def _numbers(cs: list[stats.Comparison]) -> list[tuple]:
    return [
        (
            c.verdict,
            c.reason,
            c.ratio,
            c.low,
            c.high,
            c.base_median,
            c.resolution,
            c.log_ratio_draws.tobytes(),
        )
        for c in cs
    ]


def test_a_prepared_baseline_gives_the_numbers_of_one_worked_out_anew() -> None:
    """The server compares every upload with the same baseline runs, prepared once
    (stats.prepare_baseline): a comparison against them, first or later, with the same head or
    another, gives exactly the numbers of the same values given as lists."""
    frozen, labels = _run_pairs(np.random.default_rng(5), 6, frozen=True)
    plain = [([g.tolist() for g in b], h) for b, h in frozen]
    prepared = stats.prepare_baseline([b for b, _ in frozen], labels)
    first = stats.compare_many(frozen, seed=1, baseline=prepared)
    again = stats.compare_many(frozen, seed=1, baseline=prepared)
    # What it holds is shared by every later comparison, so none of it can be changed.
    made = prepared.model(_compare_module().RUN_SHIFT_SD)
    assert made is prepared.model(_compare_module().RUN_SHIFT_SD)  # made once
    assert made.shifted is not None  # the process-shift path is the one compared here
    for a in (made.yb, made.run_loc, *made.shifted, prepared.sides[0].locations):
        with pytest.raises(ValueError):
            a[0] = 0.0
    expected = _numbers(stats.compare_many(plain, seed=1, base_runs=labels))
    assert _numbers(first) == _numbers(again) == expected
    # Another head against the same prepared sides; and unpaired without runs.
    other = [(b, [[x * 1.3 for x in g] for g in h]) for b, h in frozen]
    other_plain = [(pb, h) for (pb, _), (_, h) in zip(plain, other, strict=True)]
    assert _numbers(stats.compare_many(other, seed=2, baseline=prepared)) == _numbers(
        stats.compare_many(other_plain, seed=2, base_runs=labels)
    )
    unlabelled = stats.prepare_baseline([b for b, _ in frozen])
    assert _numbers(stats.compare_many(other, seed=3, baseline=unlabelled)) == _numbers(
        stats.compare_many(other_plain, seed=3)
    )


def test_a_prepared_baseline_is_only_for_the_sides_it_was_made_from() -> None:
    frozen, labels = _run_pairs(np.random.default_rng(6), 3, frozen=True)
    prepared = stats.prepare_baseline([b for b, _ in frozen], labels)
    copies = [(list(b), h) for b, h in frozen]  # the same numbers, other objects
    for pairs in (copies, frozen[:2], frozen[::-1]):
        with pytest.raises(ValueError, match="baseline must be prepared from these pairs"):
            stats.compare_many(pairs, seed=0, baseline=prepared)
    with pytest.raises(ValueError, match="paired mode has no baseline"):
        stats.compare_many(frozen, seed=0, baseline=prepared, paired=True)
    # A side that fails the checks fails when prepared, naming it.
    bad = [[1.0] * 10, [1.0] * 9 + [-1.0]]
    with pytest.raises(ValueError, match=r"bases\[1\]\[1\] contains a time <= 0|time <= 0"):
        stats.prepare_baseline([[[1.0] * 10], bad], [[0], [0, 1]])
    with pytest.raises(ValueError, match="base_runs must give one sequence"):
        stats.prepare_baseline([b for b, _ in frozen], labels[:2])
    assert not hasattr(_compare_module(), "_KEPT")  # no cache behind the caller's back
