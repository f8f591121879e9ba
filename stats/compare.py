"""Compare head with base timings: a posterior of the time ratio and a verdict per configuration."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from stats import bootstrap, runlevel
from stats._validate import (
    as_generator,
    as_groups,
    as_run_labels,
    check_fraction,
    check_paired,
    check_resamples,
    plain_sides,
)
from stats.prepared import BaseSide, PreparedBaseline, base_sides, medians

MIN_SAMPLES = 8
PAIRED_BAND = bootstrap.CENTRAL
# Paired differences are resampled from their groups (processes) alone only with this many.
PAIRED_MIN_GROUPS = 8
INTERVAL = 0.90
# Priors for the run level while the history is short (docs/statistics.md, "Runs").
RUN_SHIFT_SD = 0.02  # a run's common shift: every configuration of a run alike
CONFIG_SHIFT_SD = 0.01  # one configuration's own shift from run to run

Verdict = Literal["faster", "slower", "equivalent", "undecided"]


@dataclass(frozen=True)
class Comparison:
    """The posterior of head/base time for one configuration, and what it means."""

    verdict: Verdict
    ratio: float  # posterior median of head/base time
    low: float  # 90% credible interval of the ratio
    high: float
    p_slower: float  # P(ratio > 1 + rope)
    p_faster: float  # P(ratio < 1 / (1 + rope))
    p_equivalent: float
    reason: str
    base_samples: int
    head_samples: int
    base_groups: int
    head_groups: int
    base_median: float  # plain median of all samples, for display
    head_median: float
    rope: float
    probability: float
    paired: bool
    log_ratio_draws: np.ndarray = field(repr=False, compare=False)
    # The smallest slowdown (a fraction) these data could call credible: below it, a change is
    # below what this runner resolves with these processes.
    resolution: float | None = None
    # The head run's common shift (a ratio) that the run-level model took out; None without runs.
    run_shift: float | None = None
    base_runs: int | None = None  # baseline runs the base came from, when they were given

    @property
    def sufficient(self) -> bool:
        """Enough samples on both sides for a verdict (and for the gate to block on)."""
        return min(self.base_samples, self.head_samples) >= MIN_SAMPLES

    def p_exceeds(self, t: float) -> float:
        """P(ratio > 1 + t), e.g. t = 0.25 for the block threshold."""
        t = check_fraction(t, "t", low=-1.0, high=math.inf)
        # A count over the size: the same number as np.mean of the booleans, without its
        # conversion to floats (the gate asks this of every configuration).
        above = int(np.count_nonzero(self.log_ratio_draws > math.log1p(t)))
        return above / self.log_ratio_draws.size

    def p_not_exceeding(self, t: float) -> float:
        """P(ratio <= 1 + t) with a +1 correction, so a finite number of draws never claims 0."""
        t = check_fraction(t, "t", low=-1.0, high=math.inf)
        below = int(np.count_nonzero(self.log_ratio_draws <= math.log1p(t)))
        return (below + 1) / (self.log_ratio_draws.size + 1)


def compare(
    base: Any,
    head: Any,
    *,
    rope: float = 0.02,
    probability: float = 0.95,
    resamples: int = 2000,
    seed: int | np.random.Generator | None = None,
    paired: bool = False,
    base_runs: Sequence[int] | None = None,
    run_shift_sd: float = RUN_SHIFT_SD,
    config_shift_sd: float = CONFIG_SHIFT_SD,
) -> Comparison:
    """Compare one configuration; see compare_many for the arguments (base_runs: the run label
    of each base group)."""
    return compare_many(
        [(base, head)],
        rope=rope,
        probability=probability,
        resamples=resamples,
        seed=seed,
        paired=paired,
        base_runs=None if base_runs is None else [base_runs],
        run_shift_sd=run_shift_sd,
        config_shift_sd=config_shift_sd,
    )[0]


def compare_many(
    pairs: Sequence[tuple[Any, Any]],
    *,
    rope: float = 0.02,
    probability: float = 0.95,
    resamples: int = 2000,
    seed: int | np.random.Generator | None = None,
    paired: bool = False,
    base_runs: Sequence[Sequence[int]] | None = None,
    run_shift_sd: float = RUN_SHIFT_SD,
    config_shift_sd: float = CONFIG_SHIFT_SD,
    baseline: PreparedBaseline | None = None,
) -> list[Comparison]:
    """Compare many configurations in one vectorised pass.

    pairs: (base, head) per configuration. Each side is a sequence of times (any unit, the same
    for both sides) or a list of such sequences, one per independent group (worker process,
    baseline run); the spread between groups then widens the interval. paired=True: base[i] and
    head[i] were measured in the same round (groups must have equal lengths on both sides), and
    the per-round log ratios are analysed, so noise shared by a round cancels.

    base_runs (unpaired only): per pair, the baseline run each base group (process) came from.
    Then the pairs are taken as one head run's configurations, the head's groups as that run's
    processes, and the run-level model (stats/runlevel.py) carries run-to-run variation into
    the interval: the history's spread between runs, with priors run_shift_sd (a run's common
    shift, all configurations alike) and config_shift_sd (one configuration's own shift) while
    there are few runs.

    baseline (unpaired only): the base sides prepared once (stats.prepare_baseline), for a
    caller that compares many heads with the same baseline runs (the server): each pair's base
    must be the very object it was prepared from, in order; base_runs, if None, are the ones it
    was prepared with. The numbers are the same as without it.
    """
    rope = check_fraction(rope, "rope", low=0.0, high=1.0)
    probability = check_fraction(probability, "probability", low=0.5, high=1.0)
    resamples = check_resamples(resamples)
    run_shift_sd = check_fraction(run_shift_sd, "run_shift_sd", low=0.0, high=1.0)
    config_shift_sd = check_fraction(config_shift_sd, "config_shift_sd", low=0.0, high=1.0)
    if baseline is not None:
        if paired:
            raise ValueError("baseline is for unpaired comparisons; paired mode has no baseline")
        if not isinstance(baseline, PreparedBaseline) or not baseline.matches(pairs):
            raise ValueError("baseline must be prepared from these pairs' base sides, in order")
    # The prepared run labels and the run-level model's work stand where no others are given.
    prepared = baseline if baseline is not None and base_runs is None else None
    runs: Any = base_runs if prepared is None else prepared.labels
    bases, heads, labels = _checked_pairs(pairs, paired, runs, baseline)
    rng = as_generator(seed)
    sides = None if paired else baseline.sides if baseline is not None else base_sides(bases)

    run_shift: float | None = None
    if labels is not None:
        assert sides is not None
        fit = _run_level(
            sides, heads, labels, resamples, rng, run_shift_sd, config_shift_sd, prepared
        )
        draws, run_shift = fit.draws, math.exp(fit.shift)
    elif paired:
        draws = _paired_draws(bases, heads, resamples, rng)
    else:
        log_b = [[np.log(g) for g in b] for b in bases]
        log_h = [[np.log(g) for g in h] for h in heads]
        base_draws = bootstrap.location_draws(log_b, resamples, rng, bootstrap.LOW)
        draws = bootstrap.location_draws(log_h, resamples, rng, bootstrap.LOW) - base_draws

    edge = math.log1p(rope)
    # Counts over the size: the same numbers as the means of the booleans, without converting
    # them to floats.
    p_slower = np.count_nonzero(draws > edge, axis=1) / draws.shape[1]
    p_faster = np.count_nonzero(draws < -edge, axis=1) / draws.shape[1]
    tail = (1 - INTERVAL) / 2
    quantiles = _quantiles(draws, (tail, 0.5, 1 - tail))
    spread = draws.std(axis=1)
    z = float(_normal_quantile(probability))
    head_medians = medians(heads)
    base_medians = medians(bases) if sides is None else [side.median for side in sides]
    # Each Comparison keeps a row: read-only, so nobody can change another's draws through it.
    draws.setflags(write=False)
    return [
        _summarise(
            base=bases[i],
            head=heads[i],
            draws=draws[i],
            quantiles=np.exp(quantiles[:, i]),
            p_slower=float(p_slower[i]),
            p_faster=float(p_faster[i]),
            rope=rope,
            probability=probability,
            paired=paired,
            resolution=math.expm1(edge + z * float(spread[i])),
            run_shift=run_shift,
            runs=None if labels is None else len(set(labels[i].tolist())),
            medians=(float(base_medians[i]), float(head_medians[i])),
        )
        for i in range(len(pairs))
    ]


def frozen_groups(groups: Iterable[Sequence[float]]) -> tuple[np.ndarray, ...]:
    """Groups of times as float64 arrays that can never change: what compare_many converts
    every group to, made once for data that many comparisons share (rnx.schema keeps a parsed
    document's processes so; the server re-gates every upload against the same parsed
    baselines). Each is a view of bytes, which numpy will not make writable: a prepared baseline
    (stats.prepare_baseline) made of them can be shared between threads."""
    return tuple(
        np.frombuffer(np.array(g, dtype=np.float64).tobytes(), dtype=np.float64) for g in groups
    )


def _checked_pairs(
    pairs: Any, paired: Any, base_runs: Any, baseline: PreparedBaseline | None
) -> tuple[list[list[np.ndarray]], list[list[np.ndarray]], list[np.ndarray] | None]:
    """compare_many's pairs as (bases, heads) of groups (the bases as prepared, where they
    were), and the base run labels if given; a ValueError or TypeError naming the argument
    otherwise."""
    if not isinstance(paired, bool):
        raise TypeError(f"paired must be True or False, got {type(paired).__name__}")
    if isinstance(pairs, (str, bytes)) or not isinstance(pairs, Sequence) or not pairs:
        raise ValueError("pairs must be a non-empty sequence of (base, head) pairs")
    if base_runs is not None and paired:
        raise ValueError("base_runs is for unpaired comparisons; paired mode has no baseline runs")
    if base_runs is not None and (
        isinstance(base_runs, (str, bytes))
        or not isinstance(base_runs, Sequence)
        or len(base_runs) != len(pairs)
    ):
        raise ValueError("base_runs must give one sequence of run labels per pair")
    bases, heads = _plain_pairs(pairs, baseline)
    for i, pair in enumerate(pairs):
        if not isinstance(pair, (tuple, list)) or len(pair) != 2:
            raise ValueError(f"pairs[{i}] must be a (base, head) pair")
        prefix = "" if len(pairs) == 1 else f"pairs[{i}]."
        if i == len(bases):
            bases.append(as_groups(pair[0], f"{prefix}base"))
        if i == len(heads):
            heads.append(as_groups(pair[1], f"{prefix}head"))
        if paired:
            check_paired(bases[i], heads[i])
    if baseline is not None and base_runs is baseline.labels:  # checked when prepared
        return bases, heads, baseline.labels
    labels = (
        None
        if base_runs is None
        else [
            as_run_labels(base_runs[i], len(bases[i]), f"base_runs[{i}]") for i in range(len(pairs))
        ]
    )
    return bases, heads, labels


def _plain_pairs(
    pairs: Sequence[Any], baseline: PreparedBaseline | None
) -> tuple[list[list[np.ndarray]], list[list[np.ndarray]]]:
    """The bases and the heads of the server's usual pairs, each side checked in one step with
    the others (plain_sides), or the bases as prepared; [] for a side that is not all alike,
    checked pair by pair."""
    if not all(isinstance(pair, (tuple, list)) and len(pair) == 2 for pair in pairs):
        return [], []
    if baseline is not None:
        bases = [side.groups for side in baseline.sides]
    else:
        bases = plain_sides([p[0] for p in pairs]) or []
    heads = plain_sides([pair[1] for pair in pairs])
    return bases, heads or []


def _paired_draws(
    bases: list[list[np.ndarray]],
    heads: list[list[np.ndarray]],
    resamples: int,
    rng: np.random.Generator,
) -> np.ndarray:
    """(C, R) draws of each configuration's log ratio from its rounds' paired differences."""
    diffs = [
        [np.log(hg) - np.log(bg) for bg, hg in zip(b, h, strict=True)]
        for b, h in zip(bases, heads, strict=True)
    ]
    # A paired difference's noise is its rounds', not its processes' (base and head share each
    # process): a few processes' mean differences alone, as unpaired mode resamples them, miss
    # it, and 3 processes that happen to agree looked like a credible slowdown. With few
    # processes their rounds are resampled together.
    diffs = [d if len(d) >= PAIRED_MIN_GROUPS else [np.concatenate(d)] for d in diffs]
    return bootstrap.location_draws(diffs, resamples, rng, PAIRED_BAND)


def _run_level(
    bases: list[BaseSide],
    heads: list[list[np.ndarray]],
    labels: list[np.ndarray],
    resamples: int,
    rng: np.random.Generator,
    run_shift_sd: float,
    config_shift_sd: float,
    prepared: PreparedBaseline | None,
) -> runlevel.RunFit:
    """Process locations of every group, then the run-level model over all pairs at once."""
    locations = bootstrap.group_locations([g for h in heads for g in h], bootstrap.LOW, log=True)
    head_locs = np.split(locations, np.cumsum([len(h) for h in heads])[:-1])
    single = all(len(h) == 1 for h in heads) and all(
        len(np.unique(lab)) == len(lab) for lab in labels
    )
    fallback = None
    if single:
        # No run has two processes: a process's own samples give its location's variance.
        logs = [[np.log(h[0])] for h in heads]
        fallback = bootstrap.location_draws(logs, resamples, rng, bootstrap.LOW).var(axis=1)
    made = (
        prepared.model(run_shift_sd)
        if prepared is not None
        else runlevel.baseline([s.locations for s in bases], labels, run_shift_sd=run_shift_sd)
    )
    return runlevel.fit(
        made,
        head_locs,
        resamples,
        rng,
        run_shift_sd=run_shift_sd,
        config_shift_sd=config_shift_sd,
        process_var_fallback=fallback,
        aligned=_aligned(heads, labels),
    )


def _aligned(heads: list[list[np.ndarray]], labels: list[np.ndarray]) -> bool:
    """Every configuration has the same baseline runs' groups in the same order, and as many
    head groups: then group i is taken to be the same worker process in all of them."""
    # As lists: numpy's array_equal costs more than the comparison for a few labels.
    first = labels[0].tolist()
    return all(len(h) == len(heads[0]) for h in heads) and all(
        lab.tolist() == first for lab in labels
    )


def _quantiles(draws: np.ndarray, qs: tuple[float, ...]) -> np.ndarray:
    """(len(qs), C) quantiles along axis 1 (numpy's linear rule), from one sort: the same order
    statistics as a partition at the six points. Which is faster depends on the CPU
    (experiments/regate_steps.py): for 8 x 2000 draws the sort took a quarter of the partition's
    time on the lent 16-core Intel machine, where the server's speed is measured, and four times
    its time on the 2-core AMD one."""
    n = draws.shape[1]
    pos = np.array(qs) * (n - 1)
    lo = np.floor(pos).astype(int)
    hi = np.minimum(lo + 1, n - 1)
    part = np.sort(draws, axis=1)
    frac = (pos - lo)[:, None]
    result: np.ndarray = part[:, lo].T * (1 - frac) + part[:, hi].T * frac
    return result


def _normal_quantile(p: float) -> float:
    from scipy.special import ndtri

    return float(ndtri(p))


def _summarise(
    *,
    base: list[np.ndarray],
    head: list[np.ndarray],
    draws: np.ndarray,
    quantiles: np.ndarray,
    p_slower: float,
    p_faster: float,
    rope: float,
    probability: float,
    paired: bool,
    resolution: float,
    run_shift: float | None,
    runs: int | None,
    medians: tuple[float, float],
) -> Comparison:
    p_equivalent = max(0.0, 1.0 - p_slower - p_faster)
    n_base = sum(len(g) for g in base)
    n_head = sum(len(g) for g in head)
    low, ratio, high = (float(q) for q in quantiles)
    verdict, reason = _decide(
        n_base,
        n_head,
        ratio,
        low,
        high,
        p_slower,
        p_faster,
        p_equivalent,
        rope,
        probability,
        paired,
        _resolves(resolution, len(head), runs),
    )
    return Comparison(
        verdict=verdict,
        ratio=ratio,
        low=low,
        high=high,
        p_slower=p_slower,
        p_faster=p_faster,
        p_equivalent=p_equivalent,
        reason=reason,
        base_samples=n_base,
        head_samples=n_head,
        base_groups=len(base),
        head_groups=len(head),
        base_median=medians[0],
        head_median=medians[1],
        rope=rope,
        probability=probability,
        paired=paired,
        log_ratio_draws=draws,
        resolution=resolution,
        run_shift=run_shift,
        base_runs=runs,
    )


def _resolves(resolution: float, processes: int, runs: int | None) -> str:
    history = "" if runs is None else f" against {runs} baseline run{'s' if runs != 1 else ''}"
    return (
        f"changes smaller than ±{_pct(resolution)} are below what this runner resolves with "
        f"{processes} process{'es' if processes != 1 else ''}{history}; more processes or "
        "paired mode narrow it"
    )


def _pct(x: float) -> str:
    return f"{x * 100:.3g}%"


def _decide(
    n_base: int,
    n_head: int,
    ratio: float,
    low: float,
    high: float,
    p_slower: float,
    p_faster: float,
    p_equivalent: float,
    rope: float,
    probability: float,
    paired: bool,
    resolves: str,
) -> tuple[Verdict, str]:
    interval = f"ratio {ratio:.3f}, 90% interval {low:.3f}-{high:.3f}"
    if min(n_base, n_head) < MIN_SAMPLES:
        if paired:
            return "undecided", f"fewer than {MIN_SAMPLES} paired rounds ({n_base})"
        return (
            "undecided",
            f"fewer than {MIN_SAMPLES} samples on a side (base {n_base}, head {n_head})",
        )
    if p_slower >= probability:
        return (
            "slower",
            f"head is slower: P(slower by more than {_pct(rope)}) = {p_slower:.3f}; {interval}",
        )
    if p_faster >= probability:
        return (
            "faster",
            f"head is faster: P(faster by more than {_pct(rope)}) = {p_faster:.3f}; {interval}",
        )
    if p_equivalent >= probability:
        return "equivalent", f"within ±{_pct(rope)}: P(equivalent) = {p_equivalent:.3f}; {interval}"
    return (
        "undecided",
        f"P(slower) {p_slower:.2f}, P(equivalent) {p_equivalent:.2f}, P(faster) {p_faster:.2f}: "
        f"none reaches {probability:g}; {interval}; {resolves}",
    )
