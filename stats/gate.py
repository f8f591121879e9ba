"""The gate: a run's comparisons and broken runtimes become PASS, WARN or BLOCK, with reasons."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from stats._validate import check_fraction
from stats.compare import Comparison
from stats.reasons import Code, Reason, render

Tier = Literal["PASS", "WARN", "BLOCK"]
EXACT_UP_TO = 0.25  # the gate's adjusted values are exact up to this (or 1 - probability)


@dataclass(frozen=True)
class GateDecision:
    tier: Tier
    reasons: tuple[str, ...]
    blocked: tuple[str, ...]  # credible slowdowns credibly beyond the threshold
    broken: tuple[str, ...]
    warned: tuple[str, ...]
    # Family-adjusted P(ratio <= 1 + rope) per configuration that had enough samples: how
    # credible its slowdown is over the run's configurations.
    adjusted: Mapping[str, float]
    # What a person may want to know that does not make the tier: inconclusive configurations
    # with what this runner resolves, slowdowns not credible over the run's configurations.
    notes: tuple[str, ...] = ()
    inconclusive: tuple[str, ...] = ()
    # Every reason and note as a code with its numbers (stats/reasons.py), in the order of
    # reasons: what a caller words its own way, rather than matching a sentence.
    findings: tuple[Reason, ...] = ()


def holm(p_values: Mapping[str, float]) -> dict[str, float]:
    """Holm's step-down adjustment; rejecting where adjusted <= alpha keeps the family-wise
    error rate <= alpha."""
    ordered = sorted(p_values.items(), key=lambda kv: kv[1])
    m = len(ordered)
    adjusted: dict[str, float] = {}
    running = 0.0
    for rank, (key, p) in enumerate(ordered):
        running = max(running, min(1.0, (m - rank) * p))
        adjusted[key] = running
    return adjusted


def max_adjusted(
    comparisons: Mapping[str, Comparison], bounds: Mapping[str, float]
) -> dict[str, float]:
    """Family-adjusted P(ratio <= 1 + bound) per configuration: step-down min-P over the joint
    posterior draws (Westfall and Young's method with the draws as the reference distribution).

    Each configuration's own value is its posterior P(ratio <= 1 + bound); each draw is given
    its lower-tail rank within its configuration. Ranked by own value, the adjusted value of
    the i-th configuration is the share of draws in which the smallest rank among it and the
    configurations ranked after it is at or below its own value (never below its own value,
    made monotone). Configurations compared in one call share the run's common shift in every
    draw, so their ranks move together and the smallest is less extreme than for independent
    ones: less conservative than Holm, with the same family-wise guarantee. (stats.gate
    computes them exactly only up to max(0.25, 1 - probability); above, its `adjusted` holds the
    configuration's own value, a lower bound.) Draws of different lengths (separate calls with
    different resamples) fall back to Holm.
    """
    return _Family(comparisons).adjusted(bounds)


class _Family:
    """The run's configurations' draws, ranked once for any number of bounds."""

    def __init__(self, comparisons: Mapping[str, Comparison], exact_up_to: float = 1.0) -> None:
        self.comparisons = comparisons
        self.keys = list(comparisons)
        sizes = {c.log_ratio_draws.size for c in comparisons.values()}
        self.joint = len(sizes) == 1
        if not self.keys or not self.joint:
            return
        self.draws = draws = np.stack([comparisons[k].log_ratio_draws for k in self.keys])
        self.resamples = r = draws.shape[1]
        # Each draw's rank within its configuration: its own lower tail, whatever the shape of
        # the posterior (a bootstrap's is skewed), so one configuration alone gets its own
        # P(ratio <= 1 + bound) back, and the ranks of a run's configurations move together
        # in the draws where the configurations do. Only the lowest exact_up_to of each row
        # are ranked (a partition, then a small sort); the rest count as above it.
        k = min(r, max(1, int(exact_up_to * (r + 1))))
        rows = np.arange(len(self.keys))[:, None]
        low = np.argpartition(draws, k - 1, axis=1)[:, :k]
        order = np.argsort(draws[rows, low], axis=1)
        self.tail = np.full(draws.shape, np.inf)
        self.tail[rows, low[rows, order]] = np.arange(1, k + 1)[None, :] / (r + 1)

    def adjusted(self, bounds: Mapping[str, float]) -> dict[str, float]:
        keys = self.keys
        if not keys:
            return {}
        if not self.joint:
            return holm({k: self.comparisons[k].p_not_exceeding(bounds[k]) for k in keys})
        p = self._own(bounds)
        order = np.argsort(p, kind="stable")
        lowest = _lowest_from(self.tail[order])
        reached = (lowest <= p[order][:, None] + 1e-12).sum(axis=1)
        # Above exact_up_to the share is not counted: the configuration's own value stands in
        # (a lower bound; no decision is made up there).
        adjusted = np.maximum.accumulate(np.maximum(reached / self.resamples, p[order]))
        return {keys[i]: float(min(1.0, adjusted[rank])) for rank, i in enumerate(order)}

    def _own(self, bounds: Mapping[str, float]) -> np.ndarray:
        """Each configuration's Comparison.p_not_exceeding(bound), the same numbers, from one
        count over the stacked draws rather than one per configuration."""
        edges = [
            math.log1p(check_fraction(bounds[k], "t", low=-1.0, high=math.inf)) for k in self.keys
        ]
        below = np.count_nonzero(self.draws <= np.array(edges)[:, None], axis=1)
        result: np.ndarray = (below + 1) / (self.resamples + 1)
        return result


def _lowest_from(tails: np.ndarray) -> np.ndarray:
    """Row i: per draw, the smallest tail among rows i and after (tails is a new array, taken
    over). The same numbers as np.minimum.accumulate over the reversed rows, which goes down
    each column of a few rows in turn and took five to eight times as long
    (experiments/regate_steps.py)."""
    for i in range(len(tails) - 2, -1, -1):
        np.minimum(tails[i], tails[i + 1], out=tails[i])
    return tails


def gate(
    comparisons: Mapping[str, Comparison],
    *,
    broken: Mapping[str, str] | None = None,
    missing_baseline: Sequence[str] = (),
    no_baseline: bool = False,
    outage: str | None = None,
    block_threshold: float = 0.25,
    probability: float = 0.95,
) -> GateDecision:
    """Decide a run's tier.

    comparisons: configuration id -> Comparison. broken: configuration id -> why it is broken in
    head (diverged output, error, crash). missing_baseline: configurations the baseline lacks.
    no_baseline: this environment has no baseline at all. outage: why the server or the baseline
    could not be reached, if it could not.

    BLOCK when a runtime is broken, or when a configuration's slowdown is credible over the
    run's configurations (max_adjusted at the rope: the chance that a run blocks or warns on
    any configuration that is not really slower stays <= 1 - probability, however many it
    has) and beyond block_threshold with that probability on its own (an error there can only
    block a real slowdown). WARN for an outage, a missing baseline, too few samples, or a
    credible slowdown below the threshold. An inconclusive configuration is a note with what
    this runner resolves, not a WARN; so is a slowdown credible only on its own.

    The decision's findings carry each reason as a code and its numbers (stats/reasons.py);
    its reasons and notes are their sentences.
    """
    block_threshold = check_fraction(block_threshold, "block_threshold", low=0.0, high=math.inf)
    probability = check_fraction(probability, "probability", low=0.5, high=1.0)
    broken = dict(broken or {})
    alpha = 1.0 - probability

    eligible = {k: c for k, c in comparisons.items() if c.sufficient and k not in broken}
    # Decisions are made at alpha: exact adjusted values up to max(alpha, 0.25) are enough.
    family = _Family(eligible, exact_up_to=max(EXACT_UP_TO, alpha))
    adjusted = family.adjusted({k: c.rope for k, c in eligible.items()})
    blocked = [k for k, c in eligible.items() if _blocks(c, adjusted[k], block_threshold, alpha)]
    size = len(eligible)
    blocks = [Reason(Code.BROKEN, k, {"why": why}) for k, why in broken.items()]
    blocks += [
        Reason(Code.BLOCKED, k, _numbers(comparisons[k], adjusted[k], size, block_threshold))
        for k in blocked
    ]

    warns: list[Reason] = []
    if outage:
        warns.append(Reason(Code.OUTAGE, None, {"why": outage}))
    if no_baseline:
        warns.append(Reason(Code.NO_BASELINE))
    warns += [Reason(Code.MISSING_BASELINE, k) for k in missing_baseline if k not in broken]
    rest = {k: c for k, c in comparisons.items() if k not in broken and k not in blocked}
    more, notes = _warn_or_note(rest, adjusted, alpha, block_threshold, size)
    warns += more

    tier: Tier
    if blocks:
        tier, found = "BLOCK", blocks + warns
    elif warns:
        tier, found = "WARN", warns
    else:
        faster = sum(c.verdict == "faster" for c in comparisons.values())
        tier = "PASS"
        found = [Reason(Code.NO_SLOWDOWN, None, {"compared": len(comparisons), "faster": faster})]
    findings = tuple(found + notes)
    return GateDecision(
        tier=tier,
        reasons=tuple(render(r) for r in findings),
        blocked=tuple(blocked),
        broken=tuple(broken),
        warned=tuple(r.config for r in warns if r.config is not None),
        adjusted=adjusted,
        notes=tuple(render(r) for r in notes),
        inconclusive=tuple(r.config for r in notes if r.code is Code.INCONCLUSIVE and r.config),
        findings=findings,
    )


def _blocks(c: Comparison, adjusted: float, threshold: float, alpha: float) -> bool:
    """Credibly slower over the run, and beyond the threshold on its own."""
    return c.verdict == "slower" and adjusted <= alpha and c.p_not_exceeding(threshold) <= alpha


def _warn_or_note(
    comparisons: Mapping[str, Comparison],
    beyond_rope: Mapping[str, float],
    alpha: float,
    block_threshold: float,
    family: int,
) -> tuple[list[Reason], list[Reason]]:
    """Configurations that neither block nor are broken: a WARN for too few samples or a
    slowdown credible over the run's `family` configurations; a note otherwise. Returns
    (warnings, notes)."""
    warns: list[Reason] = []
    notes: list[Reason] = []
    for k, c in comparisons.items():
        if not c.sufficient:
            warns.append(Reason(Code.UNDECIDED, k, {"why": c.reason}))
        elif c.verdict == "slower" and beyond_rope[k] <= alpha:
            numbers = _numbers(c, beyond_rope[k], family, block_threshold)
            warns.append(Reason(Code.SLOWER, k, {**numbers, "probability": 1 - alpha}))
        elif c.verdict == "slower":
            notes.append(
                Reason(Code.NOT_CREDIBLE, k, _numbers(c, beyond_rope[k], family, block_threshold))
            )
        elif c.verdict == "undecided":
            notes.append(Reason(Code.INCONCLUSIVE, k, {"why": c.reason}))
    return warns, notes


def _numbers(c: Comparison, adjusted: float, family: int, threshold: float) -> dict[str, float]:
    """What a reason about a slowdown shows: its ratio and interval, its adjusted value over
    the run's `family` configurations, and its chances at the block threshold."""
    return {
        "ratio": c.ratio,
        "low": c.low,
        "high": c.high,
        "adjusted": adjusted,
        "family": family,
        "threshold": threshold,
        "p_within": c.p_not_exceeding(threshold),
        "p_beyond": c.p_exceeds(threshold),
    }
