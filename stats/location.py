"""One side's typical time with a credible interval: the median a table of machines shows."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from stats import bootstrap
from stats._validate import as_generator, as_groups, check_resamples

INTERVAL = 0.90


@dataclass(frozen=True)
class Location:
    """The median time of one configuration on one machine, and its 90% credible interval."""

    median: float  # plain median of all samples, in the samples' unit
    low: float  # 90% credible interval of the median (Bayesian bootstrap, as the verdict's)
    high: float
    samples: int
    groups: int


def median_interval(
    samples: Any,
    *,
    resamples: int = 2000,
    seed: int | np.random.Generator | None = None,
) -> Location:
    """The median of `samples` (a sequence of times, or one sequence per worker process) with
    the 90% interval of its posterior: the same Bayesian bootstrap as stats.compare, over the
    central band of the log-times (the 45th to the 55th percentile, a smoothed median), so the
    spread between processes widens the interval exactly as it widens a comparison's."""
    return median_intervals([samples], resamples=resamples, seed=seed)[0]


def median_intervals(
    sides: Sequence[Any],
    *,
    resamples: int = 2000,
    seed: int | np.random.Generator | None = None,
) -> list[Location]:
    """median_interval for many configurations (or machines) in one vectorised pass."""
    if isinstance(sides, (str, bytes)) or not isinstance(sides, Sequence) or not sides:
        raise ValueError("sides must be a non-empty sequence of samples")
    groups = [
        as_groups(s, "samples" if len(sides) == 1 else f"sides[{i}]") for i, s in enumerate(sides)
    ]
    resamples = check_resamples(resamples)
    rng = as_generator(seed)
    logs = [[np.log(g) for g in side] for side in groups]
    draws = bootstrap.location_draws(logs, resamples, rng, bootstrap.CENTRAL)
    tail = (1 - INTERVAL) / 2
    ends = np.exp(np.quantile(draws, [tail, 1 - tail], axis=1))
    return [
        Location(
            median=float(np.median(np.concatenate(side))),
            low=float(ends[0, i]),
            high=float(ends[1, i]),
            samples=sum(len(g) for g in side),
            groups=len(side),
        )
        for i, side in enumerate(groups)
    ]
