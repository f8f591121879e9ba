"""Pure statistics for the gate: Bayesian bootstrap comparisons and the PASS/WARN/BLOCK decision."""

from __future__ import annotations

from stats._validate import MIN_RESAMPLES
from stats.compare import MIN_SAMPLES, Comparison, compare, compare_many
from stats.gate import GateDecision, gate, holm

__all__ = [
    "MIN_RESAMPLES",
    "MIN_SAMPLES",
    "Comparison",
    "GateDecision",
    "compare",
    "compare_many",
    "gate",
    "holm",
]
