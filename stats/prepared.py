"""A prepared baseline: what compare_many works out from the base sides alone, made once.

The server re-gates every upload of a workload against the same baseline runs. What depends on
those runs alone (each side's checks, its median, each process's location, and the run-level
model's work on them: stats/runlevel.py Baseline) is the same for every head compared with
them, so the caller makes it once per baseline set (prepare_baseline) and passes it to
compare_many (baseline=...). Nothing is kept behind the caller's back: the object is the cache,
and it lives as long as the caller keeps it.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from stats import bootstrap, runlevel
from stats._validate import as_groups, as_run_labels, plain_sides


@dataclass(frozen=True)
class BaseSide:
    """One configuration's base side, checked, and what comes from it alone."""

    groups: list[np.ndarray]
    median: float  # the plain median of all its samples
    locations: np.ndarray  # each group's location of its log-times (bootstrap.LOW)


def medians(sides: list[list[np.ndarray]]) -> np.ndarray:
    """The plain median of each side's samples; the sides with as many samples are done in one
    partition of their rows (the same order statistics as one side at a time)."""
    flats = [groups[0] if len(groups) == 1 else np.concatenate(groups) for groups in sides]
    result = np.empty(len(flats))
    by_size: dict[int, list[int]] = {}
    for i, flat in enumerate(flats):
        by_size.setdefault(flat.size, []).append(i)
    for n, rows in by_size.items():
        part = np.partition(np.stack([flats[i] for i in rows]), [(n - 1) // 2, n // 2], axis=1)
        result[rows] = (part[:, (n - 1) // 2] + part[:, n // 2]) / 2
    return result


def base_sides(bases: list[list[np.ndarray]]) -> list[BaseSide]:
    """Each checked base side with its median and its groups' locations, worked out together."""
    locations = bootstrap.group_locations([g for b in bases for g in b], bootstrap.LOW, log=True)
    # Shared by every comparison against the side: read-only, so none can change another's.
    locations.setflags(write=False)
    split = np.split(locations, np.cumsum([len(b) for b in bases])[:-1])
    return [
        BaseSide(groups=b, median=float(m), locations=locs)
        for b, locs, m in zip(bases, split, medians(bases), strict=True)
    ]


class PreparedBaseline:
    """Base sides checked and worked out once, for every head compared with them.

    bases: one base side per configuration, as compare_many takes them; base_runs: their run
    labels (one per group), as compare_many takes them, or None. compare_many(pairs,
    baseline=prepared) requires each pair's base to be the very object given here, in the same
    order, so a prepared baseline cannot be used with other sides by mistake."""

    def __init__(self, bases: Sequence[Any], base_runs: Sequence[Sequence[int]] | None = None):
        if isinstance(bases, (str, bytes)) or not isinstance(bases, Sequence) or not bases:
            raise ValueError("bases must be a non-empty sequence of base sides")
        self.bases = tuple(bases)
        checked = plain_sides(list(bases)) or [
            as_groups(b, f"bases[{i}]") for i, b in enumerate(bases)
        ]
        self.sides = base_sides(checked)
        self.labels: list[np.ndarray] | None = None
        if base_runs is not None:
            if (
                isinstance(base_runs, (str, bytes))
                or not isinstance(base_runs, Sequence)
                or len(base_runs) != len(bases)
            ):
                raise ValueError("base_runs must give one sequence of run labels per base side")
            self.labels = [
                as_run_labels(base_runs[i], len(checked[i]), f"base_runs[{i}]")
                for i in range(len(bases))
            ]
        # The run-level model's work on these runs, by the prior it was made with (a caller
        # passes one; the lock keeps two threads from making it twice).
        self._models: dict[float, runlevel.Baseline] = {}
        self._lock = threading.Lock()

    def model(self, run_shift_sd: float) -> runlevel.Baseline:
        """The run-level model's work on these baseline runs (made on first use)."""
        if self.labels is None:
            raise ValueError("this baseline was prepared without base_runs")
        with self._lock:
            found = self._models.get(run_shift_sd)
            if found is None:
                found = runlevel.baseline(
                    [s.locations for s in self.sides], self.labels, run_shift_sd=run_shift_sd
                )
                self._models[run_shift_sd] = found
        return found

    def matches(self, pairs: Sequence[Any]) -> bool:
        """Each pair's base is the side this was prepared from, in order (by identity)."""
        return len(pairs) == len(self.bases) and all(
            isinstance(p, (tuple, list)) and len(p) == 2 and p[0] is b
            for p, b in zip(pairs, self.bases, strict=True)
        )


def prepare_baseline(
    bases: Sequence[Any], base_runs: Sequence[Sequence[int]] | None = None
) -> PreparedBaseline:
    """A prepared baseline for compare_many(pairs, baseline=...): see PreparedBaseline."""
    return PreparedBaseline(bases, base_runs)
