"""Annotations: each configuration that needs a look, as an error or a warning on the kernel."""

from __future__ import annotations

import re
from pathlib import Path

from action.workflow import Workflow
from rnx.formatting import format_percent, format_ratio_interval
from rnx.schema import ConfigComparison
from rnx_github.comment import PartResult

BROKEN_STATUSES = ("diverged", "error")


def describe(c: ConfigComparison, *, block_threshold: float | None = None) -> str:
    """One sentence about one configuration, for annotations and reasons."""
    if c.verdict == "broken" or c.status in ("diverged", "error"):
        return f"{c.id} is broken ({c.status}): {c.reason or 'no reason given'}"
    if c.ratio is not None and c.verdict in ("slower", "faster", "equivalent", "undecided"):
        ratio = format_ratio_interval(c.ratio, c.low, c.high)
        beyond = (
            f", beyond the {format_percent(block_threshold)} block threshold"
            if block_threshold is not None and c.low is not None and c.low > 1 + block_threshold
            else ""
        )
        return f"{c.id}: {c.verdict}, {ratio} the base time{beyond}"
    return f"{c.id}: {c.verdict}" + (f" ({c.reason})" if c.reason else "")


def _line_of_model(path: Path) -> int | None:
    """Annotations point at the kernel's class, where a reviewer will look first."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    for pattern in (r"^class ModelNew\b", r"^class Model\b"):
        m = re.search(pattern, text, re.MULTILINE)
        if m:
            return text.count("\n", 0, m.start()) + 1
    return None


def annotate(wf: Workflow, part: PartResult, *, root: Path, block_threshold: float) -> None:
    line = _line_of_model(root / part.workload)
    blocking = part.tier == "BLOCK" and part.mode == "enforce"
    for c in part.comparisons:
        credible_slowdown = c.verdict == "slower"
        broken = c.verdict == "broken" or c.status in BROKEN_STATUSES
        if not (broken or credible_slowdown or c.verdict == "undecided"):
            continue
        text = describe(c, block_threshold=block_threshold)
        severe = broken or (c.low is not None and c.low > 1 + block_threshold)
        title = f"rnx-benchmark {part.tier}: {part.workload}"
        if blocking and severe:
            wf.error(text, file=part.workload, line=line, title=title)
        else:
            wf.warning(text, file=part.workload, line=line, title=title)
    if part.tier == "BLOCK" and part.mode == "soft-fail":
        wf.warning(
            f"{part.workload} would BLOCK (mode soft-fail: not failing the job): "
            + "; ".join(part.reasons[:3]),
            file=part.workload,
            line=line,
        )
