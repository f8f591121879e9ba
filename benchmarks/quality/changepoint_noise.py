"""Change points on synthetic run locations: false alarms per noise model, detection delay per
change, and the cost of a long history, in one run (issue 29's "what must hold" figures).

Run `python -m benchmarks.quality.changepoint_noise` (a few minutes; `--runs` and `--histories`
make it
shorter). Each history is one configuration's run locations (log scale), as `run_location`
gives them. After every run `stats.detect` is called as the server calls it
(gate_server/domain/change_points.py): on the newest `--window` runs, with the change points it
reported before as known ones.

- False alarms: unchanged histories of `--runs` runs under each noise model (1%, 2% and 3%
  Gaussian run-to-run noise; AR(1) with rho 0.3, 0.6 and 0.9 and 1% marginal noise; 1% noise
  with 5% of runs slowed by 10-30%); every change point reported counts, per 1,000 runs.
- Detection: a change after some unchanged runs at 1% noise; found means a change point the
  right way within 2 runs of it, reported at most `delay` runs after the change (10% step: 3
  runs, 5% step: 10), also with only 10 runs before it and 5 runs after another change. A 10%
  ramp over 40 runs: how many change points it gives and when the first comes.
- Cost: one `detect` call on 10,000 runs with a step (CPU time and traced peak memory).
"""

from __future__ import annotations

import argparse
import math
import os
import time
import tracemalloc
from collections.abc import Callable
from concurrent.futures import Executor, ProcessPoolExecutor
from dataclasses import dataclass, replace

import numpy as np

import stats
from stats.changepoints import ChangePoint, KnownChange

NEAR = 2  # a change point within this many runs of the injected change finds it


def incremental(history: np.ndarray, window: int) -> list[tuple[int, ChangePoint, int]]:
    """The server's use: after every run, detect on the newest `window` runs with every change
    reported so far as known; a drift that continues a known change updates it (its end and
    total change; its start and when it was first reported stay). Returns (run count when
    first reported, change, absolute after)."""
    reported: list[tuple[int, ChangePoint, int]] = []
    ends: list[int | None] = []  # each reported change's absolute end (drifts)
    for t in range(1, len(history) + 1):
        start = max(0, t - window)
        # In run order: a change found around a newer one lies before it.
        mine = sorted(((k, a - start) for k, (_, _, a) in enumerate(reported)), key=lambda m: m[1])
        placed = [(k, a) for k, a in mine if a > 0] or []
        placed = [(k, a) for k, a in mine if a <= 0][-1:] + placed
        known = [_known(k, a, reported[k][1], ends[k], start) for k, a in placed]
        for cp in stats.detect(history[start:t], known=known):
            end = None if cp.end is None else cp.end + start
            if cp.continues is not None:
                k = cp.continues.key
                reported[k] = (reported[k][0], replace(cp, after=reported[k][2]), reported[k][2])
                ends[k] = end
            else:
                reported.append((t, cp, cp.after + start))
                ends.append(end)
    return reported


def _known(key: int, after: int, cp: ChangePoint, end: int | None, start: int) -> KnownChange:
    """A reported change as the server passes it back (indices into the window)."""
    inside = None if end is None or end - start <= max(after, 0) else end - start
    return KnownChange(after, cp.ratio, cp.low, cp.high, key=key, end=inside)


# ---------------------------------------------------------------- noise models


def gaussian(sd: float) -> Callable[[int, np.random.Generator], np.ndarray]:
    return lambda n, rng: rng.normal(0.0, sd, n)


def ar1(sd: float, rho: float) -> Callable[[int, np.random.Generator], np.ndarray]:
    def make(n: int, rng: np.random.Generator) -> np.ndarray:
        e = rng.normal(0.0, sd * math.sqrt(1 - rho**2), n)
        y = np.empty(n)
        y[0] = rng.normal(0.0, sd)
        for i in range(1, n):
            y[i] = rho * y[i - 1] + e[i]
        return y

    return make


def slowed(sd: float, share: float) -> Callable[[int, np.random.Generator], np.ndarray]:
    def make(n: int, rng: np.random.Generator) -> np.ndarray:
        y = rng.normal(0.0, sd, n)
        hit = rng.random(n) < share
        return y + hit * np.log(rng.uniform(1.1, 1.3, n))

    return make


NOISE = {
    "1% noise": gaussian(0.01),
    "2% noise": gaussian(0.02),
    "3% noise": gaussian(0.03),
    "AR(1) rho 0.3, 1%": ar1(0.01, 0.3),
    "AR(1) rho 0.6, 1%": ar1(0.01, 0.6),
    "AR(1) rho 0.9, 1%": ar1(0.01, 0.9),
    "5% of runs slowed 10-30%": slowed(0.01, 0.05),
}


def false_alarms(args: argparse.Namespace, pool: Executor) -> None:
    print(f"false change points: {args.histories} histories x {args.runs} runs per model")
    print("| noise | runs | change points | per 1,000 runs |")
    print("|---|---|---|---|")
    tasks = [(name, seed, args) for name in NOISE for seed in range(args.histories)]
    counts = list(pool.map(_false_in_one, tasks))
    for i, name in enumerate(NOISE):
        count = sum(counts[i * args.histories : (i + 1) * args.histories])
        total = args.histories * args.runs
        print(f"| {name} | {total} | {count} | {1000 * count / total:.2f} |")


def _false_in_one(task: tuple[str, int, argparse.Namespace]) -> int:
    name, history, args = task
    rng = np.random.default_rng([args.seed, history])
    return len(incremental(NOISE[name](args.runs, rng), args.window))


# ---------------------------------------------------------------- detection


@dataclass(frozen=True)
class Scenario:
    name: str
    before: int  # unchanged runs before the scored change
    log_step: float  # the scored change, on the log scale
    delay: int  # found when reported at most this many runs after it
    earlier: float = 0.0  # a change 5 runs before the scored one


SCENARIOS = (
    Scenario("10% step, 60 runs before", 60, math.log(1.10), 3),
    Scenario("5% step, 60 runs before", 60, math.log(1.05), 10),
    Scenario("10% step, 10 runs before", 10, math.log(1.10), 3),
    Scenario("5% step, 10 runs before", 10, math.log(1.05), 10),
    Scenario("10% step, 5 runs after a +10% one", 60, math.log(1.10), 3, math.log(1.10)),
    Scenario("5% step, 5 runs after a +10% one", 60, math.log(1.05), 10, math.log(1.10)),
    Scenario("10% revert, 5 runs after a +10% one", 60, -math.log(1.10), 3, math.log(1.10)),
)


def detection(args: argparse.Namespace, pool: Executor) -> None:
    print(f"\ndetection at 1% noise: {args.changes} histories per scenario")
    print("| change | found in time | median runs to report |")
    print("|---|---|---|")
    tasks = [(s, i, args) for s in SCENARIOS for i in range(args.changes)]
    delays = list(pool.map(_delay, tasks))
    for k, s in enumerate(SCENARIOS):
        mine = [d for d in delays[k * args.changes : (k + 1) * args.changes] if d is not None]
        found = sum(d <= s.delay for d in mine)
        median = f"{np.median(mine):.0f}" if mine else "-"
        print(f"| {s.name} | {100 * found / args.changes:.0f}% | {median} |")
    ramp(args, pool)


def _delay(task: tuple[Scenario, int, argparse.Namespace]) -> int | None:
    """Runs from the change until it is reported, or None."""
    s, history, args = task
    rng = np.random.default_rng([args.seed, history])
    y = rng.normal(0.0, 0.01, s.before + s.delay + 5)
    at = s.before
    if s.earlier:
        y[at - 5 :] += s.earlier
    y[at:] += s.log_step
    for t, cp, after in incremental(y, args.window):
        if abs(after - at) <= NEAR and (cp.ratio > 1) == (s.log_step > 0):
            return t - at
    return None


def ramp(args: argparse.Namespace, pool: Executor) -> None:
    reports = list(pool.map(_ramp_reports, [(i, args) for i in range(args.changes)]))
    counts = [len(r) for r in reports]
    firsts = [r[0] - 60 for r in reports if r]
    one = sum(c == 1 for c in counts)
    print(
        f"\n10% ramp over 40 runs (runs 60-99): change points per history median "
        f"{np.median(counts):.0f} (max {max(counts)}), exactly one in {one} of {len(counts)}; "
        f"first reported a median {np.median(firsts):.0f} runs after the ramp's start"
    )


def _ramp_reports(task: tuple[int, argparse.Namespace]) -> list[int]:
    """When each change point of a ramp history after run 50 was reported."""
    history, args = task
    rng = np.random.default_rng([args.seed, history])
    y = rng.normal(0.0, 0.01, 160)
    y[60:100] += np.linspace(0, math.log(1.10), 41)[1:]
    y[100:] += math.log(1.10)
    return [t for t, _, after in incremental(y, args.window) if after >= 50]


def cost(args: argparse.Namespace) -> None:
    rng = np.random.default_rng(args.seed)
    y = rng.normal(0.0, 0.01, 10_000)
    y[5_000:] += math.log(1.10)
    import scipy.stats  # noqa: F401  (imported before the clock starts, as in a server)

    tracemalloc.start()
    start = time.process_time()
    found = stats.detect(y)
    seconds = time.process_time() - start
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    print(
        f"\n10,000 runs, a 10% step at 5,000: {seconds:.2f} s CPU, traced peak {peak / 1e6:.1f} "
        f"MB, change points at {[cp.after for cp in found]}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=500, help="runs per unchanged history")
    parser.add_argument("--histories", type=int, default=40, help="unchanged histories per model")
    parser.add_argument("--changes", type=int, default=100, help="histories per change scenario")
    parser.add_argument("--window", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="processes")
    args = parser.parse_args()
    began = time.perf_counter()
    cost(args)
    with ProcessPoolExecutor(args.jobs) as pool:
        detection(args, pool)
        false_alarms(args, pool)
    print(f"\n{time.perf_counter() - began:.0f} s")


if __name__ == "__main__":
    main()
