"""Change points on synthetic run locations: false alarms per noise model, detection delay per
change, and the cost of a long history, in one run (issue 29's "what must hold" figures).

Run `python -m benchmarks.changepoint_noise` (a few minutes; `--runs` and `--histories` make it
shorter). Each history is one configuration's run locations (log scale), as `run_location`
gives them. After every run `stats.detect` is called as the server calls it
(gate_server/changes.py): on the newest `--window` runs, with the change points it reported
before as known ones.

- False alarms: unchanged histories of `--runs` runs under each noise model (1%, 2% and 3%
  Gaussian run-to-run noise; AR(1) with rho 0.3 and 1% marginal noise; 1% noise with 5% of
  runs slowed by 10-30%); every change point reported counts, per 1,000 runs.
- Detection: a change after some unchanged runs at 1% noise; found means a change point the
  right way within 2 runs of it, reported at most `delay` runs after the change (10% step: 3
  runs, 5% step: 10), also with only 10 runs before it and 5 runs after another change. A 10%
  ramp over 40 runs: how many change points it gives and when the first comes.
- Cost: one `detect` call on 10,000 runs with a step (CPU time and traced peak memory).
"""

from __future__ import annotations

import argparse
import math
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

import stats
from stats.changepoints import ChangePoint, KnownChange

NEAR = 2  # a change point within this many runs of the injected change finds it


def incremental(history: np.ndarray, window: int) -> list[tuple[int, ChangePoint, int]]:
    """The server's use: after every run, detect on the newest `window` runs with every change
    reported so far as known. Returns (run count when reported, change, absolute after)."""
    reported: list[tuple[int, ChangePoint, int]] = []
    for t in range(1, len(history) + 1):
        start = max(0, t - window)
        inside = [(a - start, cp) for _, cp, a in reported if a > start]
        before = [(a - start, cp) for _, cp, a in reported if a <= start][-1:]
        known = [KnownChange(a, cp.ratio, cp.low, cp.high) for a, cp in before + inside]
        for cp in stats.detect(history[start:t], known=known):
            reported.append((t, cp, cp.after + start))
    return reported


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
    "5% of runs slowed 10-30%": slowed(0.01, 0.05),
}


def false_alarms(args: argparse.Namespace) -> None:
    print(f"false change points: {args.histories} histories x {args.runs} runs per model")
    print("| noise | runs | change points | per 1,000 runs |")
    print("|---|---|---|---|")
    for name, make in NOISE.items():
        rng = np.random.default_rng(args.seed)
        count = sum(
            len(incremental(make(args.runs, rng), args.window)) for _ in range(args.histories)
        )
        total = args.histories * args.runs
        print(f"| {name} | {total} | {count} | {1000 * count / total:.2f} |")


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


def detection(args: argparse.Namespace) -> None:
    print(f"\ndetection at 1% noise: {args.changes} histories per scenario")
    print("| change | found in time | median runs to report |")
    print("|---|---|---|")
    for s in SCENARIOS:
        rng = np.random.default_rng(args.seed)
        found, delays = 0, []
        for _ in range(args.changes):
            n = s.before + s.delay + 5
            y = rng.normal(0.0, 0.01, n)
            at = s.before
            if s.earlier:
                y[at - 5 :] += s.earlier
            y[at:] += s.log_step
            for t, cp, after in incremental(y, args.window):
                right_way = (cp.ratio > 1) == (s.log_step > 0)
                if abs(after - at) <= NEAR and right_way:
                    delays.append(t - at)
                    found += t - at <= s.delay
                    break
        median = f"{np.median(delays):.0f}" if delays else "-"
        print(f"| {s.name} | {100 * found / args.changes:.0f}% | {median} |")
    ramp(args)


def ramp(args: argparse.Namespace) -> None:
    rng = np.random.default_rng(args.seed)
    counts, firsts = [], []
    for _ in range(args.changes):
        y = rng.normal(0.0, 0.01, 160)
        y[60:100] += np.linspace(0, math.log(1.10), 41)[1:]
        y[100:] += math.log(1.10)
        reports = [(t, after) for t, cp, after in incremental(y, args.window) if after >= 50]
        counts.append(len(reports))
        if reports:
            firsts.append(reports[0][0] - 60)
    one = sum(c == 1 for c in counts)
    print(
        f"\n10% ramp over 40 runs (runs 60-99): change points per history median "
        f"{np.median(counts):.0f} (max {max(counts)}), exactly one in {one} of {len(counts)}; "
        f"first reported a median {np.median(firsts):.0f} runs after the ramp's start"
    )


def cost(args: argparse.Namespace) -> None:
    rng = np.random.default_rng(args.seed)
    y = rng.normal(0.0, 0.01, 10_000)
    y[5_000:] += math.log(1.10)
    stats.detect(y[:300])  # scipy.stats imported before the clock starts
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
    args = parser.parse_args()
    began = time.perf_counter()
    cost(args)
    detection(args)
    false_alarms(args)
    print(f"\n{time.perf_counter() - began:.0f} s")


if __name__ == "__main__":
    main()
