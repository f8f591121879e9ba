"""Time and peak memory of one `stats.changepoints.detect` call by history length, cold (the
first call in the process, which builds the search grid) and warm (issue 29: 10,000 runs in
<= 1 s and <= 200 MB). Each length runs in a fresh process so that "cold" is really cold.
The cold call's extra seconds are the rank test's first (lazy) import of scipy.stats
(cProfile, 2026-12-03: 1.65 of 1.70 s), the same at any length, not the search.

    .venv/bin/python -m benchmarks.quality.changepoint_scale [--runs 500 2000 10000]
"""

from __future__ import annotations

import argparse
import subprocess
import sys

_ONE = """
import time, tracemalloc, numpy as np
from stats.changepoints import detect
n = {n}
y = np.random.default_rng(n).normal(0.0, 0.01, n)
y[n // 2:] += 0.1  # one 10% step in the middle
for label in ("cold", "warm"):
    tracemalloc.start()
    start = time.perf_counter()
    found = detect(y)
    seconds = time.perf_counter() - start
    peak = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    print(f"{{n:>6}} runs  {{label}}  {{seconds:6.2f}} s  {{peak:6.1f}} MiB  {{len(found)}} found")
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, nargs="+", default=[500, 2000, 10000])
    for n in parser.parse_args().runs:
        subprocess.run([sys.executable, "-c", _ONE.format(n=n)], check=True)


if __name__ == "__main__":
    main()
