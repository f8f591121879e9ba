"""What moved in a run's profiles and memory, as the run page shows it: for each configuration
the gate explained (rnx/profile_diff.py, rnx/memory_gate.py, stored in the answer), its ranked
changes with a bar of each one's contribution, and its peak memory and launches base -> head.

Read defensively: an answer stored before explanations existed has none, and a field of an
unexpected shape is skipped, never an error. Names come from the workload's kernels: the
template shows them as text; the bars hold geometry only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from markupsafe import Markup

from rnx.formatting import format_percent
from rnx.memory_gate import format_bytes

BAR_WIDTH = 160
BAR_HEIGHT = 12


@dataclass(frozen=True)
class Moved:
    text: str
    kind: str
    delta_ns: float
    bar: Markup


@dataclass(frozen=True)
class Explained:
    id: str
    verdict: str
    moved: list[Moved]
    memory: str | None  # "peak memory 1.5 MiB → 3 MiB (+100%)"
    launches: str | None  # "kernel launches per call 9 → 14"
    memory_tier: str | None


def contribution_bar(delta_ns: float, largest_ns: float) -> Markup:
    """A bar from the middle: right (slower) for time added, left (faster) for time saved."""
    half = BAR_WIDTH / 2
    length = 0.0 if largest_ns <= 0 else min(1.0, abs(delta_ns) / largest_ns) * (half - 1)
    x = half if delta_ns >= 0 else half - length
    kind = "slower" if delta_ns >= 0 else "faster"
    return Markup(
        f'<svg class="contribution" width="{BAR_WIDTH}" height="{BAR_HEIGHT}" '
        f'viewBox="0 0 {BAR_WIDTH} {BAR_HEIGHT}" role="img" aria-label="{kind}">'
        f'<line x1="{half}" y1="0" x2="{half}" y2="{BAR_HEIGHT}" class="axis"/>'
        f'<rect x="{x:.1f}" y="2" width="{length:.1f}" height="{BAR_HEIGHT - 4}" '
        f'class="bar-{kind}"/></svg>'
    )


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def _moved(raw: Any) -> list[Moved]:
    rows = [r for r in raw if isinstance(r, dict)] if isinstance(raw, list) else []
    deltas = [(r, _number(r.get("delta_ns"))) for r in rows]
    kept = [(r, d) for r, d in deltas if d is not None and isinstance(r.get("text"), str)]
    largest = max((abs(d) for _, d in kept), default=0.0)
    return [
        Moved(str(r["text"]), str(r.get("kind") or ""), d, contribution_bar(d, largest))
        for r, d in kept
    ]


def _memory(raw: Any) -> tuple[str | None, str | None, str | None]:
    if not isinstance(raw, dict):
        return None, None, None
    base, head = _number(raw.get("base_bytes")), _number(raw.get("head_bytes"))
    memory = None
    if base is not None and head is not None:
        growth = _number(raw.get("growth"))
        change = (
            "" if growth is None else f" ({'+' if growth >= 0 else ''}{format_percent(growth)})"
        )
        memory = f"peak memory {format_bytes(base)} → {format_bytes(head)}{change}"
    b, h = _number(raw.get("base_launches")), _number(raw.get("head_launches"))
    launches = None if b is None or h is None else f"kernel launches per call {b:.0f} → {h:.0f}"
    tier = raw.get("tier") if raw.get("tier") in ("PASS", "WARN", "BLOCK") else None
    return memory, launches, tier


def explained(comparisons: list[Any]) -> list[Explained]:
    """The configurations the answer explains (a diff or a memory change), in its order."""
    out = []
    for c in comparisons:
        if not isinstance(c, dict):
            continue
        moved = _moved(c.get("explanation"))
        memory, launches, tier = _memory(c.get("memory"))
        if moved or (tier is not None and tier != "PASS"):
            out.append(
                Explained(str(c.get("id")), str(c.get("verdict")), moved, memory, launches, tier)
            )
    return out


__all__ = ["Explained", "Moved", "contribution_bar", "explained"]
