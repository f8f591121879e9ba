"""Pure statistics: Bayesian bootstrap comparisons, the PASS/WARN/BLOCK decision, change points."""

from __future__ import annotations

from stats.changepoints import ChangePoint, KnownChange, detect, run_location
from stats.compare import MIN_SAMPLES, Comparison, compare, compare_many
from stats.gate import GateDecision, gate, holm

__all__ = ["MIN_SAMPLES", "Comparison", "GateDecision", "compare", "compare_many", "gate", "holm"]
__all__ += ["ChangePoint", "KnownChange", "detect", "run_location"]
