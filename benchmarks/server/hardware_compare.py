"""How long a hardware comparison takes: `rnx compare-hardware` and the /hardware page.

    .venv/bin/python -m benchmarks.server.hardware_compare [--repeat 5]

For a small comparison (6 configurations on 2 machines, like the recorded runs) and the
largest one allowed (48 configurations on 6 machines, 288 cells), with 90 samples in 3
processes per cell: rnx.hardware.compare_hardware (every median interval and every ratio in
one vectorised bootstrap pass each), and, measured alternately in the same run, the same
statistics one cell at a time (stats.median_interval and stats.compare per cell). Best of
--repeat; the ratio is what to read on a shared machine.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import stats
from rnx.hardware import compare_hardware
from rnx.schema import ResultsDocument
from testbed.factories import make_results

SIZES = {
    "6 configurations x 2 machines": (
        ("pytorch_eager",),
        ("float32", "bfloat16"),
        (1, 64, 1024),
        2,
    ),
    "48 configurations x 6 machines": (
        ("pytorch_eager", "torch_compile", "onnxruntime"),
        ("float32", "float16", "bfloat16", "float64"),
        (1, 8, 32, 128),
        6,
    ),
}


def _documents(
    runtimes: tuple, dtypes: tuple, batches: tuple, machines: int
) -> list[ResultsDocument]:
    configs = tuple((r, d, b) for r in runtimes for d in dtypes for b in batches)
    return [
        make_results(environment=f"env-{i}", configs=configs, n=90, processes=3, seed=i)
        for i in range(machines)
    ]


def _per_cell(docs: list[ResultsDocument]) -> None:
    base = {c.id: c.samples.by_process() for c in docs[0].configurations if c.samples}
    for doc in docs:
        for c in doc.configurations:
            if c.samples is None:
                continue
            stats.median_interval(c.samples.by_process(), seed=0)
            if doc is not docs[0]:
                stats.compare(base[c.id], c.samples.by_process(), seed=0)


def _best(fn: Callable[[], object], repeat: int) -> list[float]:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    for name, size in SIZES.items():
        docs = _documents(*size)
        vectorised: list[float] = []
        one_by_one: list[float] = []
        for _ in range(args.repeat):  # alternated, so load on the machine hits both alike
            vectorised += _best(lambda docs=docs: compare_hardware(docs), 1)
            one_by_one += _best(lambda docs=docs: _per_cell(docs), 1)
        v, o = min(vectorised), min(one_by_one)
        print(
            f"{name}: compare_hardware {v * 1000:.0f} ms (best of {args.repeat}); "
            f"one cell at a time {o * 1000:.0f} ms; ratio {o / v:.2f}x"
        )


if __name__ == "__main__":
    main()
