"""What each page shows, built from stored rows: plain data in, plain data (and SVG) out."""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from urllib.parse import quote

from markupsafe import Markup

from gate_server.dashboard.charts import (
    ChangeMark,
    HistoryPoint,
    distribution_svg,
    history_svg,
    median_interval,
    memory_svg,
)
from gate_server.numbers import whole_number
from rnx.environments import EnvironmentLabel, stored_environment_label
from rnx.formatting import (
    format_headline,
    format_ns,
    format_peaks,
    format_ratio_interval,
    format_speed_of_light,
)
from rnx.schema import config_id as _make_config_id

GITHUB = "https://github.com"
_RUNTIME_ORDER = {"pytorch_eager": 0, "torch_compile": 1, "onnxruntime": 2, "tensorrt": 3}
_DTYPE_ORDER = {"float32": 0, "tf32": 1, "float16": 2, "bfloat16": 3, "float64": 4}


def commit_url(repository: str, sha: str) -> str:
    return f"{GITHUB}/{quote(repository, safe='/')}/commit/{quote(sha, safe='')}"


def pr_url(repository: str, pr_number: int) -> str:
    return f"{GITHUB}/{quote(repository, safe='/')}/pull/{int(pr_number)}"


def branch_url(repository: str, branch: str) -> str:
    return f"{GITHUB}/{quote(repository, safe='/')}/tree/{quote(branch, safe='/')}"


def config_sort_key(config_id: str) -> tuple[int, int, int, str]:
    runtime, _, rest = config_id.partition("/")
    dtype, _, bs = rest.partition("/")
    batch = (whole_number(bs[2:]) or 0) if bs.startswith("bs") else 0
    return (_RUNTIME_ORDER.get(runtime, 9), _DTYPE_ORDER.get(dtype, 9), batch, config_id)


def _config_id(c: dict[str, Any]) -> str:
    return _make_config_id(c["runtime"], c["dtype"], c["batch_size"])


def short_reasons(reasons: Sequence[str], limit: int = 140) -> str:
    """The first reason without its statistics in parentheses, and how many more there are."""
    if not reasons:
        return ""
    first = reasons[0].split(" (", 1)[0]
    if len(first) > limit:
        first = first[: limit - 1] + "…"
    more = len(reasons) - 1
    return first if more == 0 else f"{first}; and {more} more"


# ---- history


@dataclass(frozen=True)
class RunSummary:
    """Per configuration: (median, low, high) of a run's samples and its peak memory in bytes
    (where the run recorded one); its environment details (flattened to dotted keys, without
    the key itself) and what to call its environment."""

    medians: dict[str, tuple[float, float, float]]
    environment: dict[str, str]
    label: EnvironmentLabel
    peak_bytes: dict[str, int] = field(default_factory=dict)


def summarize_document(document: bytes) -> RunSummary:
    # Plain json, not the pydantic model: the server validated the document on upload, and a
    # history page reads hundreds of them.
    doc = json.loads(document)
    medians: dict[str, tuple[float, float, float]] = {}
    peaks: dict[str, int] = {}
    for c in doc.get("configurations", []):
        samples = (c.get("samples") or {}).get("ns") or []
        if c.get("status") == "ok" and samples:
            medians[_config_id(c)] = median_interval(samples)
            peak = (c.get("memory") or {}).get("peak_allocated_bytes")
            if isinstance(peak, int) and not isinstance(peak, bool):
                peaks[_config_id(c)] = peak
    raw = doc.get("environment")
    raw = raw if isinstance(raw, dict) else {}
    env = {k: v for k, v in raw.items() if k != "key"}
    label = stored_environment_label(raw, key=str(raw.get("key")))
    return RunSummary(medians, flatten(env), label, peaks)


@dataclass(frozen=True)
class EnvironmentLabels:
    """What to call the environment of each run a page lists, by run id (from the runs' own
    documents, rnx.environments); a run whose document is not at hand reads as its key."""

    by_run: dict[str, EnvironmentLabel]

    def of(self, run_id: str, key: str) -> EnvironmentLabel:
        found = self.by_run.get(run_id)
        return found if found is not None and found.key == key else EnvironmentLabel(key=key)


# What a summary takes in memory, from tracemalloc (tests/dashboard/test_summary_cache.py): a
# dict entry of a configuration id and three floats, one of a flattened environment detail, and
# the objects around them. An estimate above the truth keeps the bound a bound.
SUMMARY_BYTES = 6144
BYTES_PER_MEDIAN = 1024
BYTES_PER_DETAIL = 256


def summary_size(summary: RunSummary) -> int:
    """Bytes a summary is counted as: its strings' lengths plus a fixed cost per entry."""
    # A configuration's peak shares its id string with its median: one more dict entry.
    medians = sum(BYTES_PER_MEDIAN + len(k) for k in summary.medians) + BYTES_PER_DETAIL * len(
        summary.peak_bytes
    )
    details = sum(BYTES_PER_DETAIL + len(k) + len(v) for k, v in summary.environment.items())
    return SUMMARY_BYTES + medians + details


class SummaryCache:
    """Stored runs never change, so each document is read once per process, not per page view.
    Bounded by the bytes its summaries take (RNX_SUMMARY_CACHE_MB), not by their number: a run
    of 48 configurations costs about 8 times one of one."""

    def __init__(self, max_bytes: int = 64 << 20):
        self._entries: OrderedDict[str, tuple[RunSummary, int]] = OrderedDict()
        self._max = max_bytes
        self.bytes = 0

    def get(self, run_id: str) -> RunSummary | None:
        found = self._entries.get(run_id)
        if found is None:
            return None
        self._entries.move_to_end(run_id)
        return found[0]

    def put(self, run_id: str, summary: RunSummary) -> None:
        size = summary_size(summary)
        old = self._entries.pop(run_id, None)
        if old is not None:
            self.bytes -= old[1]
        if size > self._max:  # larger than the whole bound: read again when needed
            return
        self._entries[run_id] = (summary, size)
        self.bytes += size
        while self.bytes > self._max:
            _, (_, dropped) = self._entries.popitem(last=False)
            self.bytes -= dropped


@dataclass(frozen=True)
class HistoryRun:
    """One run of the history window, oldest first when handed to build_history."""

    run_id: str
    sha: str
    created_at: datetime
    environment: str
    tier: str
    is_baseline: bool
    accepted_reason: str | None
    ratios: dict[str, float]  # config id -> head/base ratio from the run's verdict
    summary: RunSummary


@dataclass
class ConfigHistory:
    config_id: str
    points: list[HistoryPoint]
    svg: Markup = field(default_factory=lambda: Markup(""))
    memory_svg: Markup | None = None  # None: no run in the window recorded memory

    @property
    def latest(self) -> HistoryPoint:
        return self.points[-1]


def ratios_from_answer(answer: dict[str, Any]) -> dict[str, float]:
    out: dict[str, float] = {}
    for c in answer.get("comparisons") or []:
        if isinstance(c, dict) and isinstance(c.get("ratio"), (int, float)) and c.get("id"):
            out[str(c["id"])] = float(c["ratio"])
    return out


def _events(
    previous: HistoryRun | None, run: HistoryRun
) -> tuple[list[dict[str, Any]], str | None]:
    """What the history marks at `run`, and the note of its changed environment details."""
    events: list[dict[str, Any]] = []
    environment_note = None
    if previous is not None and previous.environment != run.environment:
        text = f"environment {previous.summary.label.text} → {run.summary.label.text}"
        events.append({"kind": "environment", "run": run, "text": text})
    if previous is not None and previous.environment == run.environment:
        changed = changed_fields(previous.summary.environment, run.summary.environment)
        if changed:
            environment_note = "environment details changed: " + ", ".join(changed)
            text = f"{run.summary.label.title}: {environment_note}"
            events.append({"kind": "environment-details", "run": run, "text": text})
    if run.accepted_reason is not None:
        text = f"accepted as the new baseline: {run.accepted_reason}"
        events.append({"kind": "accepted", "run": run, "text": text})
    elif run.tier == "BLOCK":
        text = "BLOCK on the baseline branch: not used as a baseline"
        events.append({"kind": "block", "run": run, "text": text})
    return events, environment_note


def build_history(
    history: Sequence[HistoryRun],
    changes: Mapping[str, Sequence[ChangeMark]] | None = None,
) -> tuple[list[ConfigHistory], list[dict[str, Any]]]:
    """One chart per configuration over the window, with its change points (`changes`, by
    configuration id) marked, and the list of marked events."""
    changes = changes or {}
    by_after: dict[str, list[tuple[str, ChangeMark]]] = {}
    for cid in sorted(changes, key=config_sort_key):
        for m in changes[cid]:
            by_after.setdefault(m.after_run_id, []).append((cid, m))
    series: dict[str, list[HistoryPoint]] = {}
    events: list[dict[str, Any]] = []
    previous: HistoryRun | None = None
    for run in history:
        marked, environment_note = _events(previous, run)
        events += marked
        for cid, mark in by_after.get(run.run_id, []):
            ratio = format_ratio_interval(mark.ratio, mark.low, mark.high)
            early = " (early: a short history, weaker evidence)" if mark.early else ""
            kind = "drift" if mark.drift else "change point"
            text = f"{kind} in {cid}: {ratio}, {mark.status}{early}"
            events.append({"kind": "change-point", "run": run, "text": text})
        for config_id, (med, low, high) in run.summary.medians.items():
            series.setdefault(config_id, []).append(
                HistoryPoint(
                    run_id=run.run_id,
                    sha=run.sha,
                    created_at=run.created_at,
                    median_ns=med,
                    low_ns=low,
                    high_ns=high,
                    environment=run.environment,
                    environment_label=run.summary.label.text,
                    tier=run.tier,
                    is_baseline=run.is_baseline,
                    ratio=run.ratios.get(config_id),
                    accepted_reason=run.accepted_reason,
                    environment_note=environment_note,
                    peak_bytes=run.summary.peak_bytes.get(config_id),
                )
            )
        previous = run
    charts = [
        ConfigHistory(
            cid,
            pts,
            history_svg(
                pts, label=f"median time of {cid} per commit", changes=changes.get(cid, ())
            ),
            memory_svg(pts, label=f"peak memory of {cid} per commit"),
        )
        for cid, pts in sorted(series.items(), key=lambda kv: config_sort_key(kv[0]))
    ]
    return charts, list(reversed(events))


# ---- run page


def samples_by_config(documents: Iterable[dict[str, Any]], *, base: bool) -> dict[str, list[int]]:
    """Samples per configuration pooled over documents (base=True: a paired run's base side)."""
    out: dict[str, list[int]] = {}
    for doc in documents:
        for c in doc.get("configurations", []):
            block = c.get("base_samples" if base else "samples") or {}
            if block.get("ns"):
                out.setdefault(_config_id(c), []).extend(block["ns"])
    return out


def distributions(
    head_doc: dict[str, Any], base_docs: Sequence[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Per configuration: the base and head samples side by side on one axis."""
    head = samples_by_config([head_doc], base=False)
    paired = samples_by_config([head_doc], base=True)
    base = paired if paired else samples_by_config(base_docs, base=False)
    out = []
    for cid in sorted(set(head) | set(base), key=config_sort_key):
        out.append(
            {
                "id": cid,
                "base_n": len(base.get(cid, [])),
                "head_n": len(head.get(cid, [])),
                "svg": distribution_svg(
                    base.get(cid), head.get(cid), label=f"samples of {cid}: base and head"
                ),
            }
        )
    return out


def flatten(value: Any, prefix: str = "") -> dict[str, str]:
    """Nested environment details as dotted keys, so two environments compare line by line."""
    if isinstance(value, dict):
        out: dict[str, str] = {}
        for k in sorted(value):
            out.update(flatten(value[k], f"{prefix}.{k}" if prefix else str(k)))
        return out
    if isinstance(value, list):
        return {prefix: ", ".join(str(v) for v in value)}
    return {prefix: "" if value is None else str(value)}


def changed_fields(before: dict[str, str], after: dict[str, str], limit: int = 4) -> list[str]:
    """'field: old → new' for what differs between two flattened environments (a few)."""
    keys = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
    out = [f"{k}: {before.get(k, '–')} → {after.get(k, '–')}" for k in keys[:limit]]
    if len(keys) > limit:
        out.append(f"and {len(keys) - limit} more")
    return out


def run_headline(run: Any) -> str:
    """The run's tier as its headline reads on every surface (rnx.formatting.format_headline):
    a PASS or WARN that could not have seen a block-sized slowdown says so. An accepted run is
    the new normal and a stored answer from before the gate said it has nothing to add; a
    stored value that is not a number is left out, never a failed page."""
    found = run.answer.get("inconclusive")
    resolution = found.get("resolution") if isinstance(found, dict) else None
    if run.accepted_at is not None or not isinstance(resolution, (int, float)):
        return str(run.tier)
    return format_headline(run.tier, float(resolution))


def environment_rows(
    head_env: dict[str, Any], base_env: dict[str, Any] | None
) -> list[dict[str, Any]]:
    """The run's environment, each line with the baseline's value and whether they differ."""
    head = flatten(head_env)
    base = flatten(base_env) if base_env is not None else None
    rows = []
    for key in sorted(set(head) | set(base or {}), key=lambda k: (k != "key", k != "name", k)):
        h = head.get(key)
        b = None if base is None else base.get(key)
        rows.append({"key": key, "head": h, "base": b, "differs": base is not None and h != b})
    return rows


def correctness_rows(doc: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for c in doc.get("configurations", []):
        corr = c.get("correctness")
        rows.append(
            {
                "id": _config_id(c),
                "status": c.get("status"),
                "reason": c.get("reason"),
                "correctness": corr,
            }
        )
    rows.sort(key=lambda r: config_sort_key(r["id"]))
    return rows


@dataclass(frozen=True)
class SpeedOfLightCell:
    text: str  # "0.82 compute", "1.40 memory!"
    beyond: bool  # beyond the roofline: a measurement or counting problem
    title: str  # the roofline and measured times, for a pointer that hovers


def speed_of_light_cells(doc: dict[str, Any]) -> tuple[dict[str, SpeedOfLightCell], list[str]]:
    """The run's speed-of-light scores by configuration id (documents written before scores
    existed have none) and the peaks they are against, from the stored document."""
    cells: dict[str, SpeedOfLightCell] = {}
    peaks: set[str] = set()
    for c in doc.get("configurations", []):
        sol = c.get("speed_of_light")
        if not isinstance(sol, dict):
            continue
        beyond = bool(sol.get("beyond_roofline"))
        cells[_config_id(c)] = SpeedOfLightCell(
            text=format_speed_of_light(sol.get("score"), sol.get("bound"), beyond),
            beyond=beyond,
            title=(
                f"roofline {format_ns(sol['roofline_s'] * 1e9)}, "
                f"median {format_ns(sol['measured_s'] * 1e9)}"
            ),
        )
        peaks.add(format_peaks(str(sol.get("peak_source")), str(sol.get("peak_part"))))
    return cells, sorted(peaks)
