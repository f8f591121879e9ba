"""The readable table printed at the end of `rnx bench`."""

from __future__ import annotations

import statistics

from rnx.formatting import (
    SPEED_OF_LIGHT_NOTE,
    format_ns,
    format_peaks,
    format_percent,
    format_ratio,
    format_speed_of_light,
)
from rnx.schema import Configuration, ResultsDocument, SpeedOfLight


def _row(c: Configuration) -> list[str]:
    median = spread = "-"
    if c.samples is not None and c.samples.ns:
        ns = c.samples.ns
        med = statistics.median(ns)
        median = format_ns(med)
        per_proc = [statistics.median(g) for g in c.samples.by_process()]
        if len(per_proc) > 1:
            spread = format_percent((max(per_proc) - min(per_proc)) / med, digits=1)
    base = "-"
    if c.base_samples is not None and c.base_samples.ns and c.samples is not None:
        ratio = statistics.median(c.samples.ns) / statistics.median(c.base_samples.ns)
        base = format_ratio(ratio)
    err = "-"
    if c.correctness is not None and c.correctness.max_rel_error is not None:
        err = f"{c.correctness.max_abs_error:.1e}/{c.correctness.max_rel_error:.1e}"
    build = c.build.compile_ns or c.build.engine_ns
    note = (c.reason or "").replace("\n", " ")
    if len(note) > 160:
        note = note[:157] + "..."
    if c.status == "ok":
        bits = []
        if build:
            bits.append(f"build {format_ns(build)}")
        if "provider" in c.details:
            bits.append(str(c.details["provider"]))
        if c.details.get("graph_breaks"):
            bits.append(f"{c.details['graph_breaks']} graph breaks")
        if "work_error" in c.details:
            bits.append("no SOL: " + str(c.details["work_error"])[:100])
        if "launch_overhead_ns" in c.details:
            bits.append(f"launch {format_ns(c.details['launch_overhead_ns'])}")
        note = ", ".join(bits)
    n = str(len(c.samples.ns)) if c.samples is not None else "-"
    return [
        c.id,
        c.status,
        median,
        spread,
        n,
        _sol(c.speed_of_light),
        base,
        err,
        note,
    ]


def _sol(sol: SpeedOfLight | None) -> str:
    if sol is None:
        return "-"
    return format_speed_of_light(sol.score, sol.bound, sol.beyond_roofline)


def format_table(doc: ResultsDocument) -> str:
    header = [
        "configuration",
        "status",
        "median",
        "proc spread",
        "n",
        "SOL",
        "head/base",
        "max abs/rel err",
        "notes",
    ]
    if doc.settings.mode != "paired":
        header.pop(6)
    rows = []
    for c in doc.configurations:
        row = _row(c)
        if doc.settings.mode != "paired":
            row.pop(6)
        rows.append(row)
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header[:-1])]
    lines = []
    for r in [header, *rows]:
        cells = [cell.ljust(w) for cell, w in zip(r[:-1], widths, strict=True)]
        line = "  ".join([*cells, r[-1]])
        lines.append(line.rstrip())
    return "\n".join(lines + run_notes(doc))


def run_notes(doc: ResultsDocument) -> list[str]:
    """What the reader must know about the run as a whole: shapes, a shared GPU, throttling."""
    notes = []
    if any(c.batch_size is None for c in doc.configurations):
        notes.append(
            "note: .../native configurations ran at the workload's own shapes: it has no batch "
            "dimension (no get_inputs(batch_size=...) keyword, no module-level batch_size) and "
            "no batch sizes were given"
        )
    shared = [c for c in doc.configurations if isinstance(c.details.get("contention"), dict)]
    if shared:
        first = str(shared[0].details["contention"].get("note", ""))
        notes.append(
            f"note: {first} ({len(shared)} configuration(s)); their timings are noisier, not "
            f"wrong, and were given more rounds where the time budget allowed"
        )
    notes.extend(speed_of_light_notes(doc))
    throttled = sum(
        len(c.details["gpu_telemetry"].get("throttled") or [])
        for c in doc.configurations
        if isinstance(c.details.get("gpu_telemetry"), dict)
    )
    if throttled:
        notes.append(
            f"note: {throttled} sample(s) were taken while the GPU ran below 75% of its default "
            f"SM clock (details.gpu_telemetry.throttled)"
        )
    return ["", *notes] if notes else []


def speed_of_light_notes(doc: ResultsDocument) -> list[str]:
    """Which peaks the SOL column is against, and any score beyond the roofline (a problem)."""
    scored = [c for c in doc.configurations if c.speed_of_light is not None]
    if not scored:
        return []
    first = scored[0].speed_of_light
    assert first is not None
    against = format_peaks(first.peak_source, first.peak_part)
    notes = [f"note: {SPEED_OF_LIGHT_NOTE}; peaks: {against}"]
    beyond = [c.id for c in scored if c.speed_of_light and c.speed_of_light.beyond_roofline]
    if beyond:
        notes.append(
            f"note: beyond the roofline, check the count and the timing: {', '.join(beyond)}"
        )
    return notes
