"""The numpy steps of a re-gate that were chosen between, side by side, and what a parsed
document keeps.

    .venv/bin/python -m experiments.regate_steps

Each pair gives the same numbers; which is faster depends on the CPU, so both are timed in one
run (timeit, best of 9) on 8 and 48 configurations:
- the quantiles of 2,000 draws per configuration: one sort of every row (stats/compare.py
  _quantiles) against a partition at the six order statistics they need;
- the gate's running minimum over the configurations (stats/gate.py _lowest_from): row by row
  against np.minimum.accumulate down the columns;
- converting the server's pairs (stats/_validate.py plain_sides): 3 processes x 6 baseline runs
  of 10 samples per configuration from tuples of Python ints (a parsed document's
  process_times) against from float64 arrays (its process_arrays).
Then the memory a parsed document takes, with its groups kept for the statistics and without
(tracemalloc; gate_server/domain/stored_documents.py keeps 256 of them).
"""

from __future__ import annotations

import gc
import timeit
import tracemalloc
from collections.abc import Callable
from typing import Any

import numpy as np

from benchmarks.server.regate_speed import _configs
from stats.gate import _lowest_from
from testbed.factories import body, make_results

DRAWS = 2000


def _us(fn: Callable[[], Any]) -> float:
    return min(timeit.repeat(fn, number=50, repeat=9)) / 50 * 1e6


def steps(configs: int) -> list[tuple[str, float, float]]:
    rng = np.random.default_rng(1)
    draws = rng.standard_normal((configs, DRAWS))
    kth = [99, 100, 999, 1000, 1899, 1900]  # the 5%, 50% and 95% points' neighbours
    tails = rng.random((configs, DRAWS))
    tails[tails > 0.25] = np.inf
    ints = [
        [tuple(int(x) for x in rng.integers(900_000, 1_100_000, 10)) for _ in range(18)]
        for _ in range(configs)
    ]
    arrays = [[np.array(g, dtype=np.float64) for g in side] for side in ints]
    return [
        (
            "quantiles: sort / six-point partition",
            _us(lambda: np.sort(draws, axis=1)),
            _us(lambda: np.partition(draws, kth, axis=1)),
        ),
        (
            "running minimum: row by row / accumulate",
            _us(lambda: _lowest_from(tails.copy())),
            _us(lambda: np.minimum.accumulate(tails[::-1], axis=0)[::-1]),
        ),
        (
            "pairs to a table: from arrays / from ints",
            _us(lambda: np.array(arrays, dtype=np.float64)),
            _us(lambda: np.array(ints, dtype=np.float64)),
        ),
    ]


def document_kib(configs: int) -> tuple[float, float]:
    """KiB of one parsed document, alone and with its groups kept (as the server's are)."""
    from rnx.schema import parse_results

    data = body(make_results(configs=_configs(configs), n=30, processes=3, seed=1))
    parse_results(data)  # warm: imports, pydantic's validators
    gc.collect()
    tracemalloc.start()
    try:
        doc = parse_results(data)
        parsed = tracemalloc.get_traced_memory()[0]
        for c in doc.configurations:
            assert c.samples is not None
            c.samples.process_arrays  # noqa: B018 -- works out and keeps the groups
        kept = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    return parsed / 1024, kept / 1024


def main() -> int:
    print(f"timeit, best of 9, in microseconds; {DRAWS} draws per configuration")
    for configs in (8, 48):
        for name, first, second in steps(configs):
            print(f"  {configs:>2} configurations, {name}: {first:.1f} / {second:.1f}")
    for configs in (8, 48):
        parsed, kept = document_kib(configs)
        print(f"  a parsed {configs}-configuration document: {parsed:.0f} KiB, {kept:.0f} KiB kept")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
