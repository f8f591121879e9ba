"""Charts drawn on the server as inline SVG: no JavaScript, nothing fetched at run time."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache

from markupsafe import Markup, escape

from rnx.formatting import format_ns, format_ratio
from rnx.memory_gate import format_bytes

# Units for times given in nanoseconds, largest first (the axis picks one for all its ticks).
_UNITS = (("s", 1e9), ("ms", 1e6), ("µs", 1e3), ("ns", 1.0))


def _unit_for(ns: float) -> tuple[str, float]:
    for name, scale in _UNITS:
        if abs(ns) >= scale:
            return name, scale
    return "ns", 1.0


def nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    """Round tick values (1, 2 or 5 times a power of ten) covering [low, high]."""
    if not (math.isfinite(low) and math.isfinite(high)) or high <= low:
        return [low]
    raw = (high - low) / max(count - 1, 1)
    power = 10 ** math.floor(math.log10(raw))

    def n_ticks(step: float) -> int:
        return math.floor(high / step + 1e-9) - math.ceil(low / step - 1e-9) + 1

    # The round step whose tick count comes closest to `count` (ties: the coarser step).
    candidates = [m * power for m in (10, 5, 2, 1, 0.5)]
    step = min(candidates, key=lambda st: abs(n_ticks(st) - count))
    first = math.ceil(low / step - 1e-9) * step
    return [first + k * step for k in range(n_ticks(step))]


def _tick_label(value: float, scale: float, unit: str, step: float) -> str:
    shown = value / scale
    digits = max(0, -math.floor(math.log10(step / scale))) if step > 0 else 0
    return f"{shown:.{min(digits, 3)}f} {unit}"


def _fmt(v: float) -> str:
    return f"{v:.1f}"


@dataclass(frozen=True)
class HistoryPoint:
    """One commit of the baseline branch, for one configuration."""

    run_id: str
    sha: str
    created_at: datetime
    median_ns: float
    low_ns: float
    high_ns: float
    environment: str  # the key: what makes runs comparable
    tier: str
    is_baseline: bool
    ratio: float | None = None  # head/base from the run's own verdict
    accepted_reason: str | None = None
    # Set when the environment's details (not its key) changed since the previous commit.
    environment_note: str | None = None
    # What to call the environment (rnx.environments): its name and hardware; the key if unset.
    environment_label: str = ""
    # The configuration's peak memory over its profiled calls (rnx.schema.Memory); None: the
    # run recorded none (profiling off, or a document older than memory).
    peak_bytes: int | None = None


def _point_title(p: HistoryPoint) -> str:
    ratio = (
        f"{format_ratio(p.ratio)} vs. its baseline"
        if p.ratio is not None
        else "no baseline to compare"
    )
    lines = [
        f"{p.sha[:10]} · {p.created_at:%Y-%m-%d %H:%M} UTC",
        f"median {format_ns(p.median_ns)} "
        f"(interval {format_ns(p.low_ns)} – {format_ns(p.high_ns)})",
        ratio,
        f"{p.tier} · environment {p.environment_label or p.environment}",
    ]
    if p.environment_note is not None:
        lines.append(p.environment_note)
    if p.accepted_reason is not None:
        lines.append(f"accepted: {p.accepted_reason}")
    elif not p.is_baseline:
        lines.append("not a baseline")
    return "\n".join(lines)


@dataclass(frozen=True)
class StepMark:
    """A measured commit of a change point's bisection (docs/bisection.md)."""

    sha: str
    ratio_before: float  # its time over the before end's
    side: str  # before | after | undecided


@dataclass(frozen=True)
class ChangeMark:
    """A change point found in this configuration's history
    (gate_server/domain/change_points.py)."""

    id: int
    after_run_id: str  # the first run after the change: the mark is drawn just before it
    ratio: float
    low: float
    high: float
    status: str  # open | acknowledged | resolved
    early: bool = False  # found in a short history, on weaker evidence
    drift: bool = False  # a gradual change (from this run over later ones), not a step
    culprit: str | None = None  # "sha by author (#PR)" once its bisection found it
    steps: tuple[StepMark, ...] = ()  # its bisection's measured commits, oldest step first


def history_svg(
    points: Sequence[HistoryPoint],
    *,
    label: str,
    width: int = 800,
    changes: Sequence[ChangeMark] = (),
) -> Markup:
    """Median time per commit with its interval band; markers for accepts, BLOCKs, env changes
    and change points."""
    return _history_svg(tuple(points), label, width, tuple(changes))


@dataclass(frozen=True)
class _Frame:
    """Where a history chart's plot area lies, and its time range: maps points to pixels."""

    width: int
    count: int  # points along x
    low_ns: float
    high_ns: float
    height: int = 260
    left: int = 70
    right: int = 64
    top: int = 22
    bottom: int = 40

    @property
    def plot_w(self) -> int:
        return self.width - self.left - self.right

    @property
    def plot_h(self) -> int:
        return self.height - self.top - self.bottom

    def x(self, i: int) -> float:
        return self.left + (i + 0.5) * self.plot_w / self.count

    def y(self, ns: float) -> float:
        return self.top + self.plot_h * (1 - (ns - self.low_ns) / (self.high_ns - self.low_ns))

    def mark(self, xm: str, inner: str, css: str) -> str:
        """A vertical marker line across the plot between two commits."""
        return (
            f'<g class="mark {css}"><line x1="{xm}" x2="{xm}" y1="{self.top}" '
            f'y2="{self.top + self.plot_h}"/>{inner}</g>'
        )


def on_line(p: HistoryPoint) -> bool:
    """Whether the median line runs through this commit: not through a BLOCK (never a
    baseline) nor an accepted run (a slowdown someone let through, often far off the series).
    Those are drawn as marked points, and the axis is scaled to the line's history, so one 2.5x
    spike does not squash a +-20% history into the bottom of the chart."""
    return p.tier != "BLOCK" and p.accepted_reason is None


def _history_frame(points: Sequence[HistoryPoint], width: int) -> _Frame:
    scaled = [p for p in points if on_line(p)] or list(points)
    lo = min(p.low_ns for p in scaled)
    hi = max(p.high_ns for p in scaled)
    pad = (hi - lo) * 0.08 or max(hi * 0.05, 1.0)
    return _Frame(width, len(points), max(lo - pad, 0.0), hi + pad)


# A pure function of frozen points: the same window (same runs, same accepts) draws the same
# chart, so repeated views of a busy repository reuse it. An accept changes a point, and so
# the key: nothing to invalidate by hand.
@lru_cache(maxsize=256)
def _history_svg(
    points: tuple[HistoryPoint, ...], label: str, width: int, changes: tuple[ChangeMark, ...]
) -> Markup:
    height = _Frame.height
    out = [
        f'<svg class="chart history" viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="{escape(label)}" data-points="{len(points)}" '
        'xmlns="http://www.w3.org/2000/svg">'
    ]
    if not points:
        out.append(
            f'<text class="empty" x="{width / 2}" y="{height / 2}" text-anchor="middle">'
            "No runs on the baseline branch yet</text></svg>"
        )
        return Markup("".join(out))
    frame = _history_frame(points, width)
    out += _history_grid(frame)
    out += _history_series(points, frame)
    out += _change_marks(points, changes, frame)
    out += _history_axis(points, frame)
    out += _history_points(points, frame)
    out.append("</svg>")
    return Markup("".join(out))


def _history_grid(f: _Frame) -> list[str]:
    ticks = nice_ticks(f.low_ns, f.high_ns)
    unit, scale = _unit_for(f.high_ns)
    step = ticks[1] - ticks[0] if len(ticks) > 1 else f.high_ns
    out = ['<g class="grid">']
    for t in ticks:
        label = escape(_tick_label(t, scale, unit, step))
        out.append(
            f'<line x1="{f.left}" x2="{f.width - f.right}" y1="{_fmt(f.y(t))}" '
            f'y2="{_fmt(f.y(t))}"/>'
            f'<text class="tick" x="{f.left - 8}" y="{_fmt(f.y(t) + 4)}" text-anchor="end">'
            f"{label}</text>"
            # Mirrored on the right: a phone scrolls a wide chart to its newest (right) end.
            f'<text class="tick" x="{f.width - f.right + 8}" y="{_fmt(f.y(t) + 4)}">'
            f"{label}</text>"
        )
    out.append("</g>")
    return out


def _history_series(points: Sequence[HistoryPoint], f: _Frame) -> list[str]:
    """The interval band and the median line, broken where the environment changes (times
    from different machines must not look like one series), and the change markers."""
    segments: list[list[int]] = []
    for i, p in enumerate(points):
        if not on_line(p):
            continue
        if not segments or p.environment != points[segments[-1][-1]].environment:
            segments.append([])
        segments[-1].append(i)
    out = []
    for seg in segments:
        upper = " ".join(f"{_fmt(f.x(i))},{_fmt(f.y(points[i].high_ns))}" for i in seg)
        lower = " ".join(f"{_fmt(f.x(i))},{_fmt(f.y(points[i].low_ns))}" for i in reversed(seg))
        out.append(f'<polygon class="band" points="{upper} {lower}"/>')
        line = " ".join(f"{_fmt(f.x(i))},{_fmt(f.y(points[i].median_ns))}" for i in seg)
        out.append(f'<polyline class="line" points="{line}"/>')
    # Marked at every change of environment, a BLOCK's or an accept's too (they are off the line).
    for i in range(1, len(points)):
        if points[i].environment == points[i - 1].environment:
            continue
        xm = _fmt((f.x(i) + f.x(i - 1)) / 2)
        first = points[i]
        env = first.environment_label or first.environment
        label = (
            f'<text x="{xm}" y="{f.top - 6}" text-anchor="middle">env → {escape(env[:24])}'
            f"</text><title>environment changed to {escape(env)} "
            f"(key {escape(first.environment)})</title>"
        )
        out.append(f.mark(xm, label, "env-change"))
    for i, p in enumerate(points):
        if p.environment_note is not None and i > 0:
            xm = _fmt((f.x(i) + f.x(i - 1)) / 2)
            out.append(f.mark(xm, f"<title>{escape(p.environment_note)}</title>", "env-details"))
    return out


def _change_marks(
    points: Sequence[HistoryPoint], changes: Sequence[ChangeMark], f: _Frame
) -> list[str]:
    """A solid line before the first run after each change point in the window, labelled with
    its ratio; its status picks the colour (open: red)."""
    index = {p.run_id: i for i, p in enumerate(points)}
    out = []
    for c in changes:
        i = index.get(c.after_run_id)
        if i is None:
            continue
        xm = _fmt(f.x(i) - f.plot_w / f.count / 2)
        title = (
            f"change point: {format_ratio(c.ratio)} (90% interval {c.low:.3f}–{c.high:.3f}) "
            f"from {points[i].sha[:10]}, {c.status}{', a drift' if c.drift else ''}"
            f"{', early' if c.early else ''}"
        )
        if c.culprit:
            title += f"; culprit {c.culprit}"
        out.append(
            f'<g class="mark change-point cp-{escape(c.status)}" data-change-point="{c.id}">'
            f'<line x1="{xm}" x2="{xm}" y1="{f.top}" y2="{f.top + f.plot_h}"/>'
            f'<text x="{xm}" y="{f.top - 6}" text-anchor="middle">'
            f"{escape(format_ratio(c.ratio))}</text><title>{escape(title)}</title></g>"
        )
        if i > 0:
            out += _step_marks(c, points[i - 1], f.x(i - 1), f.x(i), f)
    return out


def _step_marks(c: ChangeMark, before: HistoryPoint, x0: float, x1: float, f: _Frame) -> list[str]:
    """The bisection's measured commits between the runs around the change, in the order they
    were measured, each at its time (its ratio to the before end times that run's median)."""
    out = []
    for k, s in enumerate(c.steps):
        x = _fmt(x0 + (k + 1) / (len(c.steps) + 1) * (x1 - x0))
        y = _fmt(min(max(f.y(before.median_ns * s.ratio_before), f.top), f.top + f.plot_h))
        ratio = format_ratio(s.ratio_before)
        title = f"bisection step {k + 1}: {s.sha[:10]}, {ratio} vs before: {s.side}"
        out.append(
            f'<circle class="bisect-step side-{escape(s.side)}" cx="{x}" cy="{y}" r="3">'
            f"<title>{escape(title)}</title></circle>"
        )
    return out


def _history_axis(points: Sequence[HistoryPoint], f: _Frame) -> list[str]:
    """x-axis labels: a handful of evenly spaced commits; the date only where it changes."""
    out = []
    labels = min(len(points), 6)
    last_day = None
    for k in range(labels):
        i = round(k * (len(points) - 1) / max(labels - 1, 1))
        p = points[i]
        day = f"{p.created_at:%b %d}"
        if day != last_day:
            out.append(
                f'<text class="tick" x="{_fmt(f.x(i))}" y="{f.height - 22}" '
                f'text-anchor="middle">{day}</text>'
            )
        last_day = day
        out.append(
            f'<text class="tick sha" x="{_fmt(f.x(i))}" y="{f.height - 8}" '
            f'text-anchor="middle">{escape(p.sha[:7])}</text>'
        )
    return out


def _point_kind(p: HistoryPoint) -> str:
    if p.accepted_reason is not None:
        return "accepted"
    if p.tier == "BLOCK":
        return "block"
    return "baseline" if p.is_baseline else "other"


def _history_points(points: Sequence[HistoryPoint], f: _Frame) -> list[str]:
    """One marker per commit, linking to its run: a diamond for an accept, else a dot."""
    out = []
    radius = 4.0 if len(points) <= 80 else 3.0 if len(points) <= 200 else 2.0
    for i, p in enumerate(points):
        # A point off the line's scale sits at the plot's edge, marked as off the scale.
        y = f.y(p.median_ns)
        edge = min(max(y, f.top), f.top + f.plot_h)
        cx, cy = _fmt(f.x(i)), _fmt(edge)
        kind = _point_kind(p)
        css = f"pt pt-{kind}" + (" pt-off-scale" if edge != y else "")
        note = "\n(off the chart's scale, which follows the line)" if edge != y else ""
        title = f"<title>{escape(_point_title(p) + note)}</title>"
        if kind == "accepted":
            r = radius + 2
            shape = (
                f'<path class="{css}" data-run-id="{escape(p.run_id)}" '
                f'd="M{cx} {_fmt(float(cy) - r)} l{r} {r} l{-r} {r} l{-r} {-r} z">{title}</path>'
            )
        else:
            shape = (
                f'<circle class="{css}" data-run-id="{escape(p.run_id)}" cx="{cx}" '
                f'cy="{cy}" r="{radius}">{title}</circle>'
            )
        out.append(f'<a href="/runs/{escape(p.run_id)}">{shape}</a>')
    return out


# Binary units for bytes, largest first: memory is allocated in powers of two.
_BYTE_UNITS = (("GiB", float(1 << 30)), ("MiB", float(1 << 20)), ("KiB", 1024.0), ("B", 1.0))


def memory_svg(points: Sequence[HistoryPoint], *, label: str, width: int = 800) -> Markup | None:
    """Peak memory per commit, on the time chart's x positions so the two read side by side;
    None when no point recorded memory."""
    if all(p.peak_bytes is None for p in points):
        return None
    return _memory_svg(tuple(points), label, width)


@lru_cache(maxsize=256)
def _memory_svg(points: tuple[HistoryPoint, ...], label: str, width: int) -> Markup:
    values = [p.peak_bytes for p in points if p.peak_bytes is not None]
    lo, hi = min(values), max(values)
    # Memory is nearly deterministic: a flat series gets a band of +-5% so a change shows as one.
    pad = (hi - lo) * 0.1 or max(hi * 0.05, 1.0)
    f = _Frame(width, len(points), max(lo - pad, 0.0), hi + pad, height=150, bottom=16)
    unit, scale = next(((u, s) for u, s in _BYTE_UNITS if f.high_ns >= s), ("B", 1.0))
    ticks = nice_ticks(f.low_ns / scale, f.high_ns / scale, count=3)
    step = ticks[1] - ticks[0] if len(ticks) > 1 else 1.0
    out = [
        f'<svg class="chart memory-history" viewBox="0 0 {width} {f.height}" role="img" '
        f'aria-label="{escape(label)}" data-points="{len(values)}" '
        'xmlns="http://www.w3.org/2000/svg"><g class="grid">'
    ]
    for t in ticks:
        y = _fmt(f.y(t * scale))
        text = escape(_tick_label(t, 1.0, unit, step))
        out.append(
            f'<line x1="{f.left}" x2="{f.width - f.right}" y1="{y}" y2="{y}"/>'
            f'<text class="tick" x="{f.left - 8}" y="{_fmt(float(y) + 4)}" text-anchor="end">'
            f'{text}</text><text class="tick" x="{f.width - f.right + 8}" '
            f'y="{_fmt(float(y) + 4)}">{text}</text>'
        )
    out.append("</g>")
    segment: list[str] = []
    for i, p in enumerate(points):  # one line per environment, as the time chart breaks it
        if p.peak_bytes is None:
            continue
        if i > 0 and p.environment != points[i - 1].environment and segment:
            out.append(f'<polyline class="line" points="{" ".join(segment)}"/>')
            segment = []
        segment.append(f"{_fmt(f.x(i))},{_fmt(f.y(p.peak_bytes))}")
    out.append(f'<polyline class="line" points="{" ".join(segment)}"/>')
    for i, p in enumerate(points):
        if p.peak_bytes is None:
            continue
        title = f"{p.sha[:10]} · {p.created_at:%Y-%m-%d %H:%M} UTC\npeak memory " + format_bytes(
            p.peak_bytes
        )
        out.append(
            f'<a href="/runs/{escape(p.run_id)}"><circle class="pt pt-{_point_kind(p)}" '
            f'data-run-id="{escape(p.run_id)}" data-bytes="{p.peak_bytes}" cx="{_fmt(f.x(i))}" '
            f'cy="{_fmt(f.y(p.peak_bytes))}" r="3"><title>{escape(title)}</title></circle></a>'
        )
    out.append("</svg>")
    return Markup("".join(out))


def _quantile(sorted_values: Sequence[float], q: float) -> float:
    pos = (len(sorted_values) - 1) * q
    low = math.floor(pos)
    high = min(low + 1, len(sorted_values) - 1)
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * (pos - low)


def median_interval(
    values: Sequence[float], confidence: float = 0.95
) -> tuple[float, float, float]:
    """Median and a distribution-free confidence interval for it, from order statistics.

    The ranks come from the normal approximation to the binomial (n/2 ± z·√n/2): no
    bootstrap, so a page of hundreds of runs stays cheap, and no assumption on the shape.
    """
    s = sorted(values)
    n = len(s)
    if n == 0:
        raise ValueError("median_interval needs at least one value")
    z = {0.90: 1.645, 0.95: 1.96, 0.99: 2.576}.get(confidence, 1.96)
    half = z * math.sqrt(n) / 2
    lo_rank = max(0, math.floor(n / 2 - half))
    hi_rank = min(n - 1, math.ceil(n / 2 + half) - 1)
    return _quantile(s, 0.5), s[lo_rank], s[max(hi_rank, lo_rank)]


def _lane(
    values: Sequence[float], lane_y: float, x_of: Callable[[float], float], css: str, name: str
) -> list[str]:
    s = sorted(values)
    q1, med, q3 = _quantile(s, 0.25), _quantile(s, 0.5), _quantile(s, 0.75)
    p5, p95 = _quantile(s, 0.05), _quantile(s, 0.95)
    out = [f'<g class="lane {css}">']
    # At most 240 dots per side keeps the page light; every k-th sorted value keeps the shape.
    stride = max(1, math.ceil(len(values) / 240))
    for j, v in enumerate(values[::stride]):
        jitter = ((j * 0.618034) % 1.0 - 0.5) * 22
        out.append(f'<circle class="dot" cx="{_fmt(x_of(v))}" cy="{_fmt(lane_y + jitter)}" r="2"/>')
    out.append(
        f'<line class="whisker" x1="{_fmt(x_of(p5))}" x2="{_fmt(x_of(p95))}" '
        f'y1="{lane_y}" y2="{lane_y}"/>'
        f'<rect class="box" x="{_fmt(x_of(q1))}" y="{lane_y - 9}" '
        f'width="{_fmt(max(x_of(q3) - x_of(q1), 1.0))}" height="18"/>'
        f'<line class="median" x1="{_fmt(x_of(med))}" x2="{_fmt(x_of(med))}" '
        f'y1="{lane_y - 13}" y2="{lane_y + 13}"/>'
        f"<title>{escape(name)}: {len(values)} samples, median {escape(format_ns(med))}, "
        f"middle half {escape(format_ns(q1))} – {escape(format_ns(q3))}</title></g>"
    )
    return out


def distribution_svg(
    base: Sequence[float] | None, head: Sequence[float] | None, *, label: str, width: int = 440
) -> Markup:
    """Base and head samples on one time axis: dots, the middle half as a box, the median."""
    height, left, right = 132, 48, 28
    lanes = [("base", base, 34.0), ("head", head, 80.0)]
    present = [v for _, vals, _ in lanes if vals for v in vals]
    out = [
        f'<svg class="chart dist" viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="{escape(label)}" xmlns="http://www.w3.org/2000/svg">'
    ]
    if not present:
        out.append(
            f'<text class="empty" x="{width / 2}" y="{height / 2}" text-anchor="middle">'
            "No samples</text></svg>"
        )
        return Markup("".join(out))
    s = sorted(present)
    # Clip the far tails so one stall does not squash both distributions into a line.
    lo, hi = _quantile(s, 0.005), _quantile(s, 0.995)
    pad = (hi - lo) * 0.06 or max(hi * 0.05, 1.0)
    lo, hi = max(lo - pad, 0.0), hi + pad
    plot_w = width - left - right

    def x_of(v: float) -> float:
        return left + plot_w * (min(max(v, lo), hi) - lo) / (hi - lo)

    ticks = nice_ticks(lo, hi, 5)
    unit, scale = _unit_for(hi)
    step = ticks[1] - ticks[0] if len(ticks) > 1 else hi
    out.append('<g class="grid">')
    for t in ticks:
        out.append(
            f'<line x1="{_fmt(x_of(t))}" x2="{_fmt(x_of(t))}" y1="12" y2="{height - 26}"/>'
            f'<text class="tick" x="{_fmt(x_of(t))}" y="{height - 10}" text-anchor="middle">'
            f"{escape(_tick_label(t, scale, unit, step))}</text>"
        )
    out.append("</g>")
    for name, vals, lane_y in lanes:
        out.append(
            f'<text class="lane-label" x="{left - 8}" y="{lane_y + 4}" text-anchor="end">'
            f"{name}</text>"
        )
        if vals:
            out.extend(_lane(vals, lane_y, x_of, name, name))
        else:
            out.append(f'<text class="empty" x="{left + 8}" y="{lane_y + 4}">no samples</text>')
    out.append("</svg>")
    return Markup("".join(out))
