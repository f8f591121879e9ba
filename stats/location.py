"""One side's typical time with a credible interval: the median a table of machines shows."""

from __future__ import annotations

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
    groups = as_groups(samples, "samples")
    resamples = check_resamples(resamples)
    rng = as_generator(seed)
    draws = bootstrap.location_draws(
        [[np.log(g) for g in groups]], resamples, rng, bootstrap.CENTRAL
    )
    tail = (1 - INTERVAL) / 2
    low, high = np.exp(np.quantile(draws[0], [tail, 1 - tail]))
    return Location(
        median=float(np.median(np.concatenate(groups))),
        low=float(low),
        high=float(high),
        samples=sum(len(g) for g in groups),
        groups=len(groups),
    )
