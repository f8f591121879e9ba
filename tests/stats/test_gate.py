"""stats.gate: tiers, reasons, and the per-run false-BLOCK control across configurations."""

from __future__ import annotations

import numpy as np
import pytest

import stats


def sample(rng: np.random.Generator, median: float, n: int = 30, sigma: float = 0.02) -> np.ndarray:
    return median * np.exp(rng.normal(0, sigma, n))


def compared(ratios: dict[str, float], seed: int = 0, n: int = 30) -> dict[str, stats.Comparison]:
    rng = np.random.default_rng(seed)
    pairs = [(sample(rng, 1e5, n), sample(rng, 1e5 * r, n)) for r in ratios.values()]
    return dict(zip(ratios, stats.compare_many(pairs, seed=seed), strict=True))


def test_holm_known_answer() -> None:
    adjusted = stats.holm({"a": 0.01, "b": 0.04, "c": 0.03, "d": 0.005})
    assert adjusted == pytest.approx({"d": 0.02, "a": 0.03, "c": 0.06, "b": 0.06})
    assert stats.holm({}) == {}


def test_pass_when_nothing_credibly_slower() -> None:
    d = stats.gate(compared({"a": 1.0, "b": 1.0, "c": 0.8}))
    assert d.tier == "PASS"
    assert d.reasons == ("no credible slowdown in 3 configurations (1 faster)",)


def test_warn_for_a_credible_slowdown_below_the_threshold() -> None:
    d = stats.gate(compared({"a": 1.0, "b": 1.10}))
    assert d.tier == "WARN"
    assert d.warned == ("b",)
    assert "b is" in d.reasons[0] and "below the 25% block threshold" in d.reasons[0]


def test_block_for_a_credible_slowdown_beyond_the_threshold() -> None:
    d = stats.gate(compared({"a": 1.0, "b": 1.5, "c": 1.1}))
    assert d.tier == "BLOCK"
    assert d.blocked == ("b",)
    assert d.reasons[0].startswith("b is ") and "credibly slower over the run's 3" in d.reasons[0]
    assert "beyond the 25% block threshold (P(ratio <= 1.25) = 0.0005)" in d.reasons[0]
    assert any(r.startswith("c is") for r in d.reasons[1:])  # the WARN reasons follow
    lower = stats.gate(compared({"a": 1.0, "b": 1.5}), block_threshold=0.6)
    assert lower.tier == "WARN"


def test_block_for_a_broken_runtime_even_without_slowdown() -> None:
    d = stats.gate(compared({"a": 1.0}), broken={"b": "diverged: max abs error 0.5 > atol 1e-05"})
    assert d.tier == "BLOCK"
    assert d.broken == ("b",)
    assert d.reasons == ("b is broken in head: diverged: max abs error 0.5 > atol 1e-05",)


def test_warn_for_undecided_missing_baseline_and_outage() -> None:
    few = compared({"a": 2.0}, n=5)
    d = stats.gate(few)
    assert d.tier == "WARN"  # a huge ratio on 5 samples is never a BLOCK
    assert d.reasons == ("a is undecided: fewer than 8 samples on a side (base 5, head 5)",)
    assert stats.gate({}, missing_baseline=["x"]).reasons == ("x has no baseline yet",)
    assert stats.gate({}, no_baseline=True).reasons == ("no baseline in this environment yet",)
    outage = stats.gate(compared({"a": 1.0}), outage="gate server unreachable (timeout)")
    assert outage.tier == "WARN" and outage.reasons == (
        "outage: gate server unreachable (timeout)",
    )


def test_family_control_keeps_false_calls_per_run_rare_at_the_rope() -> None:
    """48 configurations all exactly at the rope (the worst case for calling a configuration
    that is not really slower slower). Calling each one slower at P >= 0.95 on its own would
    flag most runs; the family control keeps runs that WARN or BLOCK at about 5% or fewer."""
    rng = np.random.default_rng(12)
    runs, flagged_runs, naive_runs = 20, 0, 0
    for r in range(runs):
        pairs = [(sample(rng, 1e5, sigma=0.05), sample(rng, 1.02e5, sigma=0.05)) for _ in range(48)]
        cs = dict(zip(map(str, range(48)), stats.compare_many(pairs, seed=r), strict=True))
        flagged_runs += stats.gate(cs).tier != "PASS"
        naive_runs += any(c.p_exceeds(0.02) >= 0.95 for c in cs.values())
    assert naive_runs >= runs // 2
    assert flagged_runs <= 2


def test_a_credible_slowdown_blocks_when_it_alone_is_credibly_beyond_the_threshold() -> None:
    """One configuration 40% slower among 47 unchanged, noisy. Its slowdown is credible over the
    run; asking the family control for the 25% threshold as well (the rule before) lost half of
    these BLOCKs, for a question whose error can only block a real slowdown."""
    runs, blocked, family_at_threshold = 10, 0, 0
    for r in range(runs):
        rng = np.random.default_rng(100 + r)
        ratios = [1.0] * 47 + [1.4]
        pairs = [(sample(rng, 1e5, sigma=0.1), sample(rng, 1e5 * x, sigma=0.1)) for x in ratios]
        cs = dict(zip(map(str, range(48)), stats.compare_many(pairs, seed=r), strict=True))
        d = stats.gate(cs)
        assert d.blocked in ((), ("47",))  # never an unchanged configuration
        blocked += d.blocked == ("47",)
        family_at_threshold += stats.max_adjusted(cs, {k: 0.25 for k in cs})["47"] <= 0.05
    assert blocked >= 9
    assert family_at_threshold <= 7


def test_a_credible_slowdown_only_possibly_beyond_the_threshold_warns() -> None:
    rng = np.random.default_rng(0)
    pairs = [(sample(rng, 1e5, sigma=0.1), sample(rng, 1.27e5, sigma=0.1))]
    (c,) = stats.compare_many(pairs, seed=0)
    assert c.verdict == "slower" and 0.5 <= c.p_exceeds(0.25) < 0.95
    d = stats.gate({"a": c})
    assert d.tier == "WARN" and d.blocked == ()
    assert "possibly beyond the 25% block threshold" in d.reasons[0]
    assert "not the 0.95 a BLOCK needs" in d.reasons[0]


def test_bad_threshold_is_refused() -> None:
    with pytest.raises(ValueError, match="block_threshold must lie strictly between"):
        stats.gate({}, block_threshold=0)


def test_an_unchanged_paired_run_of_three_noisy_processes_passes() -> None:
    """Base and head timed round by round in 3 processes, 10 rounds each, 10% noise per round
    and nothing changed. Resampling the 3 processes' mean differences alone (as unpaired mode
    does with its processes) ignored the rounds' noise and warned on 9 runs of 10."""
    passes = 0
    for r in range(10):
        rng = np.random.default_rng(r)
        pairs = []
        for _ in range(48):
            base = [1e5 * np.exp(rng.normal(0, 0.1, 10)) for _ in range(3)]
            pairs.append((base, [b * np.exp(rng.normal(0, 0.1, 10)) for b in base]))
        cs = stats.compare_many(pairs, seed=r, paired=True)
        passes += stats.gate({str(i): c for i, c in enumerate(cs)}).tier == "PASS"
    assert passes >= 9


def test_the_running_minimum_of_the_tails_is_numpys() -> None:
    from stats.gate import _lowest_from

    rng = np.random.default_rng(5)
    for rows in (1, 2, 8, 48):
        tails = rng.random((rows, 300))
        tails[tails > 0.3] = np.inf
        expected = np.minimum.accumulate(tails[::-1], axis=0)[::-1]
        assert np.array_equal(_lowest_from(tails.copy()), expected)


def test_reasons_are_codes_with_numbers_worded_at_the_edge() -> None:
    """Every reason and note is a finding with a code; the sentences are render's, and a
    caller's wording for a code replaces its sentence without matching it."""
    from stats.reasons import Code, render

    rng = np.random.default_rng(11)
    base = [rng.normal(1000, 5, 30) for _ in range(3)]
    slow = [g * 1.5 for g in base]
    found = stats.compare_many([(base, base), (base, slow)], seed=0)
    cs = dict(zip(["same", "slow"], found, strict=True))
    decision = stats.gate(cs, broken={"bad": "diverged"}, no_baseline=True)
    codes = [(f.code, f.config) for f in decision.findings]
    assert codes == [(Code.BROKEN, "bad"), (Code.BLOCKED, "slow"), (Code.NO_BASELINE, None)]
    assert decision.reasons == tuple(render(f) for f in decision.findings)
    assert decision.findings[1].data["ratio"] == cs["slow"].ratio
    worded = render(decision.findings[2], {Code.NO_BASELINE: lambda _: "none for this workload"})
    assert worded == "none for this workload"
    assert render(decision.findings[2]) == "no baseline in this environment yet"
