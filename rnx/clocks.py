"""A slowdown the GPU's clock explains: the head was measured at a lower SM clock than its base.

The harness records the SM clock of every GPU sample (configuration details `gpu_telemetry`,
and `base_gpu_telemetry` for a paired run's base). A kernel's time scales at most inversely
with the SM clock, so when the head ran at a clock lower by a factor the slowdown does not
exceed, the data cannot tell the code from the clock: the configuration is reported as
undecided with the clocks, never BLOCK. Values come from stored documents: anything malformed
reads as "no clock", never as an error.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from rnx.schema import Configuration, ResultsDocument

# A median clock lower by more than this is a clock change, not reading noise.
CLOCK_DROP = 0.05


def median_clock(details: Mapping[str, Any], key: str = "gpu_telemetry") -> float | None:
    """The median SM clock (MHz) of a configuration's samples, if recorded."""
    telemetry = details.get(key)
    if not isinstance(telemetry, Mapping):
        return None
    clocks = telemetry.get("sm_mhz")
    if not isinstance(clocks, list):
        return None
    values = [
        float(v)
        for v in clocks
        if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0
    ]
    return statistics.median(values) if values else None


def throttled_share(details: Mapping[str, Any], key: str = "gpu_telemetry") -> float | None:
    telemetry = details.get(key)
    if not isinstance(telemetry, Mapping):
        return None
    clocks, throttled = telemetry.get("sm_mhz"), telemetry.get("throttled")
    if not isinstance(clocks, list) or not clocks or not isinstance(throttled, list):
        return None
    return min(1.0, len(throttled) / len(clocks))


def _base_clock(
    cfg: Configuration, baselines: Sequence[ResultsDocument], paired: bool
) -> float | None:
    if paired:
        return median_clock(cfg.details, "base_gpu_telemetry")
    found = [
        median_clock(other.details)
        for doc in baselines
        for other in doc.configurations
        if other.id == cfg.id and other.status == "ok"
    ]
    clocks = [c for c in found if c is not None]
    return statistics.median(clocks) if clocks else None


def _why(cfg: Configuration, head_mhz: float, base_mhz: float, comparison: Any) -> str:
    share = throttled_share(cfg.details)
    throttled = "" if not share else f"; {share:.0%} of the head's samples ran throttled"
    return (
        f"explained by the GPU clock, not the code: the head ran at {head_mhz:.0f} MHz against "
        f"{base_mhz:.0f} MHz for the base ({base_mhz / head_mhz:.2f}x){throttled}, and the "
        f"slowdown of {comparison.ratio:.2f}x (interval {comparison.low:.2f}-"
        f"{comparison.high:.2f}) is within what that explains. Re-run on an idle, cool GPU"
    )


def explained_by_clock(
    head: ResultsDocument,
    baselines: Sequence[ResultsDocument],
    comparisons: Mapping[str, Any],
    *,
    rope: float,
) -> dict[str, str]:
    """{configuration id: reason} for each credible slowdown a lower head clock explains.

    `comparisons` are stats.Comparison by id (verdict, ratio, low, high)."""
    paired = head.settings.mode == "paired"
    explained: dict[str, str] = {}
    for cfg in head.configurations:
        c = comparisons.get(cfg.id)
        if c is None or c.verdict != "slower":
            continue
        head_mhz = median_clock(cfg.details)
        base_mhz = _base_clock(cfg, baselines, paired)
        if head_mhz is None or base_mhz is None or base_mhz < head_mhz * (1 + CLOCK_DROP):
            continue
        if math.isfinite(c.low) and c.low <= (base_mhz / head_mhz) * (1 + rope):
            explained[cfg.id] = _why(cfg, head_mhz, base_mhz, c)
    return explained
