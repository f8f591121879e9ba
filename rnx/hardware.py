"""Compare hardware: one workload's results documents from 2 to 6 environments, side by side.

Pure: documents in, rows out. Per configuration and environment: the median time with its 90%
interval, items per second (batch size / time), the cost of a million items at the
environment's hourly price, and the time ratio to the baseline environment from
stats.compare on the raw samples. One machine is called faster or slower only when the
ratio's 90% interval excludes 1; otherwise there is no credible difference.
`rnx compare-hardware` (rnx_cli/hardware.py) and the dashboard's /hardware page both use it.
"""

from __future__ import annotations

import csv
import io
import math
import posixpath
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import stats
from rnx.errors import InvalidData
from rnx.formatting import (
    MISSING,
    format_factor_interval,
    format_money,
    format_ns,
    format_rate,
)
from rnx.schema import Configuration, ResultsDocument

MIN_ENVIRONMENTS = 2
MAX_ENVIRONMENTS = 6
# Hourly prices (`--price`, `rnx environment price`) are in US dollars, and so are the costs.
CURRENCY = "USD"
BASELINE = "baseline"
FASTER = "faster"
SLOWER = "slower"
NO_DIFFERENCE = "no credible difference"
NOT_COMPARED = "not compared"


class NotComparable(InvalidData):
    """The runs handed over cannot be compared side by side (the message says why)."""


# Software that changes timings across machines, in the order a reader looks for it; the GPU
# driver comes from nvidia-smi (bench_runner.environment.collect_gpu).
SOFTWARE_FIELDS: tuple[tuple[str, str], ...] = (
    ("torch", "torch"),
    ("CUDA (torch built with)", "torch_cuda"),
    ("GPU driver", "driver"),
    ("cuDNN", "cudnn"),
    ("triton", "triton"),
    ("onnxruntime", "onnxruntime"),
    ("onnxruntime-gpu", "onnxruntime-gpu"),
    ("tensorrt", "tensorrt"),
    ("python", "python"),
    ("numpy", "numpy"),
    ("torch threads", "torch_threads"),
    ("float32 matmul precision", "float32_matmul_precision"),
    ("OS kernel", "kernel"),
    ("rnx-benchmark", "rnx-benchmark"),
)


@dataclass(frozen=True)
class Side:
    """One environment of the comparison."""

    label: str  # the environment's name, else its key
    key: str
    document: ResultsDocument
    price_per_hour: float | None = None  # in the user's currency, None when not set

    @property
    def hardware(self) -> str:
        """What it ran on, in a few words: the GPU's name, else the CPU's."""
        # `hardware` is free-form in the schema (what the harness saw): any shape is drawn.
        hw = self.document.environment.hardware
        found = hw.get("gpus")
        listed: list[Any] = found if isinstance(found, list) else []
        gpus = [g.get("name") for g in listed if isinstance(g, dict)]
        if gpus and gpus[0]:
            return f"{len(gpus)}× {gpus[0]}" if len(gpus) > 1 else str(gpus[0])
        cpu = hw.get("cpu_model") or hw.get("machine") or "unknown"
        count = hw.get("cpu_count") or hw.get("cores")
        return f"{cpu} ({count} CPUs)" if count else str(cpu)


@dataclass(frozen=True)
class Cell:
    """One configuration on one environment."""

    environment: str
    status: str  # the configuration's status, or "missing" when the run did not have it
    reason: str | None = None
    samples: int = 0
    median_ns: float | None = None
    low_ns: float | None = None
    high_ns: float | None = None
    items_per_second: float | None = None  # batch size / median time
    items_low: float | None = None  # from the median's interval
    items_high: float | None = None
    price_per_hour: float | None = None
    cost_per_million: float | None = None  # price_per_hour / 3600 * seconds per item * 1e6
    cost_low: float | None = None
    cost_high: float | None = None
    ratio: float | None = None  # this environment's time / the baseline's (posterior median)
    ratio_low: float | None = None  # its 90% credible interval
    ratio_high: float | None = None
    verdict: str = NOT_COMPARED  # BASELINE, FASTER, SLOWER, NO_DIFFERENCE or NOT_COMPARED
    note: str | None = None  # why there is no ratio or no throughput
    # The run's speed-of-light score of this configuration (roofline time / measured time),
    # when the harness recorded one: shown, never part of the verdict.
    speed_of_light: float | None = None
    # The lowest cost per million items of its configuration, among two or more priced ones.
    cheapest: bool = False

    @property
    def speedup(self) -> float | None:
        """How many times faster than the baseline (baseline time / this time)."""
        return None if self.ratio is None or self.ratio <= 0 else 1 / self.ratio


@dataclass(frozen=True)
class Row:
    id: str
    runtime: str
    dtype: str
    batch_size: int | None
    cells: list[Cell]


@dataclass(frozen=True)
class SoftwareRow:
    label: str
    values: list[str | None]  # one per environment, None when not recorded

    @property
    def differs(self) -> bool:
        return len(set(self.values)) > 1


@dataclass(frozen=True)
class HardwareComparison:
    workload: str
    sides: list[Side]  # the baseline first
    rows: list[Row]
    software: list[SoftwareRow]
    notes: list[str]

    @property
    def baseline(self) -> Side:
        return self.sides[0]


def side_labels(documents: Sequence[ResultsDocument]) -> list[str]:
    """What to call each environment: its name, or its key where the name is missing or
    shared with another of these runs."""
    names = [d.environment.name for d in documents]
    return [
        name if name and names.count(name) == 1 else d.environment.key
        for name, d in zip(names, documents, strict=True)
    ]


def _workload_path(document: ResultsDocument) -> str:
    return posixpath.normpath(document.workload.path.replace("\\", "/"))


def _check_sides(sides: Sequence[Side]) -> None:
    if not MIN_ENVIRONMENTS <= len(sides) <= MAX_ENVIRONMENTS:
        raise NotComparable(
            f"compare-hardware needs {MIN_ENVIRONMENTS} to {MAX_ENVIRONMENTS} environments, "
            f"got {len(sides)}"
        )
    paths = {_workload_path(s.document) for s in sides}
    if len(paths) > 1:
        raise NotComparable(
            f"the results are of different workloads ({', '.join(sorted(paths))}); "
            "compare-hardware compares one workload across environments"
        )
    seen: dict[str, str] = {}
    for s in sides:
        if s.key in seen:
            raise NotComparable(
                f"{seen[s.key]} and {s.label} are the same environment ({s.key}); compare two "
                "runs of one environment with `rnx compare`, or name environments apart with "
                "`rnx bench --environment NAME`"
            )
        seen[s.key] = s.label
        if s.price_per_hour is not None and not (
            math.isfinite(s.price_per_hour) and s.price_per_hour >= 0
        ):
            raise NotComparable(f"the price of {s.label} must be a number >= 0")
    labels = [s.label for s in sides]
    if len(set(labels)) < len(labels):
        raise NotComparable(f"two environments have the same label: {labels!r}")


def _samples(config: Configuration) -> list[list[int]] | None:
    if config.status != "ok" or config.samples is None or not config.samples.ns:
        return None
    return config.samples.by_process()


def _cell(side: Side, config: Configuration | None, where: stats.Location | None) -> Cell:
    label = side.label
    if config is None:
        return Cell(label, "missing", note="this environment's run has no such configuration")
    if where is None:
        return Cell(label, config.status, reason=config.reason, note="no timings")
    cell = Cell(
        label,
        config.status,
        speed_of_light=_score(config),
        samples=where.samples,
        median_ns=where.median,
        low_ns=where.low,
        high_ns=where.high,
        price_per_hour=side.price_per_hour,
    )
    if config.batch_size is None:
        return replace(cell, note="native shapes: no batch size, so no per-item throughput")
    return replace(cell, **_per_item(config.batch_size, where, side.price_per_hour))


def _score(config: Configuration) -> float | None:
    return None if config.speed_of_light is None else config.speed_of_light.score


def _per_item(batch: int, where: stats.Location, price: float | None) -> dict[str, Any]:
    """Items per second and the cost of a million items, with the median's interval carried
    through (both are monotone in the time, so the interval's ends map to the ends)."""
    out: dict[str, Any] = {
        "items_per_second": batch / (where.median * 1e-9),
        "items_low": batch / (where.high * 1e-9),
        "items_high": batch / (where.low * 1e-9),
    }
    if price is not None:
        out["cost_per_million"] = cost_per_million(price, where.median, batch)
        out["cost_low"] = cost_per_million(price, where.low, batch)
        out["cost_high"] = cost_per_million(price, where.high, batch)
    return out


def cost_per_million(price_per_hour: float, time_ns: float, batch_size: int) -> float:
    """What a million items cost at this hourly price when one call of `batch_size` items
    takes `time_ns`: price per second x seconds per item x 1e6."""
    return price_per_hour / 3600 * (time_ns * 1e-9 / batch_size) * 1e6


def verdict_of(low: float, high: float) -> str:
    """Faster or slower only when the ratio's interval excludes 1: the statistics' own
    comparison of the two machines, not whether two latency bars overlap."""
    if high < 1:
        return FASTER
    if low > 1:
        return SLOWER
    return NO_DIFFERENCE


def _with_ratio(cell: Cell, c: stats.Comparison) -> Cell:
    if not c.sufficient:
        return replace(
            cell,
            note=f"fewer than {stats.MIN_SAMPLES} samples on a side: no verdict",
            ratio=c.ratio,
            ratio_low=c.low,
            ratio_high=c.high,
        )
    return replace(
        cell, ratio=c.ratio, ratio_low=c.low, ratio_high=c.high, verdict=verdict_of(c.low, c.high)
    )


def _statistics(
    by_side: list[dict[str, Configuration]], seed: int
) -> tuple[dict[tuple[int, str], stats.Location], dict[tuple[int, str], stats.Comparison]]:
    """Every timed cell's median interval, and every non-baseline cell's comparison with the
    baseline, each in one vectorised pass (48 configurations on 6 machines are 288 cells)."""
    timed = {
        (i, cid): groups
        for i, configs in enumerate(by_side)
        for cid, config in configs.items()
        if (groups := _samples(config)) is not None
    }
    located = stats.median_intervals(list(timed.values()), seed=seed) if timed else []
    locations = dict(zip(timed, located, strict=True))
    pairs = {
        (i, cid): (timed[(0, cid)], groups)
        for (i, cid), groups in timed.items()
        if i > 0 and (0, cid) in timed
    }
    compared = stats.compare_many(list(pairs.values()), seed=seed) if pairs else []
    return locations, dict(zip(pairs, compared, strict=True))


def _software(sides: Sequence[Side]) -> list[SoftwareRow]:
    rows = [SoftwareRow("hardware", [s.hardware for s in sides])]
    for label, key in SOFTWARE_FIELDS:
        values = [_software_value(s.document, key) for s in sides]
        if any(v is not None for v in values):
            rows.append(SoftwareRow(label, values))
    return rows


def _software_value(document: ResultsDocument, key: str) -> str | None:
    env = document.environment
    if key == "driver":
        smi = env.hardware.get("nvidia_smi")
        if isinstance(smi, list) and smi and isinstance(smi[0], str):
            return smi[0].split(",")[0].strip() or None
        return None
    value = env.software.get(key)
    return None if value is None else str(value)


def compare_hardware(
    documents: Sequence[ResultsDocument],
    *,
    prices: Mapping[str, float] | None = None,
    labels: Sequence[str] | None = None,
    seed: int = 0,
) -> HardwareComparison:
    """Compare one workload's runs from different environments; the first is the baseline.

    prices: hourly price by environment name or key. labels: what to call each environment
    (default: its name, else its key)."""
    prices = dict(prices or {})
    names = list(labels) if labels is not None else side_labels(documents)
    sides = [
        Side(
            label=name,
            key=d.environment.key,
            document=d,
            price_per_hour=prices.get(name, prices.get(d.environment.key)),
        )
        for name, d in zip(names, documents, strict=True)
    ]
    _check_sides(sides)
    known = {s.label for s in sides} | {s.key for s in sides}
    unknown = sorted(set(prices) - known)
    if unknown:
        raise NotComparable(
            f"a price names no environment of these runs: {', '.join(unknown)} "
            f"(the environments are {', '.join(s.label for s in sides)})"
        )
    by_side = [{c.id: c for c in s.document.configurations} for s in sides]
    order = list(dict.fromkeys(cid for configs in by_side for cid in configs))
    locations, comparisons = _statistics(by_side, seed)
    rows = []
    for cid in order:
        first = next(configs[cid] for configs in by_side if cid in configs)
        cells = []
        for i, (side, configs) in enumerate(zip(sides, by_side, strict=True)):
            cell = _cell(side, configs.get(cid), locations.get((i, cid)))
            if i == 0:
                cell = replace(cell, verdict=BASELINE if (0, cid) in locations else NOT_COMPARED)
            elif (i, cid) in comparisons:
                cell = _with_ratio(cell, comparisons[(i, cid)])
            cells.append(cell)
        rows.append(Row(cid, first.runtime, first.dtype, first.batch_size, _cheapest(cells)))
    return HardwareComparison(
        workload=_workload_path(sides[0].document),
        sides=sides,
        rows=rows,
        software=_software(sides),
        notes=_notes(sides),
    )


def _cheapest(cells: list[Cell]) -> list[Cell]:
    """The cells with the cheapest one marked, when two or more have a cost to compare."""
    priced = [c for c in cells if c.cost_per_million is not None]
    if len(priced) < 2:
        return cells
    best = min(priced, key=lambda c: c.cost_per_million or 0.0)
    return [replace(c, cheapest=True) if c is best else c for c in cells]


def _notes(sides: Sequence[Side]) -> list[str]:
    notes = []
    digests = {s.document.workload.sha256 for s in sides}
    if len(digests) > 1:
        notes.append(
            "the workload's file differs between runs (its sha256 is not the same): "
            "the kernels compared may not be the same code"
        )
    unpriced = [s.label for s in sides if s.price_per_hour is None]
    if unpriced:
        notes.append(f"no hourly price for {', '.join(unpriced)}: no cost per million items")
    return notes


CSV_COLUMNS = (
    "configuration",
    "runtime",
    "dtype",
    "batch_size",
    "environment",
    "environment_key",
    "hardware",
    "status",
    "samples",
    "median_ns",
    "median_low_ns",
    "median_high_ns",
    "items_per_second",
    "items_per_second_low",
    "items_per_second_high",
    "price_per_hour",
    "currency",
    "cost_per_million_items",
    "cost_per_million_items_low",
    "cost_per_million_items_high",
    "cheapest",
    "ratio_to_baseline",
    "ratio_low",
    "ratio_high",
    "verdict",
    "speed_of_light",
    "note",
)


# A formula starts with one of these. Where the list separator is ';' (most of Europe), a
# spreadsheet splits an unquoted "gpu;=1+2" into cells, the second a formula: so a quote goes
# before a trigger at the start of the text and after every ';' or ','.
_FORMULA_START = re.compile(r"(^|[;,])([=+\-@\t\r])")


def _text(value: str) -> str:
    """Text from an uploaded document (an environment's name, a CPU model, a failure reason) as
    a spreadsheet reads it: no cell it could be split into starts a formula."""
    return _FORMULA_START.sub(r"\1'\2", value)


def _number(value: float | None) -> str:
    return "" if value is None else f"{value:.6g}"


def to_csv(comparison: HardwareComparison) -> str:
    """One line per configuration and environment; numbers to 6 significant digits, times in
    nanoseconds, empty where there is no value; text that a spreadsheet would take for a
    formula starts with a quote (')."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    sides = {s.label: s for s in comparison.sides}
    for row in comparison.rows:
        for cell in row.cells:
            side = sides[cell.environment]
            writer.writerow(
                [
                    row.id,
                    row.runtime,
                    row.dtype,
                    "" if row.batch_size is None else row.batch_size,
                    _text(side.label),
                    _text(side.key),
                    _text(side.hardware),
                    cell.status,
                    cell.samples,
                    _number(cell.median_ns),
                    _number(cell.low_ns),
                    _number(cell.high_ns),
                    _number(cell.items_per_second),
                    _number(cell.items_low),
                    _number(cell.items_high),
                    _number(cell.price_per_hour),
                    CURRENCY if cell.price_per_hour is not None else "",
                    _number(cell.cost_per_million),
                    _number(cell.cost_low),
                    _number(cell.cost_high),
                    "yes" if cell.cheapest else "",
                    _number(cell.ratio),
                    _number(cell.ratio_low),
                    _number(cell.ratio_high),
                    cell.verdict,
                    _number(cell.speed_of_light),
                    _text(cell.note or cell.reason or ""),
                ]
            )
    return out.getvalue()


def format_latency(cell: Cell) -> str:
    """A cell's median time with its 90% interval, or its status when it has no timings."""
    if cell.median_ns is None:
        return cell.status
    return f"{format_ns(cell.median_ns)} ({format_ns(cell.low_ns)}–{format_ns(cell.high_ns)})"


def format_verdict(cell: Cell) -> str:
    """faster/slower with how many times, or the verdict as it is."""
    speedup = cell.speedup
    if cell.verdict in ("faster", "slower") and speedup is not None:
        times = speedup if cell.verdict == "faster" else 1 / speedup
        return f"{cell.verdict} ({times:.3g}×)"
    return cell.verdict


_MARKDOWN_SPECIAL = re.compile(r"([\\`*_\[\]|~])")


def _md(text: str) -> str:
    """Text from an uploaded document (an environment's name, a workload path, a note) as a
    Markdown table cell shows it: on one line, as the characters it is; it can neither end the
    cell (|), format, link nor open HTML."""
    text = " ".join(text.split())
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _MARKDOWN_SPECIAL.sub(r"\\\1", text)


def to_markdown(comparison: HardwareComparison) -> str:
    """The comparison as Markdown, the form pasted into a pull request or a design doc: the
    per-configuration table (costs in USD, the cheapest marked), the software side by side
    (differing rows marked) and the notes."""
    base = comparison.baseline
    lines = [
        f"### Hardware comparison: {_md(comparison.workload)}",
        "",
        f"Baseline: **{_md(base.label)}** ({_md(base.hardware)}). Times are medians with their "
        f"90% intervals; cost per million items in {CURRENCY} at each environment's hourly "
        "price, **cheapest** marked; faster or slower only where the ratio's 90% interval "
        "excludes 1.",
        "",
        "| configuration | environment | median [90%] | items/s "
        f"| cost / 1M items ({CURRENCY}) | time vs baseline [90%] | verdict |",
        "|---|---|---:|---:|---:|---:|---|",
    ]
    for row in comparison.rows:
        for n, cell in enumerate(row.cells):
            cost = format_money(cell.cost_per_million)
            ratio = format_factor_interval(cell.ratio, cell.ratio_low, cell.ratio_high)
            lines.append(
                "| "
                + " | ".join(
                    [
                        f"`{row.id}`" if n == 0 else "",
                        _md(cell.environment),
                        format_latency(cell),
                        format_rate(cell.items_per_second),
                        f"**{cost}** (cheapest)" if cell.cheapest else cost,
                        ratio if n else "",
                        format_verdict(cell),
                    ]
                )
                + " |"
            )
    lines += ["", "| software | " + " | ".join(_md(s.label) for s in comparison.sides) + " |"]
    lines.append("|---|" + "---|" * len(comparison.sides))
    for srow in comparison.software:
        name = f"**{_md(srow.label)}** (differs)" if srow.differs else _md(srow.label)
        values = [_md(v) if v is not None else MISSING for v in srow.values]
        lines.append(f"| {name} | " + " | ".join(values) + " |")
    notes = list(comparison.notes)
    for row in comparison.rows:
        notes += sorted({f"{row.id}: {c.environment}: {c.note}" for c in row.cells if c.note})
    if notes:
        lines += ["", *[f"- {_md(n)}" for n in notes]]
    return "\n".join(lines) + "\n"


__all__ = [
    "BASELINE",
    "CSV_COLUMNS",
    "CURRENCY",
    "FASTER",
    "MAX_ENVIRONMENTS",
    "MIN_ENVIRONMENTS",
    "NO_DIFFERENCE",
    "NotComparable",
    "SLOWER",
    "Cell",
    "HardwareComparison",
    "Row",
    "Side",
    "SoftwareRow",
    "compare_hardware",
    "cost_per_million",
    "format_latency",
    "format_verdict",
    "side_labels",
    "to_csv",
    "to_markdown",
    "verdict_of",
]
