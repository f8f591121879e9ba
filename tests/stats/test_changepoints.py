"""Change points in a run history: known answers on seeded series, incremental use as the
server makes it, and agreement with Apache Otava's E-Divisive on recorded series."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import stats
from benchmarks.quality import changepoint_calibration as calibration
from benchmarks.quality import changepoint_noise
from benchmarks.quality import changepoint_reference as reference
from stats.changepoints import _candidate, _ramp_shape, _ramp_sse

REFERENCE = Path(__file__).resolve().parents[1] / "data" / "otava-reference.json"


def noise(n: int, seed: int, sd: float = 0.01) -> np.ndarray:
    return np.random.default_rng(seed).normal(0.0, sd, n)


def steps(*segments: tuple[int, float]) -> np.ndarray:
    """Log-locations: (runs, ratio) per segment."""
    return np.concatenate([np.full(n, math.log(r)) for n, r in segments])


def incremental(history: np.ndarray, window: int = 100) -> list[tuple[int, int, stats.ChangePoint]]:
    """The server's use: after every run, detect on the newest `window` runs with every change
    reported so far as known. Returns (run index when reported, absolute after, change)."""
    reported: list[tuple[int, int, stats.ChangePoint]] = []
    for t in range(1, len(history) + 1):
        start = max(0, t - window)
        placed = sorted(reported, key=lambda r: r[1])  # a change found around a newer one
        inside = [(a - start, cp) for _, a, cp in placed if a > start]
        before = [(a - start, cp) for _, a, cp in placed if a <= start][-1:]
        known = [
            stats.KnownChange(a, cp.ratio, cp.low, cp.high, key=cp) for a, cp in before + inside
        ]
        for cp in stats.detect(history[start:t], known=known):
            reported.append((t - 1, cp.after + start, cp))
    return reported


def test_a_clean_step_is_found_at_its_first_run() -> None:
    history = steps((40, 1.0), (10, 1.10)) + noise(50, seed=1)
    (cp,) = stats.detect(history)
    assert (cp.before, cp.after) == (39, 40)
    assert (cp.runs_before, cp.runs_after) == (40, 10)
    assert 1.09 < cp.ratio < 1.11
    assert cp.low < cp.ratio < cp.high
    assert cp.low > 1.08 and cp.high < 1.12
    assert cp.p_value < 1e-6
    assert cp.undoes is None


def test_a_speedup_is_a_change_too() -> None:
    history = steps((40, 1.0), (10, 0.8)) + noise(50, seed=2)
    (cp,) = stats.detect(history)
    assert cp.after == 40
    assert 0.79 < cp.ratio < 0.81


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_pure_noise_has_no_change(seed: int) -> None:
    assert stats.detect(noise(200, seed=seed)) == ()


def test_a_step_below_min_change_is_not_reported() -> None:
    # 1% with almost no noise is significant, but smaller than the 2% worth reporting.
    history = steps((60, 1.0), (40, 1.01)) + noise(100, seed=3, sd=0.001)
    assert stats.detect(history) == ()
    (cp,) = stats.detect(history, min_change=0.005)
    assert cp.after == 60


def test_slow_runs_in_a_short_segment_are_not_a_change() -> None:
    # Runs have a heavy right tail (all processes of a run beside a noisy neighbour). One very
    # slow run among the newest three moves their mean by 10%, which a t-test would call a
    # change; ranks do not.
    history = noise(100, seed=4)
    history[-2] += 0.3
    assert stats.detect(history) == ()


def test_a_change_needs_min_runs_after_it() -> None:
    history = steps((50, 1.0), (3, 1.2)) + noise(53, seed=5)
    assert [cp.after for cp in stats.detect(history)] == [50]
    assert stats.detect(history[:-1]) == ()
    # Two runs after it are enough with min_runs=2, but only at a weaker level: with ranks,
    # 2 runs out of 52 are at best p = 2 / C(52, 2) = 0.0015.
    assert stats.detect(history[:-1], min_runs=2) == ()
    assert not stats.detect(history)[0].early
    # In a short history (under 16 runs) the noise-scaled test reports it early.
    (early,) = stats.detect(history[40:-1], min_runs=2)
    assert (early.after, early.early) == (10, True)


def test_each_change_is_reported_once_under_incremental_use() -> None:
    history = steps((60, 1.0), (60, 1.10), (40, 1.25)) + noise(160, seed=6)
    reported = incremental(history)
    assert [(t, a) for t, a, _ in reported] == [(62, 60), (122, 120)]
    # The second step is measured from the first one, not from the start of the window.
    assert 1.12 < reported[1][2].ratio < 1.15


def test_the_same_change_placed_one_run_later_is_not_a_new_one() -> None:
    history = steps((40, 1.0), (20, 1.10)) + noise(60, seed=7)
    known = [stats.KnownChange(41, 1.1, 1.09, 1.11)]
    assert stats.detect(history, known=known) == ()


def test_a_change_before_the_newest_known_one_is_found_around_it() -> None:
    # A step at 40 that the newest known change (at 80) masked: the search around that change
    # finds it, and finds the known change again without reporting it twice.
    history = steps((40, 1.0), (40, 1.10), (40, 1.0)) + noise(120, seed=8)
    known = [stats.KnownChange(80, 0.91, 0.9, 0.92)]
    [found] = stats.detect(history, known=known)
    assert found.after == 40 and 1.08 < found.ratio < 1.12 and found.undoes is None
    assert [cp.after for cp in stats.detect(history)] == [40, 80]
    # The known change placed a run or two off is still the same change, not a new one (two
    # runs early, its first runs read as the start of a drift: an update of it, not a new one).
    for after in (78, 79, 81, 82):
        moved = [stats.KnownChange(40, 1.1, 1.09, 1.11), stats.KnownChange(after, 0.91, 0.9, 0.92)]
        assert all(cp.continues is moved[1] for cp in stats.detect(history, known=moved))


def test_only_the_segments_around_the_newest_known_change_are_searched_again() -> None:
    # Two known changes: the segment before the older one is not searched again.
    history = steps((30, 1.0), (30, 1.10), (30, 1.0), (30, 1.10)) + noise(120, seed=8)
    known = [stats.KnownChange(60, 0.91, 0.9, 0.92), stats.KnownChange(90, 1.1, 1.09, 1.11)]
    assert stats.detect(history, known=known) == ()
    assert [cp.after for cp in stats.detect(history, known=known[1:])] == [30, 60]


def test_a_hidden_change_found_later_is_placed_at_its_true_run_incrementally() -> None:
    # A 6% step 10 runs before a 12% one, reported after the 12% one (passed as known, as a
    # server that found only it would): the 6% step is placed at its own run.
    history = steps((30, 1.0), (10, 1.06), (15, 1.06 * 1.12)) + noise(55, seed=31)
    [found] = stats.detect(history, known=[stats.KnownChange(40, 1.12, 1.1, 1.14)])
    assert found.after == 30 and 1.04 < found.ratio < 1.08


def test_an_undoing_step_is_recognised_incrementally() -> None:
    history = steps((60, 1.0), (20, 1.10), (20, 1.0)) + noise(100, seed=9)
    reported = incremental(history)
    assert [a for _, a, _ in reported] == [60, 80]
    (_, _, up), (_, _, down) = reported
    assert down.ratio < 1
    assert isinstance(down.undoes, stats.KnownChange) and down.undoes.key is up


def test_an_undoing_step_found_with_the_step_points_at_it() -> None:
    history = steps((60, 1.0), (20, 1.10), (20, 1.0)) + noise(100, seed=9)
    up, down = stats.detect(history)
    assert (up.after, down.after) == (60, 80)
    assert down.undoes is up and up.undoes is None


def test_an_undoing_step_after_a_change_before_the_window_uses_the_reported_ratio() -> None:
    # The window starts after the earlier change: only its reported ratio is known.
    history = steps((30, 1.10), (10, 1.0)) + noise(40, seed=10)
    earlier = stats.KnownChange(-5, 1.10, 1.09, 1.11, key="cp-1")
    (cp,) = stats.detect(history, known=[earlier])
    assert cp.after == 30 and cp.undoes is earlier
    # A step the other way that takes back only a third is not undoing it.
    partial = steps((30, 1.10), (10, 1.10 / 1.03)) + noise(40, seed=10, sd=0.002)
    (cp,) = stats.detect(partial, known=[earlier])
    assert cp.undoes is None


def test_a_partial_revert_does_not_undo() -> None:
    history = steps((60, 1.0), (20, 1.20), (20, 1.12)) + noise(100, seed=11, sd=0.003)
    up, down = stats.detect(history)
    assert (up.after, down.after) == (60, 80)
    assert down.undoes is None


def test_a_second_step_the_same_way_does_not_undo() -> None:
    history = steps((60, 1.0), (20, 1.10), (20, 1.25)) + noise(100, seed=12)
    _, second = stats.detect(history)
    assert second.undoes is None


def ar1(n: int, rho: float, seed: int, sd: float = 0.01) -> np.ndarray:
    """An unchanged history whose runs wander: AR(1) with lag-1 correlation rho, marginal sd."""
    rng = np.random.default_rng(seed)
    shocks = rng.normal(0.0, sd * math.sqrt(1 - rho**2), n)
    y = np.empty(n)
    y[0] = rng.normal(0.0, sd)
    for i in range(1, n):
        y[i] = rho * y[i - 1] + shocks[i]
    return y


@pytest.mark.parametrize("rho", [0.6, 0.9])
def test_runs_that_wander_are_not_a_change(rho: float) -> None:
    # Uncorrected for autocorrelation, 4 of these 30 histories (seeds 12, 15, 20, 22 at 0.6)
    # gave 2 change points each.
    assert [s for s in range(30) if stats.detect(ar1(200, rho, s))] == []


def test_the_autocorrelation_is_estimated_from_the_residuals() -> None:
    from stats.changepoints import _autocorrelation

    for rho in (0.0, 0.3, 0.6, 0.9):
        y = ar1(400, rho, seed=21)
        # A 10% step between the sides is not autocorrelation (standard error about 0.05).
        assert _autocorrelation(y[:200], y[200:] + math.log(1.1)) == pytest.approx(rho, abs=0.15)


def test_a_burst_of_slowed_runs_is_not_a_step() -> None:
    history = noise(120, seed=3)
    history[100:103] += np.log([1.12, 1.25, 1.18])  # three runs that each met a neighbour
    assert stats.detect(history[:103]) == ()
    assert stats.detect(history) == ()
    # The same three runs slowed alike are a step.
    history[100:103] = noise(3, seed=4) + math.log(1.18)
    assert [cp.after for cp in stats.detect(history[:103])] == [100]


@pytest.mark.parametrize("second", [1.10, 1 / 1.10])
def test_a_change_5_runs_after_a_reported_one_is_placed_at_once(second: float) -> None:
    history = steps((60, 1.0), (5, 1.10), (20, 1.10 * second)) + noise(85, seed=22)
    reported = [(t, after) for t, after, _ in incremental(history)]
    # Each reported 3 runs after it (its third run is index after + 2).
    assert reported == [(62, 60), (67, 65)]
    undoes = incremental(history)[1][2].undoes
    assert (undoes is not None) == (second < 1)


def test_run_location_sees_through_one_disturbed_process() -> None:
    rng = np.random.default_rng(13)
    clean = [rng.lognormal(math.log(1000.0), 0.01, 10) for _ in range(3)]
    disturbed = [clean[0], clean[1], clean[2] * 1.3]
    assert abs(stats.run_location(clean) - math.log(1000.0)) < 0.02
    assert abs(stats.run_location(disturbed) - stats.run_location(clean)) < 0.01
    # Scaling every time scales the location exactly: an injected step is a shift of it.
    scaled = [g * 1.1 for g in clean]
    assert stats.run_location(scaled) == pytest.approx(stats.run_location(clean) + math.log(1.1))
    assert stats.run_location(clean[0]) == pytest.approx(stats.run_location([clean[0]]))


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"history": [0.0, float("inf")]}, ValueError, r"history\[1\] is inf.*NaN for a gap"),
        ({"history": "abc"}, TypeError, "sequence of run locations"),
        ({"history": [[0.0, 1.0]]}, ValueError, "one-dimensional"),
        (
            {"history": [0.0] * 5, "known": [stats.KnownChange(5, 1.1, 1.0, 1.2)]},
            ValueError,
            "past the history's last run",
        ),
        (
            {
                "history": [0.0] * 9,
                "known": [stats.KnownChange(6, 1.1, 1.0, 1.2), stats.KnownChange(3, 1.1, 1.0, 1.2)],
            },
            ValueError,
            "run order",
        ),
        (
            {"history": [0.0] * 5, "known": [stats.KnownChange(2, 0.0, 1.0, 1.2)]},
            ValueError,
            "positive ratio",
        ),
        ({"history": [0.0] * 5, "known": [(2, 1.1)]}, TypeError, "KnownChange"),
        ({"history": [0.0] * 5, "p_value": 0.0}, ValueError, "p_value"),
        ({"history": [0.0] * 5, "min_change": 1.5}, ValueError, "min_change"),
        ({"history": [0.0] * 5, "min_runs": 1}, ValueError, "min_runs"),
        ({"history": [0.0] * 5, "min_signal": -1}, ValueError, "min_signal"),
    ],
)
def test_bad_input_names_the_problem(kwargs: dict, error: type, message: str) -> None:
    history = kwargs.pop("history")
    with pytest.raises(error, match=message):
        stats.detect(history, **kwargs)


def test_short_and_constant_histories_have_no_change() -> None:
    assert stats.detect([]) == ()
    assert stats.detect([0.1] * 5) == ()
    assert stats.detect([0.1] * 50) == ()


def test_the_answer_is_deterministic() -> None:
    history = steps((40, 1.0), (20, 1.05), (20, 0.97)) + noise(80, seed=14)
    assert stats.detect(history) == stats.detect(list(history))


# ---------------------------------------------------------------- against Apache Otava


def reference_cases() -> list[tuple[str, dict]]:
    cases = json.loads(REFERENCE.read_text())["cases"]
    return sorted(cases.items())


@pytest.mark.parametrize(("name", "case"), reference_cases())
@pytest.mark.parametrize("min_runs", [2, 3])
def test_the_e_divisive_statistic_matches_otava(name: str, case: dict, min_runs: int) -> None:
    expected = case["best_split"][str(min_runs)]
    result = _candidate(np.array(case["series"]), min_runs)
    assert result is not None
    tau, kappa, q = result
    assert (tau, kappa) == (expected["tau"], expected["kappa"]), name
    assert q == pytest.approx(expected["q"], rel=1e-9)


@pytest.mark.parametrize(("name", "case"), reference_cases())
def test_the_change_points_match_otavas(name: str, case: dict) -> None:
    found = [cp.after for cp in stats.detect(case["series"])]
    assert found == case["otava_change_points"], name


def test_the_statistic_matches_its_definition() -> None:
    """Q(tau, kappa) written out from Matteson and James, on random series with steps."""
    rng = np.random.default_rng(15)
    for _ in range(50):
        m = int(rng.integers(6, 30))
        z = rng.standard_normal(m) + (np.arange(m) >= rng.integers(1, m)) * rng.normal(0, 2)
        best = (-math.inf, 0, 0)
        for tau in range(3, m - 2):
            for kappa in range(tau + 3, m + 1):
                x, y = z[:tau], z[tau:kappa]
                n, k = len(x), len(y)
                e = (
                    2 * np.abs(x[:, None] - y[None, :]).mean()
                    - np.abs(x[:, None] - x[None, :]).sum() / (n * (n - 1))
                    - np.abs(y[:, None] - y[None, :]).sum() / (k * (k - 1))
                )
                best = max(best, (n * k / (n + k) * e, tau, kappa))
        result = _candidate(z, 3)
        assert result is not None
        assert result[:2] == best[1:]
        assert result[2] == pytest.approx(best[0], rel=1e-9)


def test_the_statistics_load_scipy_stats_only_when_change_points_are_tested() -> None:
    # scipy.stats takes most of a second to import: every server start and every `rnx` command
    # (which load the statistics) paid it, though only change-point detection uses it.
    code = (
        "import sys, gate_server.cli.main, rnx_cli.main, stats\n"
        "print('scipy.stats' in sys.modules)\n"
        "stats.detect([1.0] * 8 + [2.0] * 8)\n"
        "print('scipy.stats' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert out.stdout.split() == ["False", "True"]


# ---------------------------------------------------------------- any input a run can produce


@pytest.mark.parametrize(
    "low, high", [(0.0, 1000.0), (-1e308, 1e308), (math.log(5e-324), math.log(1.7e308))]
)
def test_huge_steps_are_reported_with_a_saturated_ratio(low: float, high: float) -> None:
    found = stats.detect(np.r_[np.full(10, low), np.full(10, high)])
    assert [(cp.before, cp.after) for cp in found] == [(9, 10)]
    assert all(math.isfinite(v) and v > 1 for v in (found[0].ratio, found[0].low, found[0].high))


def test_nan_is_a_gap_and_changes_are_placed_on_the_history() -> None:
    history = steps((20, 1.0), (20, 1.1)) + noise(40, seed=3)
    gapped = np.insert(history, [5, 20, 20, 33], np.nan)  # gaps at 5, 21, 22 and 36
    found = stats.detect(gapped)
    assert [(cp.before, cp.after, cp.runs_before) for cp in found] == [(20, 23, 20)]
    known = [stats.KnownChange(23, found[0].ratio, found[0].low, found[0].high)]
    assert stats.detect(gapped, known=known) == ()
    assert stats.detect([math.nan] * 30) == ()


def test_a_long_history_is_searched_in_bounded_memory() -> None:
    import tracemalloc

    history = steps((3333, 1.0), (5, 1.1), (1662, 1.0), (5000, 1.1)) + noise(10_000, seed=5)
    tracemalloc.start()
    try:
        found = stats.detect(history)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert [cp.after for cp in found][:3] == [3333, 3338, 5000]
    assert peak < 200e6, f"{peak / 1e6:.0f} MB"


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.floats(allow_nan=True, allow_infinity=False),
            st.floats(min_value=-745.2, max_value=709.8),  # logs of positive float times
            st.sampled_from([0.0, 1e-300, -1e-300]),  # ties and near-ties
        ),
        max_size=80,
    ),
    st.lists(st.integers(min_value=-5, max_value=79), max_size=4),
)
def test_any_history_gives_an_answer(history: list[float], afters: list[int]) -> None:
    known = [
        stats.KnownChange(a, 1.05, 1.0, 1.1) for a in sorted(a for a in afters if a < len(history))
    ]
    for cp in stats.detect(history, known=known):
        assert 0 <= cp.before < cp.after < len(history)
        assert not math.isnan(history[cp.before]) and not math.isnan(history[cp.after])
        assert all(math.isfinite(v) and v > 0 for v in (cp.ratio, cp.low, cp.high))
        assert 0 <= cp.p_value <= 1


def test_the_smallest_step_reported_grows_with_the_runs_noise() -> None:
    # 3% run-to-run noise: the best of the splits of 200 unchanged runs is an 8-run dip of 4.6%
    # with p = 5e-5, below 2x the noise (6%).
    history = noise(200, seed=6, sd=0.03)
    assert [cp.after for cp in stats.detect(history, min_signal=0)] == [104, 112]
    assert stats.detect(history) == ()
    stepped = history + steps((150, 1.0), (50, 1.10))
    (cp,) = stats.detect(stepped)
    assert abs(cp.after - 150) <= 2 and 1.07 < cp.ratio < 1.13


def test_a_clear_step_in_a_short_history_is_reported_early() -> None:
    # 10 runs, then a 10% step at 1% noise: no rank test reaches 5e-4 with 3 runs after it
    # (at best 2 / C(13, 3) = 0.007); the noise-scaled early test does, and says so.
    rng = np.random.default_rng(29)
    found = []
    for _ in range(50):
        history = rng.normal(0.0, 0.01, 13)
        history[10:] += math.log(1.10)
        found += [cp for cp in stats.detect(history) if cp.after == 10]
    assert len(found) >= 45
    assert all(cp.early and cp.ratio > 1.05 and cp.p_value <= 0.0005 for cp in found)


def test_short_unchanged_histories_rarely_give_an_early_report() -> None:
    # Every prefix of 8-16 runs, as the server looks after each run, at 3% noise (the floor is
    # then 6%): at most 2% of 300 new series get any report (measured: under 1%).
    rng = np.random.default_rng(30)
    reported = 0
    for _ in range(300):
        history = rng.normal(0.0, 0.03, 16)
        reported += any(stats.detect(history[:n]) for n in range(8, 17))
    assert reported <= 6


@pytest.mark.parametrize("case", calibration.CASES)
def test_false_change_points_stay_rare_under_each_noise_case(case: str) -> None:
    # As the server calls it (after every run, newest 200, known ones passed back), 2 seeded
    # histories of 400 runs per case of issue 29: at most 2 change points in 800 runs (the
    # benchmark measures 0.15-0.75 per 1,000 over 20,000 runs per case; an uncalibrated test
    # gave 2-5 per 1,000 at 3% noise and with correlated runs).
    reported = 0
    for history in range(2):
        y = calibration.noise(case, 400, np.random.default_rng([29, history]))
        reported += len(changepoint_noise.incremental(y, calibration.WINDOW))
    assert reported <= 2


def test_a_step_after_ten_runs_or_five_after_another_is_found_within_three_runs() -> None:
    rng = np.random.default_rng(31)
    found = 0
    for history in range(20):
        y = rng.normal(0.0, 0.01, 40)
        at = 10 if history % 2 else 35
        if at == 35:
            y[30:] += math.log(1.10)  # an earlier change 5 runs before the scored one
        y[at:] += math.log(1.10)
        found += any(
            abs(after - at) <= 2 and t - at <= 3 and cp.ratio > 1
            for t, cp, after in changepoint_noise.incremental(y[: at + 3], 200)
        )
    assert found >= 18


def test_a_ramp_is_one_drift_and_steps_stay_steps() -> None:
    # As the server calls it: a 10% ramp over 40 runs at 1% noise ends as one drift with its
    # start, end and total change; two 10% steps 5 runs apart and a lone step stay steps.
    rng = np.random.default_rng(32)
    one_drift = 0
    for _ in range(10):
        y = rng.normal(0.0, 0.01, 160)
        y[60:100] += np.linspace(0, math.log(1.10), 41)[1:]
        y[100:] += math.log(1.10)
        reported = changepoint_noise.incremental(y, 200)
        if len(reported) == 1:
            cp = reported[0][1]
            one_drift += cp.end is not None and 1.07 < cp.ratio < 1.13
    assert one_drift >= 8
    for _ in range(10):
        y = rng.normal(0.0, 0.01, 100)
        y[60:] += math.log(1.10)
        y[65:] += math.log(1.10)
        reported = changepoint_noise.incremental(y, 200)
        assert [cp.end for _, cp, _ in reported] == [None] * len(reported) and reported


def test_otavas_own_short_test_series_are_reported_early() -> None:
    # Otava's tests expect a change in series of 11 runs; no rank test reaches 5e-4 there
    # (at best 2 / C(11, 5) = 0.004), the early test does. The 20-run one needs no early test.
    data = json.loads(
        (Path(__file__).parents[1] / "data/otava_0.8.0_test_expectations.json").read_text()
    )
    for case in data["cases"]:
        found = stats.detect(np.log(case["series"]))
        assert [cp.after for cp in found] == case["expected"], case["test"]
        assert [cp.early for cp in found] == [len(case["series"]) < 16], case["test"]


def test_the_reference_suites_short_cases_are_reproduced() -> None:
    # Otava's and MongoDB's own test expectations (benchmarks.quality.changepoint_reference
    # prints them all, with the references): of the 25 cases under 400 runs, those that
    # differ are the ones docs/statistics.md explains (a change 2 runs before the end, a
    # one-run outlier, 14 runs with three levels, MongoDB's 33 for a revert at 30, its
    # profile counted at p = 0.01).
    cases = [c for c in reference.load_cases() if len(reference.series_of(c)) < 400]
    reproduced = [
        reference.matches(
            c["expected"], reference.ours(reference.series_of(c), c.get("params", {}))
        )
        for c in cases
    ]
    assert len(cases) == 25 and sum(reproduced) >= 17, sum(reproduced)


def _season_reported_swing_by_swing() -> tuple[np.ndarray, list[stats.KnownChange]]:
    """130 runs of a season (period 20 runs, swings of about 3 noise standard deviations) and
    the change points the server reported in its first 116 runs, one per swing."""
    rng = np.random.default_rng(1)
    y = 0.1 * np.sin(2 * math.pi * np.arange(130) / 20) + rng.normal(0.0, 0.04, 130)
    afters, ends = [9, 20, 31, 42, 51, 60, 71, 80, 91, 101, 106], {9: 13, 106: 114}
    known = []
    for i, after in enumerate(afters):
        ratio = 0.87 if i % 2 == 0 else 1.15
        known.append(
            stats.KnownChange(after, ratio, ratio * 0.97, ratio * 1.03, i, ends.get(after))
        )
    return y, known


def test_a_season_reported_swing_by_swing_gets_no_new_swing() -> None:
    # Each swing was reported as a level (its segment is flat enough on its own); the next one
    # is not a change: searched as a whole, the window shows noise that runs on (before, run
    # 119 was reported too, and the replay went on cutting the season into 19 pieces).
    y, known = _season_reported_swing_by_swing()
    assert stats.detect(y, known=known) == ()


def test_steps_after_many_known_changes_are_still_found() -> None:
    # The same known changes as real steps of independent noise, and a real 8% step at run
    # 119: the window's own levels are those steps, its noise about them is independent, and
    # the new step is reported.
    _, known = _season_reported_swing_by_swing()
    rng = np.random.default_rng(2)
    y = rng.normal(0.0, 0.01, 130)
    for k in known:
        y[k.after :] += math.log(k.ratio)
    y[119:] += math.log(1.08)
    found = stats.detect(y, known=[replace(k, end=None) for k in known])
    assert [cp.after for cp in found] == [119]


def test_a_ramp_still_climbing_is_held_to_the_floor_by_its_climb() -> None:
    # A 10% ramp over 40 runs at 1% noise, after 60 flat runs, looked at after every run from
    # its 2nd to its 15th (nothing reported before: `detect` on the prefix alone). The step's
    # shift there is about half the climb so far and often stayed below 2x the noise, with p
    # below 1e-5; held to the floor by the drift's climb, it is reported in 91 of 100 (86
    # before).
    reported = 0
    for seed in range(100):
        y = noise(76, seed)
        y[60:] += np.arange(1, 17) * math.log(1.10) / 40
        reported += any(stats.detect(y[:t]) for t in range(62, 76))
    assert reported >= 89


def test_a_trend_since_the_first_run_is_no_change() -> None:
    # Runs that climb 2% each from the first one (1% noise): no level before the climb, so no
    # change (before, a drift from run 2 was reported at 15 runs in every history). A ramp
    # after 20 flat runs is still one drift.
    trends = 0
    for seed in range(20):
        y = 0.02 * np.arange(40) + noise(40, 100 + seed)
        trends += len(changepoint_noise.incremental(y, 200))
    assert trends <= 2
    for seed in range(5):
        y = noise(60, 200 + seed)
        y[20:] += 0.005 * np.arange(1, 41)
        ((_, cp, after),) = changepoint_noise.incremental(y, 200)
        assert cp.end is not None and 16 <= after <= 24


def test_the_ramp_fits_match_their_definition() -> None:
    # The drift fits' residual sums of squares come from prefix sums; least squares on each
    # ramp's shape directly gives the same, for every start and end of a short series.
    z = noise(30, seed=7) + np.linspace(0.0, 0.05, 30)
    start, end = np.meshgrid(np.arange(31), np.arange(31), indexing="ij")
    keep = end >= start
    start, end = start[keep], end[keep]
    shape = _ramp_shape(30, start, end)
    zc = z - z.mean()
    fitted = [g * (g @ zc) / (g @ g) if g @ g > 1e-12 else 0 * g for g in shape]
    direct = np.array([np.sum((zc - f) ** 2) for f in fitted])
    assert np.allclose(_ramp_sse(z, start, end), direct, rtol=0, atol=1e-12)
