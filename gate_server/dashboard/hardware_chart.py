"""The /hardware page's chart: per configuration, one bar per environment (its median time) with
a whisker for the median's 90% interval, on a log time axis (a GPU and a CPU differ by orders of
magnitude). Inline SVG, like the other charts: no JavaScript."""

from __future__ import annotations

import math
from collections.abc import Callable

from markupsafe import Markup, escape

from rnx.formatting import format_ns
from rnx.hardware import FASTER, SLOWER, Cell, HardwareComparison

WIDTH = 760
LEFT = 170  # environment labels
HEADER = 18  # the configuration's name above its bars
RIGHT = 150  # the verdict after each bar
BAR = 14
GAP = 4
GROUP_GAP = 16
TOP = 10
AXIS = 30


def _decades(low: float, high: float) -> list[float]:
    """Tick values on a log axis: 1, 2 and 5 times each power of ten when the range is short,
    powers of ten alone when it is long."""
    first, last = math.floor(math.log10(low)), math.ceil(math.log10(high))
    steps = (1, 2, 5) if last - first <= 3 else (1,)
    ticks = [m * 10.0**p for p in range(first, last + 1) for m in steps]
    return [t for t in ticks if low <= t <= high]


def _verdict_text(verdict: str, speedup: float | None) -> str:
    if verdict == FASTER and speedup:
        return f"{speedup:.3g}× faster"
    if verdict == SLOWER and speedup:
        return f"{1 / speedup:.3g}× slower"
    return verdict


def comparison_svg(comparison: HardwareComparison) -> Markup:
    times = [
        v
        for row in comparison.rows
        for c in row.cells
        for v in (c.low_ns, c.high_ns, c.median_ns)
        if v is not None and v > 0
    ]
    index = {s.label: i for i, s in enumerate(comparison.sides)}
    n_env = len(comparison.sides)
    group_h = HEADER + n_env * (BAR + GAP) + GROUP_GAP
    height = TOP + len(comparison.rows) * group_h + AXIS
    out = [
        f'<svg class="chart hwbars" viewBox="0 0 {WIDTH} {height}" role="img" '
        f'aria-label="Median time per configuration and environment, with 90% intervals" '
        f'xmlns="http://www.w3.org/2000/svg">'
    ]
    if not times:
        out.append(f'<text class="empty" x="{WIDTH / 2}" y="{height / 2}">No timings</text></svg>')
        return Markup("".join(out))
    lo, hi = min(times) / 1.4, max(times) * 1.4
    plot = WIDTH - LEFT - RIGHT

    def x(v: float) -> float:
        return LEFT + plot * (math.log(v) - math.log(lo)) / (math.log(hi) - math.log(lo))

    axis_y = height - AXIS + 4
    out.append('<g class="grid">')
    for t in _decades(lo, hi):
        out.append(
            f'<line x1="{x(t):.1f}" x2="{x(t):.1f}" y1="{TOP}" y2="{axis_y}"/>'
            f'<text class="tick" x="{x(t):.1f}" y="{axis_y + 14}" text-anchor="middle">'
            f"{escape(format_ns(t))}</text>"
        )
    out.append("</g>")
    for g, row in enumerate(comparison.rows):
        y0 = TOP + g * group_h
        out.append(f'<text class="cfg" x="4" y="{y0 + HEADER - 6}">{escape(row.id)}</text>')
        for k, cell in enumerate(row.cells):
            y = y0 + HEADER + k * (BAR + GAP)
            out.extend(_bar(row.id, cell, y, index[cell.environment], x))
    out.append("</svg>")
    return Markup("".join(out))


def _bar(config: str, cell: Cell, y: float, env: int, x: Callable[[float], float]) -> list[str]:
    """One environment's bar: its label, the median as a bar, the interval as a whisker."""
    out = [
        f'<text class="env-label" x="{LEFT - 6}" y="{y + BAR - 3}" text-anchor="end">'
        f"{escape(cell.environment)}</text>"
    ]
    if cell.median_ns is None or cell.low_ns is None or cell.high_ns is None:
        out.append(
            f'<text class="empty" x="{LEFT + 4}" y="{y + BAR - 3}">{escape(cell.status)}</text>'
        )
        return out
    title = (
        f"{config} on {cell.environment}: median {format_ns(cell.median_ns)}, "
        f"90% interval {format_ns(cell.low_ns)}–{format_ns(cell.high_ns)}"
    )
    mid, lo, hi = y + BAR / 2, x(cell.low_ns), x(cell.high_ns)
    width = max(x(cell.median_ns) - LEFT, 1)
    verdict = cell.verdict.replace(" ", "-")
    out += [
        f'<g class="bar env-{env} v-{verdict}"><title>{escape(title)}</title>',
        f'<rect x="{LEFT}" y="{y}" width="{width:.1f}" height="{BAR}"/>',
        f'<line class="whisker" x1="{lo:.1f}" x2="{hi:.1f}" y1="{mid}" y2="{mid}"/>',
        f'<line class="whisker" x1="{lo:.1f}" x2="{lo:.1f}" y1="{y + 2}" y2="{y + BAR - 2}"/>',
        f'<line class="whisker" x1="{hi:.1f}" x2="{hi:.1f}" y1="{y + 2}" y2="{y + BAR - 2}"/>',
        f'<text class="verdict" x="{WIDTH - RIGHT + 8}" y="{y + BAR - 3}">'
        f"{escape(_verdict_text(cell.verdict, cell.speedup))}</text></g>",
    ]
    return out
