"""Base sides compare_many has seen, kept for the next comparison against the same ones.

The server re-gates every upload of a workload against the same baseline runs, parsed once per
server process (gate_server/domain/stored_documents.py), with each process's times an array that can
never change (frozen_groups: a view of bytes, which numpy will not make writable). A base side
made of such arrays is the same side for as long as they are the same objects, so what
compare_many works out from the side alone (its checks, its median, each process's location) is
kept under their identities. An entry holds its arrays, so while it is kept no other array can
take one of their ids.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import numpy as np

# Base sides kept (one per configuration and baseline set): a 48-configuration workload
# against its 6 baseline runs takes 48. An entry is its groups' references and a few numbers.
KEEP_SIDES = 4096
# Baseline sets kept (one per workload and its baseline runs), each with the run-level model's
# work on them (stats/runlevel.py Baseline: a few arrays of the sides' size).
KEEP_BASELINES = 64
_FLOAT64 = np.dtype(np.float64)
T = TypeVar("T")


@dataclass(frozen=True)
class BaseSide:
    """One configuration's base side, checked, and what comes from it alone."""

    groups: list[np.ndarray]
    median: float  # the plain median of all its samples
    locations: np.ndarray  # each group's location of its log-times (bootstrap.LOW)
    kept: bool  # its groups cannot change, and it is kept by their identities


def key(side: Any) -> tuple[int, ...] | None:
    """The identities of a side's groups if every one is an array that cannot change (float64,
    one-dimensional, a view of bytes); None otherwise (such a side is never kept)."""
    if type(side) is not list or not side:
        return None
    for g in side:
        if type(g) is not np.ndarray or type(g.base) is not bytes:
            return None
        if g.dtype is not _FLOAT64 or g.ndim != 1:  # (native float64 is one dtype object)
            return None
    return tuple(map(id, side))


class Kept(Generic[T]):
    """A bounded store by key, the least recently used dropped first; safe to share between
    threads (the server's CI baseline reads run beside its uploads)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._kept: OrderedDict[Hashable, T] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, k: Hashable | None) -> T | None:
        if k is None:
            return None
        with self._lock:
            value = self._kept.get(k)
            if value is not None:
                self._kept.move_to_end(k)
            return value

    def put(self, k: Hashable, value: T) -> None:
        with self._lock:
            self._kept[k] = value
            self._kept.move_to_end(k)
            while len(self._kept) > self.size:
                self._kept.popitem(last=False)

    def __len__(self) -> int:
        return len(self._kept)
