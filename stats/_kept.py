"""Base sides compare_many has seen, kept for the next comparison against the same ones.

The server re-gates every upload of a workload against the same baseline runs, parsed once per
server process (gate_server/stored_documents.py), with each process's times an array that can
never change (frozen_groups: a view of bytes, which numpy will not make writable). A base side
made of such arrays is the same side for as long as they are the same objects, so what
compare_many works out from the side alone (its checks, its median, each process's location) is
kept under their identities. An entry holds its arrays, so while it is kept no other array can
take one of their ids.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import numpy as np

# Base sides kept (one per configuration and baseline set): a 48-configuration workload
# against its 6 baseline runs takes 48. An entry is its groups' references and a few numbers.
KEEP = 4096
_FLOAT64 = np.dtype(np.float64)


@dataclass(frozen=True)
class BaseSide:
    """One configuration's base side, checked, and what comes from it alone."""

    groups: list[np.ndarray]
    median: float  # the plain median of all its samples
    locations: np.ndarray  # each group's location of its log-times (bootstrap.LOW)


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


class Kept:
    """A bounded store of BaseSides by key, the least recently used dropped first; safe to
    share between threads (the server's CI baseline reads run beside its uploads)."""

    def __init__(self, size: int = KEEP) -> None:
        self.size = size
        self._sides: OrderedDict[tuple[int, ...], BaseSide] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, k: tuple[int, ...] | None) -> BaseSide | None:
        if k is None:
            return None
        with self._lock:
            side = self._sides.get(k)
            if side is not None:
                self._sides.move_to_end(k)
            return side

    def put(self, k: tuple[int, ...], side: BaseSide) -> None:
        with self._lock:
            self._sides[k] = side
            self._sides.move_to_end(k)
            while len(self._sides) > self.size:
                self._sides.popitem(last=False)

    def __len__(self) -> int:
        return len(self._sides)
