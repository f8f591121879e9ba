"""Memory as a gated dimension: a head's peak memory and kernel launches against the baseline's.

Memory is nearly deterministic (the same calls allocate the same tensors), so it needs no
bootstrap: a peak that grew beyond `gate.memory-threshold` (default 10%) WARNs, beyond
`gate.memory-block-threshold` (default off) BLOCKs. A growth under MEMORY_FLOOR_BYTES never
counts: a few kilobytes more is an allocator's rounding, not a regression. Kernel launches per
call are as deterministic, and more of them is the commonest cause of a small-kernel
slowdown: a growth of at least one launch per call WARNs.
"""

from __future__ import annotations

from rnx.config import GateSettings
from rnx.formatting import format_percent
from rnx.schema import Memory, MemoryChange, Profile

MEMORY_FLOOR_BYTES = 64 * 1024
LAUNCH_GROWTH = 1.0
_ORDER = {"PASS": 0, "WARN": 1, "BLOCK": 2}


def format_bytes(n: float) -> str:
    """1.50 MiB, 96.0 KiB, 512 B: three significant digits in binary units."""
    sign = "-" if n < 0 else ""
    n = abs(n)
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{sign}{n / size:.3g} {unit}"
    return f"{sign}{n:.0f} B"


def worse(a: str, b: str) -> str:
    return a if _ORDER[a] >= _ORDER[b] else b


def memory_change(
    cid: str,
    base: Memory | None,
    head: Memory | None,
    base_profile: Profile | None,
    head_profile: Profile | None,
    gate: GateSettings,
) -> tuple[MemoryChange | None, list[str]]:
    """(the change, the reasons it gives the gate); None where the sides cannot be compared
    (either lacks the figures, or they were measured on different kinds of device)."""
    if base is None or head is None or base.device != head.device:
        return None, []
    b, h = base.peak_allocated_bytes, head.peak_allocated_bytes
    growth = (h - b) / b if b > 0 else None
    tier, reasons = "PASS", []
    grew = h - b >= MEMORY_FLOOR_BYTES
    for level, threshold, key in (
        ("BLOCK", gate.memory_block_threshold, "gate.memory-block-threshold"),
        ("WARN", gate.memory_threshold, "gate.memory-threshold"),
    ):
        if threshold is None or not grew or (growth is not None and growth <= threshold):
            continue
        share = "from nothing" if growth is None else f"+{format_percent(growth)}"
        reasons.append(
            f"{cid} peak memory {format_bytes(b)} → {format_bytes(h)} "
            f"(+{format_bytes(h - b)}, {share}), beyond {key} {format_percent(threshold)}"
        )
        tier = level
        break
    base_launches = base_profile.launches_per_call if base_profile else None
    head_launches = head_profile.launches_per_call if head_profile else None
    if (
        base_launches is not None
        and head_launches is not None
        and head_launches - base_launches >= LAUNCH_GROWTH
    ):
        reasons.append(f"{cid} kernel launches per call {base_launches:.0f} → {head_launches:.0f}")
        tier = worse(tier, "WARN")
    change = MemoryChange(
        base_bytes=b,
        head_bytes=h,
        growth=growth,
        tier=tier,
        base_launches=base_launches,
        head_launches=head_launches,
    )
    return change, reasons


__all__ = ["LAUNCH_GROWTH", "MEMORY_FLOOR_BYTES", "format_bytes", "memory_change", "worse"]
