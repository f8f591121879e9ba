"""Where worker processes run: how many CPU threads each uses and which CPUs each is pinned to."""

from __future__ import annotations

import os

from rnx.config import HarnessSettings


def usable_cpus() -> list[int]:
    try:
        return sorted(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows
        return list(range(os.cpu_count() or 1))


def default_threads(harness: HarnessSettings) -> int:
    """harness.threads (kernalin.yml, else RNX_THREADS), else half the usable CPUs, at most 4:
    on a small shared runner, intra-op threads that spin while a neighbour holds the other core
    turn a 1 ms kernel into 20 ms (seen on 2 cores)."""
    if harness.threads is not None:
        return harness.threads
    return max(1, min(4, len(usable_cpus()) // 2))


def cpus_for_slot(slot: int, threads: int, *, pin: bool = True) -> list[int]:
    """The CPUs the worker processes of one slot run on: the same ones for every side.

    A process the scheduler moves between cores, or one that lands on a busier core than its
    partner, runs at its own speed; in paired mode that offset does not cancel in the per-round
    ratios (experiments/paired_pinning.py measures it; docs/harness.md has the figures). Slots
    take consecutive blocks of `threads` CPUs, wrapping around. Empty where the platform cannot
    pin (macOS, Windows), or with pin=False (harness.pin_cpus, RNX_PIN_CPUS=0: something else
    already places the processes): the worker then runs where the scheduler puts it."""
    if not pin or not hasattr(os, "sched_getaffinity"):
        return []
    usable = usable_cpus()
    start = slot * threads
    return [usable[(start + i) % len(usable)] for i in range(min(threads, len(usable)))]
