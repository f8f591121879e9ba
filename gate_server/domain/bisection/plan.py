"""What a bisection does next, from what its steps found: pure (no I/O, no settings).

A change point's range is the commits after its before-run's commit up to and including its
after-run's commit, oldest first (GitHub's compare-commits order). The before commit is known
"before" (index -1) and the after commit known "after" (the last index). Each step measures one
commit and says whether it is closer to the before end or to the after end (`classify`); the
range halves until one commit, the culprit, remains. A commit that could not be measured
(build failure, workload missing) is skipped as `git bisect skip` does: the step goes to the
untested commit nearest the middle instead. An undecided step is measured again with more
processes while the budget lasts; when it runs out, or every commit left is skipped, the
bisection ends with the narrowed range and says why.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

BEFORE = "before"
AFTER = "after"
UNDECIDED = "undecided"
SKIPPED = "skipped"
NO_CHANGE = "no_change"  # the two ends themselves do not credibly differ


@dataclass(frozen=True)
class Step:
    """One measured commit: its index in the range and what it was found closer to."""

    index: int
    side: str


@dataclass(frozen=True)
class Next:
    """What to do: "measure" `index` (its `attempt`-th run), "found" the culprit at `index`,
    or "stop" with the narrowed range (`low`, `high`] and the `reason`."""

    action: Literal["measure", "found", "stop"]
    index: int | None = None
    attempt: int = 1
    low: int = -1  # the newest commit known before the change (-1: the before run's commit)
    high: int = 0  # the oldest commit known after it
    reason: str = ""


def narrowed(commits: int, steps: Sequence[Step]) -> tuple[int, int]:
    """The range (low, high] the decided steps leave: low the newest index found before the
    change, high the oldest found after it."""
    low, high = -1, commits - 1
    for s in steps:
        if s.side == BEFORE and low < s.index < high:
            low = s.index
        elif s.side == AFTER and low < s.index < high:
            high = s.index
    return low, high


def next_step(commits: int, steps: Sequence[Step], *, budget: int) -> Next:
    """The next thing to do in a range of `commits` commits after `steps` (in the order they
    ended), with at most `budget` measurements in all."""
    if commits < 1:
        raise ValueError(f"a bisection needs at least one commit in its range, got {commits}")
    low, high = narrowed(commits, steps)
    if any(s.side == NO_CHANGE for s in steps):
        return _stop(low, high, "the ends of the range do not credibly differ: nothing to find")
    if high - low == 1:
        return Next("found", index=high, low=low, high=high)
    if steps and steps[-1].side == UNDECIDED:
        last = steps[-1].index
        if low < last < high:
            if len(steps) >= budget:
                return _stop(low, high, f"commit {last} stayed undecided and the budget is spent")
            tries = sum(1 for s in steps if s.index == last)
            return Next("measure", index=last, attempt=tries + 1, low=low, high=high)
    if len(steps) >= budget:
        return _stop(low, high, f"the budget of {budget} measurements is spent")
    tried = {s.index for s in steps if s.side in (SKIPPED, UNDECIDED)}
    middle = (low + high) / 2
    untested = [i for i in range(low + 1, high) if i not in tried]
    if not untested:
        return _stop(low, high, "every commit left in the range was skipped or undecided")
    pick = min(untested, key=lambda i: (abs(i - middle), i))
    return Next("measure", index=pick, attempt=1, low=low, high=high)


def _stop(low: int, high: int, reason: str) -> Next:
    return Next("stop", low=low, high=high, reason=reason)


@dataclass(frozen=True)
class Evidence:
    """A measured commit against both ends: ratios (commit / end time) with 90% intervals,
    where it lies between them (0: at the before end, 1: at the after end) and the side."""

    side: str
    position: float
    ratio_before: float
    low_before: float
    high_before: float
    ratio_after: float
    low_after: float
    high_after: float


def classify(
    before: Sequence[Sequence[float]],
    after: Sequence[Sequence[float]],
    commit: Sequence[Sequence[float]],
    *,
    seed: Any = None,
) -> Evidence:
    """Which end a commit's samples (one sequence per process) are closer to: its interval
    against the before end lies wholly below the half-way point of the change (before), wholly
    above it (after), or straddles it (undecided); NO_CHANGE when the two ends do not
    credibly differ (stats.compare's verdict between them is not slower or faster): a range
    without a change names no culprit."""
    import stats  # numpy and scipy: loaded with the first bisection step

    b, a, s = (stats.frozen_groups(x) for x in (before, after, commit))
    change, vs_before, vs_after = stats.compare_many(
        [(b, a), (b, s), (a, s)], seed=seed, resamples=2000
    )
    log_change = math.log(change.ratio)
    side, position = NO_CHANGE, float("nan")
    if change.verdict in ("slower", "faster"):
        position = math.log(vs_before.ratio) / log_change
        ends = sorted((math.log(vs_before.low) / log_change, math.log(vs_before.high) / log_change))
        side = BEFORE if ends[1] < 0.5 else AFTER if ends[0] > 0.5 else UNDECIDED
    return Evidence(
        side=side,
        position=position,
        ratio_before=vs_before.ratio,
        low_before=vs_before.low,
        high_before=vs_before.high,
        ratio_after=vs_after.ratio,
        low_after=vs_after.low,
        high_after=vs_after.high,
    )
