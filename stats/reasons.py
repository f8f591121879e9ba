"""Why a run got its tier: each reason a code and its numbers, worded only by render.

stats.gate decides with codes (Reason); the sentences a person reads come from render, at the
edge, and a caller that words one differently (the server says a workload has no baseline,
where the statistics only know the environment has none) passes its own wording for that code
rather than matching the sentence.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any


class Code(str, Enum):
    """What a reason says; its value is stable (stored answers and tests may name it)."""

    BROKEN = "broken"  # a runtime is broken in head (data: why)
    BLOCKED = "blocked"  # credibly slower over the run and beyond the block threshold
    OUTAGE = "outage"  # the server or the baseline could not be reached (data: why)
    NO_BASELINE = "no-baseline"  # the environment has no baseline at all
    MISSING_BASELINE = "missing-baseline"  # this configuration has none
    UNDECIDED = "undecided"  # too few samples to decide (data: why)
    SLOWER = "slower"  # credibly slower over the run, not beyond the block threshold
    NOT_CREDIBLE = "not-credible"  # possibly slower on its own, not over the run (a note)
    INCONCLUSIVE = "inconclusive"  # neither slower nor equivalent (a note; data: why)
    NO_SLOWDOWN = "no-slowdown"  # the PASS: nothing credibly slower


@dataclass(frozen=True)
class Reason:
    """One reason: its code, the configuration it is about (None for the run) and its numbers."""

    code: Code
    config: str | None = None
    data: Mapping[str, Any] = field(default_factory=dict)


Wording = Callable[[Reason], str]


def render(reason: Reason, wording: Mapping[Code, Wording] | None = None) -> str:
    """The sentence for a reason: the caller's wording for its code if it gives one."""
    words = (wording or {}).get(reason.code) or _WORDING[reason.code]
    return words(reason)


def _pct(x: float) -> str:
    return f"{x * 100:g}%"


def _slower(d: Mapping[str, Any]) -> str:
    return f"{(d['ratio'] - 1) * 100:.1f}% slower (90% interval {d['low']:.3f}-{d['high']:.3f})"


def _configurations(n: int) -> str:
    return f"{n} configuration{'' if n == 1 else 's'}"


def _blocked(r: Reason) -> str:
    d = r.data
    return (
        f"{r.config} is {_slower(d)}, credibly slower over the run's "
        f"{_configurations(d['family'])} (adjusted P = {d['adjusted']:.4f}) and beyond the "
        f"{_pct(d['threshold'])} block threshold "
        f"(P(ratio <= {1 + d['threshold']:.2f}) = {d['p_within']:.4f})"
    )


def _warned(r: Reason) -> str:
    d = r.data
    pct = _pct(d["threshold"])
    note = (
        f"below the {pct} block threshold"
        if d["p_beyond"] < 0.5
        else f"possibly beyond the {pct} block threshold (P = {d['p_beyond']:.2f}, "
        f"not the {d['probability']:g} a BLOCK needs)"
    )
    return f"{r.config} is {_slower(d)}, {note}"


def _passed(r: Reason) -> str:
    faster = r.data["faster"]
    return f"no credible slowdown in {_configurations(r.data['compared'])}" + (
        f" ({faster} faster)" if faster else ""
    )


_WORDING: dict[Code, Wording] = {
    Code.BROKEN: lambda r: f"{r.config} is broken in head: {r.data['why']}",
    Code.BLOCKED: _blocked,
    Code.OUTAGE: lambda r: f"outage: {r.data['why']}",
    Code.NO_BASELINE: lambda r: "no baseline in this environment yet",
    Code.MISSING_BASELINE: lambda r: f"{r.config} has no baseline yet",
    Code.UNDECIDED: lambda r: f"{r.config} is undecided: {r.data['why']}",
    Code.SLOWER: _warned,
    Code.NOT_CREDIBLE: lambda r: (
        f"{r.config} is possibly {_slower(r.data)}, not credible over the run's "
        f"{_configurations(r.data['family'])} (adjusted P = {r.data['adjusted']:.3f})"
    ),
    Code.INCONCLUSIVE: lambda r: f"{r.config} is inconclusive: {r.data['why']}",
    Code.NO_SLOWDOWN: _passed,
}
