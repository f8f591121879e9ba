"""The run-level model: a head run against baseline runs, and the gate's tiers on it."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import stats


def _run(
    rng: np.random.Generator,
    locations: np.ndarray,
    *,
    processes: int = 3,
    samples: int = 10,
    process_sd: float = 0.01,
    shift: float = 0.0,
    config_shift_sd: float = 0.0,
    process_shifts: tuple[float, ...] = (),
) -> list[list[np.ndarray]]:
    """One run: per configuration, `processes` groups of times. The run moves every
    configuration by `shift` (log scale) and each one by its own draw of config_shift_sd;
    process p moves every configuration by process_shifts[p] (0 past its end)."""
    own = rng.normal(0, config_shift_sd, len(locations)) if config_shift_sd else 0.0
    centre = locations + shift + own
    moved = [process_shifts[p] if p < len(process_shifts) else 0.0 for p in range(processes)]
    return [
        [
            np.exp(c + moved[p] + rng.normal(0, process_sd) + rng.normal(0, 0.01, samples))
            for p in range(processes)
        ]
        for c in centre
    ]


def _compare(
    history: list[list[list[np.ndarray]]],
    head: list[list[np.ndarray]],
    seed: int = 0,
    runs: bool = True,
) -> dict[str, stats.Comparison]:
    pairs = [([g for run in history for g in run[c]], head[c]) for c in range(len(head))]
    labels = [[r for r, run in enumerate(history) for _ in run[c]] for c in range(len(head))]
    cs = stats.compare_many(pairs, seed=seed, base_runs=labels if runs else None)
    return {f"c{i}": c for i, c in enumerate(cs)}


def _history(rng: np.random.Generator, locations: np.ndarray, k: int, run_sd: float):
    return [_run(rng, locations, shift=rng.normal(0, run_sd)) for _ in range(k)]


def test_a_busy_head_run_is_not_a_regression() -> None:
    """Baseline runs that differ by about 3% from one another, and a head run 6% slower as a
    whole (its runner was busy): the processes-as-independent view calls most configurations
    slower; the run-level model sees the runner and passes."""
    rng = np.random.default_rng(1)
    locations = np.log(rng.uniform(1e4, 1e6, 24))
    history = _history(rng, locations, 6, 0.03)
    head = _run(rng, locations, shift=0.06)
    flat = _compare(history, head, runs=False)
    assert sum(c.verdict == "slower" for c in flat.values()) >= 12
    assert stats.gate(flat).tier in ("WARN", "BLOCK")
    model = _compare(history, head)
    decision = stats.gate(model)
    assert decision.tier == "PASS", decision.reasons
    some = next(iter(model.values()))
    assert some.run_shift is not None and 1.02 < some.run_shift < 1.12
    assert some.base_runs == 6


def test_one_slowed_configuration_in_a_busy_run_blocks_alone() -> None:
    rng = np.random.default_rng(2)
    locations = np.log(rng.uniform(1e4, 1e6, 48))
    history = _history(rng, locations, 6, 0.03)
    slowed = locations.copy()
    slowed[7] += np.log(1.4)
    head = _run(rng, slowed, shift=0.05)
    decision = stats.gate(_compare(history, head))
    assert decision.tier == "BLOCK"
    assert decision.blocked == ("c7",)
    assert decision.warned == ()


def test_a_change_that_slows_every_configuration_is_not_taken_for_the_runner() -> None:
    """Runs in the history differ by about 1%: a 40% slowdown of everything is far beyond any
    runner shift it shows, so it blocks everywhere."""
    rng = np.random.default_rng(3)
    locations = np.log(rng.uniform(1e4, 1e6, 12))
    history = _history(rng, locations, 6, 0.01)
    head = _run(rng, locations, shift=np.log(1.4))
    decision = stats.gate(_compare(history, head))
    assert decision.tier == "BLOCK"
    assert len(decision.blocked) == 12


def test_two_of_three_head_processes_slowed_everywhere_are_the_runner_not_a_regression() -> None:
    """A busy neighbour for most of the job: the head's first two processes ran 40% slower in
    every configuration, its third did not (as one process of a baseline run now and then
    did). Once the processes' shifts are taken out, the head's median is the slow processes';
    its own fastest process says that level is in doubt, so the run is not blocked. All three
    slowed alike is a change, and blocks."""
    rng = np.random.default_rng(8)
    locations = np.log(rng.uniform(1e4, 1e6, 24))
    slow = np.log(1.4)
    history = [
        _run(rng, locations, processes=9, shift=rng.normal(0, 0.01), process_shifts=moved)
        for moved in [(slow,), (), (0.0, 0.0, slow), (), (), (0.0, slow)]
    ]
    split = stats.gate(_compare(history, _run(rng, locations, process_shifts=(slow, slow))))
    assert split.tier != "BLOCK", split.reasons
    alike = stats.gate(_compare(history, _run(rng, locations, process_shifts=(slow,) * 3)))
    assert alike.tier == "BLOCK" and len(alike.blocked) == 24


def test_a_head_noisier_than_its_history_is_read_with_its_own_spread() -> None:
    """A quiet history (processes 1% apart) and a head on a busy runner (4% apart): the head's
    process part is read with its own spread, not the history's. Its 90% intervals held the
    truth 0.59 of the time read with the history's spread, 0.73 now (not 0.90: the head's part
    is only read as noisier as far as its own three processes show); a head as quiet as its
    history still covers."""
    rng = np.random.default_rng(9)
    locations = np.log(rng.uniform(1e4, 1e6, 24))
    busy, quiet = [], []
    for _ in range(8):
        history = _history(rng, locations, 6, 0.01)
        for sd, covered in ((0.04, busy), (0.01, quiet)):
            head = _compare(history, _run(rng, locations, process_sd=sd))
            covered += [c.low <= 1.0 <= c.high for c in head.values()]
    assert np.mean(busy) >= 0.7, np.mean(busy)
    assert np.mean(quiet) >= 0.85, np.mean(quiet)


def test_one_baseline_run_relies_on_the_prior_and_still_blocks_a_big_slowdown() -> None:
    rng = np.random.default_rng(4)
    locations = np.log(rng.uniform(1e4, 1e6, 48))
    history = _history(rng, locations, 1, 0.0)
    slowed = locations.copy()
    slowed[3] += np.log(1.5)
    cs = _compare(history, _run(rng, slowed))
    assert stats.gate(cs).blocked == ("c3",)
    assert all(c.base_runs == 1 for c in cs.values())


def test_inconclusive_configurations_are_notes_with_what_the_runner_resolves() -> None:
    """Noisy processes: the configurations cannot be told apart within the 2% rope. The run
    passes, and each inconclusive one says how large a change this runner would resolve."""
    rng = np.random.default_rng(5)
    locations = np.log(rng.uniform(1e4, 1e6, 6))
    history = [_run(rng, locations, process_sd=0.04) for _ in range(2)]
    head = _run(rng, locations, process_sd=0.04)
    cs = _compare(history, head)
    decision = stats.gate(cs)
    assert decision.tier == "PASS", decision.reasons
    assert decision.inconclusive
    for k in decision.inconclusive:
        c = cs[k]
        assert c.verdict == "undecided" and c.resolution is not None and c.resolution > 0.02
        assert "below what this runner resolves with 3 processes against 2 baseline runs" in (
            c.reason
        )
        assert any(note.startswith(f"{k} is inconclusive: ") for note in decision.notes)
    assert decision.reasons[0] == "no credible slowdown in 6 configurations"


def test_a_credible_small_slowdown_warns() -> None:
    rng = np.random.default_rng(6)
    locations = np.log(rng.uniform(1e4, 1e6, 24))
    history = _history(rng, locations, 6, 0.005)
    slowed = locations.copy()
    slowed[5] += np.log(1.12)
    decision = stats.gate(_compare(history, _run(rng, slowed)))
    assert decision.tier == "WARN"
    assert decision.warned == ("c5",)
    assert "below the 25% block threshold" in decision.reasons[0]


def _with_draws(c: stats.Comparison, draws: np.ndarray) -> stats.Comparison:
    """The comparison with other posterior draws (and the ratio their median gives)."""
    return dataclasses.replace(c, log_ratio_draws=draws, ratio=float(np.exp(np.median(draws))))


def test_min_p_is_less_conservative_than_holm_for_configurations_that_move_together() -> None:
    """48 configurations whose draws share one large common term: min-P's adjusted value for
    the most extreme one is close to its own, Holm multiplies it by 48."""
    rng = np.random.default_rng(7)
    common = rng.normal(0, 1, 4000)
    cs = {}
    for i in range(48):
        draws = 0.05 + 0.02 * common + 0.002 * rng.normal(0, 1, 4000)
        base = stats.compare([1.0] * 10, [1.0] * 10, seed=i)
        cs[str(i)] = _with_draws(base, draws)
    bound = {k: 0.0 for k in cs}
    minp = stats.max_adjusted(cs, bound)
    holm = stats.holm({k: c.p_not_exceeding(0.0) for k, c in cs.items()})
    own = min(c.p_not_exceeding(0.0) for c in cs.values())
    assert min(minp.values()) < 4 * own
    assert min(holm.values()) > 20 * own


def test_min_p_matches_the_single_configuration_tail() -> None:
    rng = np.random.default_rng(8)
    base = stats.compare([1.0] * 10, [1.0] * 10, seed=0)
    draws = rng.normal(0.1, 0.05, 20000)
    c = _with_draws(base, draws)
    adjusted = stats.max_adjusted({"a": c}, {"a": 0.0})["a"]
    assert abs(adjusted - c.p_not_exceeding(0.0)) < 0.005


def test_identical_runs_are_equivalent_and_do_not_break_the_model() -> None:
    """The same samples on both sides (rnx compare of a file with itself): no spread at all.
    One baseline run cannot show how runs differ, so the prior keeps the interval open."""
    times = [[1000.0 + i for i in range(10)] for _ in range(3)]
    cs = stats.compare_many([(times, times)] * 4, seed=0, base_runs=[[0, 0, 0]] * 4)
    assert all(abs(c.ratio - 1) < 0.005 and c.verdict != "slower" for c in cs)
    assert all(c.resolution is not None and c.resolution > 0.02 for c in cs)
    assert stats.gate({str(i): c for i, c in enumerate(cs)}).tier == "PASS"


def test_a_kernel_that_does_not_move_with_the_runs_keeps_its_own_precision() -> None:
    """A GPU runner: the host's load moves the 12 launch-bound kernels of a run together (runs
    differ by about 2%) and leaves 6 long kernels alone. Taking the launch-bound kernels' shift
    out of a long kernel too would lend it their 2%; set apart, a long kernel made 5% slower is
    a credible slowdown over the run, and a head run whose launch-bound kernels are 4% slower
    as a whole still passes."""
    rng = np.random.default_rng(3)
    n = 18
    locations = np.log(rng.uniform(1e4, 1e6, n))
    host = np.arange(n) < 12

    def run(shift: float, slow: float = 0.0) -> list[list[np.ndarray]]:
        moved = np.where(host, shift, 0.0) + np.where(np.arange(n) == n - 1, slow, 0.0)
        return _run(rng, locations, shift=moved, process_sd=0.002)  # type: ignore[arg-type]

    history = [run(rng.normal(0, 0.02)) for _ in range(6)]
    unchanged = _compare(history, run(0.04))
    assert stats.gate(unchanged).tier == "PASS"
    slowed = _compare(history, run(0.04, slow=np.log(1.05)))
    long_kernel = slowed[f"c{n - 1}"]
    assert long_kernel.verdict == "slower"
    assert long_kernel.high - long_kernel.low < 0.02, (long_kernel.low, long_kernel.high)
    d = stats.gate(slowed)
    assert d.tier == "WARN" and d.warned == (f"c{n - 1}",)


def test_pooled_config_shift_variances_are_not_biased_low_by_few_runs() -> None:
    """Two baseline runs give each configuration's run-to-run variance one degree of freedom;
    the log of such a variance is 1.27 low on average, and pooling 200 of them without the
    correction would put every configuration near a third of the truth."""
    from stats.runlevel import _pooled_log_variances

    rng = np.random.default_rng(0)
    df = np.ones(200)
    ss = 0.01**2 * rng.chisquare(1, 200)
    pooled, _ = _pooled_log_variances(ss, df)
    assert 0.6 < float(np.exp(np.mean(np.log(pooled)))) / 0.01**2 < 1.6


def test_pooled_config_shift_variances_are_right_on_average_with_their_degrees_of_freedom() -> None:
    """8 configurations, 2 baseline runs: each variance from 0.875 degrees of freedom. Pooled,
    they are right on average (the exponential of the mean of their corrected logs was 1.4
    times the truth) and, where they pool, hold the 7 degrees of freedom of them all (2.4 were
    claimed)."""
    from stats.runlevel import _pooled_log_variances

    rng = np.random.default_rng(1)
    df = np.full(8, 0.875)
    found, dof = [], []
    for _ in range(4000):
        pooled, d = _pooled_log_variances(0.01**2 * rng.chisquare(0.875, 8) / 0.875 * df, df)
        found.append(pooled.mean())
        dof.append(d.min())
    assert 0.95 < float(np.mean(found)) / 0.01**2 < 1.05
    assert float(np.median(dof)) == pytest.approx(7.0)


def test_launch_bound_kernels_sharing_a_process_state_resolve_a_5_percent_slowdown() -> None:
    """The H200's launch-bound kernels (experiments/gpu_placement_noise.py): each process draws
    one of two states, 3.6% apart, that all its launch-bound kernels share and its long kernels
    do not. Taken out per group of kernels that move together, the states leave a 5% slowdown of
    one launch-bound kernel credible over the run, and an unchanged run passes; left in, the
    median of 3 processes jumps by 3.6% whenever two of them draw the slow state."""
    rng = np.random.default_rng(11)
    n = 24
    locations = np.log(rng.uniform(1e4, 2e4, n))
    launch_bound = np.arange(n) < 12

    def run(states: np.ndarray, slow: float = 0.0) -> list[list[np.ndarray]]:
        times: list[list[np.ndarray]] = [[] for _ in range(n)]
        for state in states * np.log(1.036):
            for c in range(n):
                centre = locations[c] + (state if launch_bound[c] else 0.0)
                centre += slow if c == 5 else 0.0
                times[c].append(np.exp(centre + rng.normal(0, 0.003, 10)))
        return times

    history = [run(rng.integers(0, 2, 6)) for _ in range(4)]
    # The head's processes: two of three in the slow state (its median is a slow one), then one.
    for states in ([1, 1, 0], [0, 0, 1]):
        assert stats.gate(_compare(history, run(np.array(states)))).tier == "PASS"
    slowed = _compare(history, run(np.array([1, 1, 0]), slow=np.log(1.05)))
    c5 = slowed["c5"]
    assert c5.verdict == "slower" and c5.high - c5.low < 0.03, (c5.low, c5.high)
    decision = stats.gate(slowed)
    assert decision.tier == "WARN" and decision.warned == ("c5",), decision.reasons


def test_the_head_scale_reads_how_far_the_other_configurations_stray() -> None:
    """Residuals drawn with variances 3 times and a third of what the model says, over 48
    configurations: the factor finds them (the squares are capped relative to the scale
    itself, so capping does not bias it); at the model's own variance with 12 configurations it
    stays near 1; and a configuration's own residual is never in its factor."""
    from stats.runlevel import _head_scale

    rng = np.random.default_rng(0)
    sd = np.full(48, 0.01)
    shifts = np.zeros((48, 2000))
    for truth in (3.0, 1 / 3):
        found = [
            np.median(_head_scale(rng.normal(0, 0.01 * truth**0.5, 48), shifts, sd)[0])
            for _ in range(200)
        ]
        assert 0.8 < np.median(found) / truth < 1.25, (truth, np.median(found))
    near_one = [
        _head_scale(rng.normal(0, 0.01, 12), shifts[:12], sd[:12])[0].mean() for _ in range(400)
    ]
    assert 0.85 < np.mean(near_one) < 1.2 and np.median(near_one) == pytest.approx(1.0, abs=0.05)
    diff = rng.normal(0, 0.01, 12)
    scale, _, _ = _head_scale(diff, shifts[:12], sd[:12])
    diff[3] = 10.0  # a configuration 20,000 times slower: it reads its factor from the others
    moved, keep, df = _head_scale(diff, shifts[:12], sd[:12])
    assert moved[3] == pytest.approx(scale[3])
    assert np.all(np.isfinite(moved)) and np.all((keep >= 0) & (keep <= 1) & (df > 0))


def test_one_slowed_configuration_lends_the_others_little_width() -> None:
    """A change the gate is there to find (one configuration 40% slower, 8 configurations)
    counts for nothing in the others' factor (the slab explains it), and a 6% one at most
    the cap's 2 sd: the others' intervals stay as the model reads them, within 15%."""
    from stats.runlevel import _head_scale

    rng = np.random.default_rng(1)
    sd = np.full(8, 0.01)
    shifts = np.zeros((8, 2000))
    for change in (np.log(1.4), np.log(1.06)):
        ratios = []
        for _ in range(300):
            diff = rng.normal(0, 0.01, 8)
            alone = _head_scale(diff, shifts, sd)[0]
            diff[0] += change
            with_change = _head_scale(diff, shifts, sd)[0]
            ratios.append(np.mean(with_change[1:] / alone[1:]))
        assert np.mean(ratios) < 1.15, (change, np.mean(ratios))


def test_a_head_whose_kernels_move_their_own_way_is_read_wider() -> None:
    """A quiet history whose configurations move only with the runs, and a head on a runner
    that moves each kernel its own way (1.5% each, as a busy CPU moves layer_norm against
    matmul): nothing of the head's processes shows it, its configurations' residuals do. With
    the head's scale the 90% intervals hold the truth far more often than without it (0.78
    against 0.51)."""
    from stats import runlevel

    rng = np.random.default_rng(5)
    locations = np.log(rng.uniform(1e4, 1e6, 24))
    cases = []
    for _ in range(6):
        history = _history(rng, locations, 6, 0.01)
        cases.append((history, _run(rng, locations, config_shift_sd=0.015)))

    def coverage() -> float:
        held = [
            c.low <= 1.0 <= c.high
            for history, head in cases
            for c in _compare(history, head).values()
        ]
        return float(np.mean(held))

    with_scale = coverage()
    original = runlevel._head_scale
    runlevel._head_scale = lambda diff, shifts, sd: (  # the model's own variances
        np.ones(len(diff)),
        np.zeros(len(diff)),
        np.full(len(diff), runlevel.MAX_DF),
    )
    try:
        without = coverage()
    finally:
        runlevel._head_scale = original
    assert with_scale >= 0.75 and with_scale > without + 0.2, (with_scale, without)


def test_the_noise_is_students_t_scaled_to_the_normals_point() -> None:
    # The draws' noise comes from a table of the t's quantiles (runlevel._noise_quantiles): its
    # WIDEN_AT point is the normal's, and its draws cannot be told from numpy's own t's, scaled
    # alike, while they can from normal ones.
    from scipy.special import stdtrit
    from scipy.stats import ks_2samp

    from stats import runlevel

    table = runlevel._NOISE
    assert np.quantile(table, runlevel.WIDEN_AT) == pytest.approx(runlevel._NORMAL_AT, abs=1e-3)
    assert np.mean(table) == pytest.approx(0.0, abs=1e-6)
    unit = runlevel._NORMAL_AT / stdtrit(runlevel.TAIL_DF, runlevel.WIDEN_AT)
    rng = np.random.default_rng(3)
    drawn = table[rng.integers(0, len(table), 400_000)]
    exact = rng.standard_t(runlevel.TAIL_DF, 400_000) * unit
    assert ks_2samp(drawn, exact).pvalue > 0.01
    assert ks_2samp(drawn, rng.standard_normal(400_000)).pvalue < 1e-6
