"""Pure statistics: Bayesian bootstrap comparisons, the PASS/WARN/BLOCK decision, change points."""

from __future__ import annotations

from stats._validate import MIN_RESAMPLES
from stats.changepoints import ChangePoint, KnownChange, detect, run_location
from stats.compare import MIN_SAMPLES, Comparison, compare, compare_many, frozen_groups
from stats.gate import GateDecision, gate, holm, max_adjusted
from stats.location import Location, median_interval, median_intervals
from stats.prepared import PreparedBaseline, prepare_baseline

__all__ = [
    "MIN_RESAMPLES",
    "MIN_SAMPLES",
    "ChangePoint",
    "Comparison",
    "GateDecision",
    "KnownChange",
    "Location",
    "PreparedBaseline",
    "compare",
    "compare_many",
    "detect",
    "frozen_groups",
    "gate",
    "holm",
    "max_adjusted",
    "median_interval",
    "median_intervals",
    "prepare_baseline",
    "run_location",
]
