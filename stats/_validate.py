"""Input checks for the statistics, in one place, with messages that name the argument."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

MIN_RESAMPLES = 2000


def as_groups(value: Any, name: str) -> list[np.ndarray]:
    """Turn one side (times, or a list of time sequences) into a list of positive float arrays."""
    plain = _plain_groups(value)
    if plain is not None:
        return plain
    if isinstance(value, (str, bytes)) or not isinstance(value, (Sequence, np.ndarray)):
        raise TypeError(
            f"{name} must be a sequence of sample times or a list of such sequences, "
            f"got {type(value).__name__}"
        )
    if len(value) == 0:
        raise ValueError(f"{name} has no samples")
    nested = [
        isinstance(v, (Sequence, np.ndarray)) and not isinstance(v, (str, bytes)) for v in value
    ]
    if any(nested) and not all(nested):
        raise ValueError(
            f"{name} mixes numbers and sequences; give either times or a list of sequences"
        )
    raw_groups = list(value) if all(nested) else [value]
    groups = []
    for i, g in enumerate(raw_groups):
        label = f"{name}[{i}]" if all(nested) else name
        try:
            arr = np.asarray(g, dtype=np.float64)
        except (TypeError, ValueError):
            raise TypeError(f"{label} must contain only numbers (sample times)") from None
        if arr.ndim != 1:
            raise ValueError(f"{label} must be one-dimensional, got shape {arr.shape}")
        if arr.size == 0:
            raise ValueError(f"{label} is empty; drop it or give it samples")
        groups.append(arr)
    # One check over all of them (the server re-gates every upload); the group is named after.
    flat = groups[0] if len(groups) == 1 else np.concatenate(groups)
    if not (np.isfinite(flat).all() and (flat > 0).all()):
        for i, arr in enumerate(groups):
            label = f"{name}[{i}]" if all(nested) else name
            if not np.isfinite(arr).all():
                raise ValueError(f"{label} contains NaN or infinity; sample times must be finite")
            if (arr <= 0).any():
                raise ValueError(f"{label} contains a time <= 0; sample times must be positive")
    return groups


def _plain_groups(value: Any) -> list[np.ndarray] | None:
    """as_groups of the server's usual input, fast: a list of non-empty lists (or tuples) of
    positive finite numbers (worker processes' times). None for anything else, which the
    general checks take (and name what is wrong with it)."""
    if type(value) is not list or not value:
        return None
    n = len(value[0]) if type(value[0]) in (list, tuple) else 0
    for v in value:
        if type(v) not in (list, tuple) or not v:
            return None
        if len(v) != n:
            n = -1
    try:
        if n > 0:  # all the same length: one conversion, checked at once; the groups its rows
            table = np.array(value, dtype=np.float64)
            if table.ndim != 2 or not (np.isfinite(table).all() and (table > 0).all()):
                return None
            return list(table)
        groups = [np.array(v, dtype=np.float64) for v in value]
    except (TypeError, ValueError):
        return None
    if any(g.ndim != 1 for g in groups):
        return None
    flat = groups[0] if len(groups) == 1 else np.concatenate(groups)
    if not (np.isfinite(flat).all() and (flat > 0).all()):
        return None
    return groups


# A group of times as plain_sides takes it: rnx.schema keeps a parsed document's groups as
# arrays. (A 0-d array has no len: TypeError below; one of more dimensions fails the shape check.)
_ROWS = (list, tuple, np.ndarray)


def plain_sides(sides: list[Any]) -> list[list[np.ndarray]] | None:
    """as_groups of many sides at once, for the server's usual input: every side a list of as
    many lists (tuples, arrays) of as many positive finite numbers. One conversion and one check for
    all of them (each side on its own cost two numpy checks per side, 96 of them for 48
    configurations); the groups are the same rows _plain_groups gives. None for anything else,
    which each side's own checks take."""
    first = sides[0] if sides else None
    if type(first) is not list or not first or type(first[0]) not in _ROWS:
        return None
    try:
        groups, n = len(first), len(first[0])
        if n == 0:
            return None
        for side in sides:
            if type(side) is not list or len(side) != groups:
                return None
            for v in side:
                if type(v) not in _ROWS or len(v) != n:
                    return None
    except TypeError:
        return None
    try:
        table = np.array(sides, dtype=np.float64)
    except (TypeError, ValueError):
        return None
    if table.ndim != 3 or not (np.isfinite(table).all() and (table > 0).all()):
        return None
    return [list(t) for t in table]


def as_run_labels(value: Any, groups: int, name: str) -> np.ndarray:
    """One integer run label per base group."""
    if isinstance(value, (str, bytes)) or not isinstance(value, (Sequence, np.ndarray)):
        raise TypeError(f"{name} must be a sequence of run labels (integers), one per base group")
    try:
        labels = np.asarray(value, dtype=np.int64)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must contain only integers (run labels)") from None
    if labels.ndim != 1 or labels.size != groups:
        raise ValueError(
            f"{name} must give one run label per base group: {groups} groups, "
            f"got {labels.size} labels"
        )
    return labels


def check_fraction(value: float, name: str, *, low: float, high: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)):
        raise TypeError(f"{name} must be a number, got {type(value).__name__}")
    v = float(value)
    if not (math.isfinite(v) and low < v < high):
        raise ValueError(f"{name} must lie strictly between {low:g} and {high:g}, got {value!r}")
    return v


def check_resamples(value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"resamples must be an integer, got {type(value).__name__}")
    if value < MIN_RESAMPLES:
        raise ValueError(f"resamples must be at least {MIN_RESAMPLES}, got {value}")
    return int(value)


def check_paired(base: list[np.ndarray], head: list[np.ndarray]) -> None:
    base_shape = [len(g) for g in base]
    head_shape = [len(g) for g in head]
    if base_shape != head_shape:
        raise ValueError(
            "paired=True needs base and head of the same shape (one head time per base time, "
            f"round by round); got base {_shape(base_shape)} and head {_shape(head_shape)}"
        )


def _shape(lengths: list[int]) -> str:
    if len(lengths) == 1:
        return f"{lengths[0]} samples"
    return f"{len(lengths)} groups of {lengths} samples"


def as_generator(seed: Any) -> np.random.Generator:
    if isinstance(seed, np.random.Generator):
        return seed
    if seed is None or (isinstance(seed, (int, np.integer)) and not isinstance(seed, bool)):
        return np.random.default_rng(seed)
    raise TypeError(
        f"seed must be None, an integer or a numpy Generator, got {type(seed).__name__}"
    )
