"""How well a bisection pins a step to its commit: the server's own stepping and statistics
(gate_server/domain/bisection/plan.py) over a noisy synthetic history, one dispatch per measurement.

Each trial: a range of 16 commits after a before run, a step of STEP at a random commit (or
none), the before and after ends measured once each, and every dispatch measuring its commit
with 3 processes (3 more on each repeat of an undecided commit). Every run has its own common
shift (run-to-run noise), every process its own, and every sample lognormal noise with rare
interference spikes. Reports, per step size, the share of trials that named the planted commit
within --max-dispatches dispatches, and for no step the share that named no culprit.

    python -m benchmarks.server.bisection_quality --trials 100
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import numpy as np

from gate_server.domain.bisection.plan import Step, classify, next_step

COMMITS = 16
SAMPLES = 20  # per process
PROCESSES = 3  # per dispatch
RUN_SD = 0.006  # a run's common shift
PROCESS_SD = 0.004  # a process's own shift
SAMPLE_SD = 0.02  # sample to sample
SPIKE_RATE, SPIKE = 0.03, 0.3  # interference: a few samples 30% slower


def measure(rng: np.random.Generator, level: float, processes: int) -> list[list[float]]:
    """One run's samples (ms) at true time `level`: one list per process."""
    run = rng.normal(0.0, RUN_SD)
    groups = []
    for _ in range(processes):
        shift = run + rng.normal(0.0, PROCESS_SD)
        t = level * np.exp(shift + rng.normal(0.0, SAMPLE_SD, SAMPLES))
        t *= 1 + SPIKE * (rng.random(SAMPLES) < SPIKE_RATE)
        groups.append([float(x) for x in t])
    return groups


def trial(rng: np.random.Generator, step: float, culprit: int | None, budget: int) -> tuple:
    """One bisection; returns (what it named or None, dispatches)."""

    def level(i: int) -> float:
        return 1.0 + step if culprit is not None and i >= culprit else 1.0

    before = measure(rng, 1.0, PROCESSES)
    after = measure(rng, level(COMMITS - 1), PROCESSES)
    pooled: dict[int, list[list[float]]] = {}
    steps: list[Step] = []
    while True:
        plan = next_step(COMMITS, steps, budget=budget)
        if plan.action == "found":
            return plan.index, len(steps)
        if plan.action == "stop":
            return None, len(steps)
        assert plan.index is not None
        pooled.setdefault(plan.index, []).extend(measure(rng, level(plan.index), PROCESSES))
        seed = int(rng.integers(2**32))
        evidence = classify(before, after, pooled[plan.index], seed=seed)
        steps.append(Step(plan.index, evidence.side))


def run(trials: int, budget: int, seed: int, say: Callable[[str], None]) -> dict[str, float]:
    rng = np.random.default_rng(seed)
    out = {}
    for step in (0.10, 0.05, 0.0):
        named = right = 0
        used = []
        for _ in range(trials):
            # the last commit is the after end itself: a step there is found without a dispatch
            culprit = int(rng.integers(0, COMMITS)) if step else None
            found, dispatches = trial(rng, step, culprit, budget)
            used.append(dispatches)
            named += found is not None
            right += found is not None and found == culprit
        if step:
            share = right / trials
            say(
                f"{step:.0%} step in {COMMITS} commits: pinned {right}/{trials} ({share:.0%}), "
                f"dispatches median {np.median(used):.0f} max {max(used)}"
            )
        else:
            share = 1 - named / trials
            say(
                f"no step in {COMMITS} commits: no culprit named in {trials - named}/{trials} "
                f"({share:.0%}), dispatches median {np.median(used):.0f} max {max(used)}"
            )
        out[f"{step:.2f}"] = share
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--trials", type=int, default=100)
    p.add_argument("--max-dispatches", type=int, default=5, help="the per-bisection budget")
    p.add_argument("--seed", type=int, default=32)
    args = p.parse_args(argv)
    run(args.trials, args.max_dispatches, args.seed, print)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
