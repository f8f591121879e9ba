"""How numbers read, everywhere a person sees them: times, ratios, percentages.

One set for the harness's table, `rnx compare`, the action's reports, the sticky comment and
the dashboard, so the same run reads the same wherever it is shown.
"""

from __future__ import annotations

import math

MISSING = "–"
# Units for times given in nanoseconds, largest first; below a microsecond, nanoseconds.
_UNITS = (("s", 1e9), ("ms", 1e6), ("µs", 1e3), ("ns", 1.0))


def _known(value: float | None) -> bool:
    return value is not None and math.isfinite(value)


def _three_digits(value: float) -> str:
    """Three significant digits without an exponent: 812, 12.3, 1.23, 2.5."""
    text = f"{value:.3g}"
    return f"{value:.0f}" if "e" in text else text


def format_ns(ns: float | None) -> str:
    """A time in nanoseconds in the unit a person would say it in: 812 ns, 12.3 µs, 1.23 ms."""
    if ns is None or not math.isfinite(ns):
        return MISSING
    for unit, scale in _UNITS[:-1]:
        # Judge the unit by the rounded value, so 999.7 ms reads "1 s", not "1e+03 ms".
        if abs(float(f"{ns / scale:.3g}")) >= 1:
            return f"{_three_digits(ns / scale)} {unit}"
    return f"{_three_digits(ns)} ns"


def format_ratio(ratio: float | None) -> str:
    """head/base time: 1.010×."""
    return f"{ratio:.3f}×" if ratio is not None and _known(ratio) else MISSING


def format_ratio_interval(ratio: float | None, low: float | None, high: float | None) -> str:
    """A ratio and its credible interval: 1.010× (0.990–1.030); the ratio alone without one."""
    if ratio is None or not _known(ratio):
        return MISSING
    if low is None or high is None or not (_known(low) and _known(high)):
        return format_ratio(ratio)
    return f"{format_ratio(ratio)} ({low:.3f}–{high:.3f})"


def format_probability(p: float | None) -> str:
    """A probability as the statistics' reasons write it: 0.953."""
    return f"{p:.3f}" if p is not None and _known(p) else MISSING


def format_percent(fraction: float | None, digits: int = 0) -> str:
    """A fraction as a percentage: 0.953 -> 95% (digits=1: 95.3%)."""
    return f"{100 * fraction:.{digits}f}%" if fraction is not None and _known(fraction) else MISSING


def format_speed_of_light(score: float | None, bound: str | None, beyond: bool = False) -> str:
    """A speed-of-light score and its bound: 0.82 compute; 1.40 memory! beyond the roofline
    (a measurement or counting problem, never a result)."""
    if score is None or not _known(score):
        return MISSING
    return f"{score:.2f} {bound or ''}".rstrip() + ("!" if beyond else "")


SPEED_OF_LIGHT_NOTE = (
    "SOL: roofline time / median time (1.00 = at the limit of the part's peaks), never part of "
    "a verdict; ! marks a score beyond the roofline: a measurement or counting problem (work "
    "declared or counted too low, a cached result, work the timer missed, a peak too low), not a "
    "fast kernel"
)


def format_peaks(source: str, part: str) -> str:
    """Which peaks a score is against: the table's datasheet figures, or measured ones."""
    if source == "table":
        return f"{part} (peaks table: dense datasheet figures)"
    return f"{part} (peaks measured in the run: what this machine attains, not a datasheet's)"


def format_rate(value: float | None) -> str:
    """Items per second with three significant digits and a thousands suffix: 81.3k, 2.45M."""
    if value is None or not _known(value):
        return MISSING
    for suffix, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if value >= scale:
            return f"{value / scale:.3g}{suffix}"
    return f"{value:.3g}"


def format_money(value: float | None) -> str:
    """A cost to three significant digits, never in exponent form: 0.0000104, 0.0123, 4.56,
    1230."""
    if value is None or not _known(value):
        return MISSING
    if value == 0:
        return "0"
    digits = max(0, 2 - math.floor(math.log10(abs(value))))
    return f"{value:.{digits}f}"


def format_factor_interval(ratio: float | None, low: float | None, high: float | None) -> str:
    """A ratio that may be far from 1 (one machine against another) and its interval, to three
    significant digits: 0.00577× (0.00548–0.00603)."""
    if ratio is None or not _known(ratio):
        return MISSING
    if low is None or high is None or not (_known(low) and _known(high)):
        return f"{ratio:.3g}×"
    return f"{ratio:.3g}× ({low:.3g}–{high:.3g})"


INCONCLUSIVE_ADVICE = "more processes or paired mode"


def format_headline(tier: str, resolution: float | None = None) -> str:
    """A run's tier as its headline reads everywhere: a PASS or WARN that could not have seen
    a block-sized slowdown (rnx.verdict.inconclusive's resolution) says so, with the change
    it could not resolve rounded up: "PASS — inconclusive: could not resolve changes under
    37%; more processes or paired mode"."""
    if resolution is None or not math.isfinite(resolution) or tier == "BLOCK":
        return tier
    return (
        f"{tier} — inconclusive: could not resolve changes under "
        f"{math.ceil(resolution * 100 - 1e-9)}%; {INCONCLUSIVE_ADVICE}"
    )
