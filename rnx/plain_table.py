"""The per-configuration table as plain text, for terminals and plain CI logs.

`rnx compare` prints it, and `rnx gate` outside GitHub Actions (where no job summary is
shown) prints it into the job's log, so both read the same.
"""

from __future__ import annotations

from collections.abc import Sequence

from rnx.formatting import (
    MISSING,
    format_ns,
    format_probability,
    format_ratio_interval,
    format_speed_of_light,
)
from rnx.memory_gate import format_bytes
from rnx.schema import ConfigComparison, SpeedOfLight


def _sol(sol: SpeedOfLight | None) -> str:
    return (
        MISSING if sol is None else format_speed_of_light(sol.score, sol.bound, sol.beyond_roofline)
    )


def comparison_table(comparisons: Sequence[ConfigComparison]) -> list[str]:
    """Aligned rows: configuration, base and head medians, the ratio with its interval,
    P(slower), speed of light where the documents carry it, and the verdict."""
    with_sol = any(c.speed_of_light or c.base_speed_of_light for c in comparisons)
    header: tuple[str, ...] = ("configuration", "base", "head", "ratio [90% interval]")
    header += ("P(slower)", "SOL base -> head", "verdict") if with_sol else ("P(slower)", "verdict")
    rows = [header]
    for c in comparisons:
        row: tuple[str, ...] = (
            c.id,
            format_ns(c.base_median_ns),
            format_ns(c.head_median_ns),
            format_ratio_interval(c.ratio, c.low, c.high),
            format_probability(c.p_slower),
        )
        if with_sol:
            row += (f"{_sol(c.base_speed_of_light)} -> {_sol(c.speed_of_light)}",)
        rows.append((*row, c.verdict))
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    lines = []
    for n, r in enumerate(rows):
        cells = [r[0].ljust(widths[0])] + [r[i].rjust(widths[i]) for i in range(1, len(r) - 1)]
        cells.append(r[-1])
        lines.append("  ".join(cells).rstrip())
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return lines


def explanation_lines(comparisons: Sequence[ConfigComparison], *, top: int = 3) -> list[str]:
    """What moved in each explained configuration's profile (rnx/profile_diff.py), its
    largest `top` changes, and its memory change where it raised the tier. Names are the
    workload's text, printed as they are."""
    lines: list[str] = []
    for c in comparisons:
        rows = [change.text for change in c.explanation[:top]]
        if c.memory is not None and c.memory.tier != "PASS":
            growth = MISSING if c.memory.growth is None else f"{c.memory.growth:+.0%}"
            rows.append(
                f"peak memory {format_bytes(c.memory.base_bytes)} -> "
                f"{format_bytes(c.memory.head_bytes)} ({growth}): {c.memory.tier}"
            )
        if rows:
            lines.append(f"why {c.id} moved (profile diff; it explains, never decides):")
            lines.extend(f"  {row}" for row in rows)
    return lines
