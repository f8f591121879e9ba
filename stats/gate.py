"""The gate: a run's comparisons and broken runtimes become PASS, WARN or BLOCK, with reasons."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from stats._validate import check_fraction
from stats.compare import Comparison

Tier = Literal["PASS", "WARN", "BLOCK"]


@dataclass(frozen=True)
class GateDecision:
    tier: Tier
    reasons: tuple[str, ...]
    blocked: tuple[str, ...]  # configurations whose slowdown beyond the threshold is credible
    broken: tuple[str, ...]
    warned: tuple[str, ...]
    # Holm-adjusted P(ratio <= 1 + threshold) per configuration that had enough samples.
    adjusted: Mapping[str, float]


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

    BLOCK when a runtime is broken, or when a slowdown beyond block_threshold is credible after
    Holm's adjustment over all compared configurations: each configuration's P(ratio <= 1 +
    threshold) is treated as a p-value, so the chance that a run blocks on any configuration that
    is not really that much slower stays <= 1 - probability, however many configurations it has.
    """
    block_threshold = check_fraction(block_threshold, "block_threshold", low=0.0, high=math.inf)
    probability = check_fraction(probability, "probability", low=0.5, high=1.0)
    broken = dict(broken or {})
    alpha = 1.0 - probability
    pct = f"{block_threshold * 100:g}%"

    eligible = {k: c for k, c in comparisons.items() if c.sufficient and k not in broken}
    adjusted = holm({k: c.p_not_exceeding(block_threshold) for k, c in eligible.items()})
    blocked = [k for k, c in eligible.items() if c.verdict == "slower" and adjusted[k] <= alpha]

    block_reasons = [f"{k} is broken in head: {why}" for k, why in broken.items()]
    for k in blocked:
        c = comparisons[k]
        block_reasons.append(
            f"{k} is {_slower(c)}, credibly more than the {pct} block threshold "
            f"(P(ratio <= {1 + block_threshold:.2f}) = {adjusted[k]:.4f} after Holm's adjustment "
            f"over {len(eligible)} configurations)"
        )

    warn_reasons: list[str] = []
    warned: list[str] = []
    if outage:
        warn_reasons.append(f"outage: {outage}")
    if no_baseline:
        warn_reasons.append("no baseline in this environment yet")
    for k in missing_baseline:
        if k not in broken:
            warned.append(k)
            warn_reasons.append(f"{k} has no baseline yet")
    for k, c in comparisons.items():
        if k in broken or k in blocked:
            continue
        if c.verdict == "slower":
            warned.append(k)
            beyond = c.p_exceeds(block_threshold)
            note = (
                f"below the {pct} block threshold"
                if beyond < 0.5
                else f"possibly beyond the {pct} block threshold (P = {beyond:.2f}), "
                f"but not credibly after adjusting for {len(eligible)} configurations"
            )
            warn_reasons.append(f"{k} is {_slower(c)}, {note}")
        elif c.verdict == "undecided":
            warned.append(k)
            warn_reasons.append(f"{k} is undecided: {c.reason}")

    tier: Tier
    if block_reasons:
        tier, reasons = "BLOCK", block_reasons + warn_reasons
    elif warn_reasons:
        tier, reasons = "WARN", warn_reasons
    else:
        tier = "PASS"
        faster = sum(c.verdict == "faster" for c in comparisons.values())
        reasons = [
            f"no credible slowdown in {len(comparisons)} configurations"
            + (f" ({faster} faster)" if faster else "")
        ]
    return GateDecision(
        tier=tier,
        reasons=tuple(reasons),
        blocked=tuple(blocked),
        broken=tuple(broken),
        warned=tuple(warned),
        adjusted=adjusted,
    )


def _slower(c: Comparison) -> str:
    return f"{(c.ratio - 1) * 100:.1f}% slower (90% interval {c.low:.3f}-{c.high:.3f})"
