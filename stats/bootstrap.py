"""Bayesian bootstrap of a robust location of log-times, vectorised over configurations.

One side of one configuration is a list of groups (worker processes, or baseline runs), each a
list of log-times. The location is a band mean: the mean of the part of the weighted
distribution between two quantiles. Plain times use the low band, the 10th to the 40th
percentile: interference (a noisy neighbour, an interrupt, a slow process) only ever adds time,
so the fast part of a distribution is what the code costs, and on the recorded corpus it varies
three times less from process to process than the median does, while still averaging 30% of the
weight and ignoring the fastest tenth. See docs/statistics.md.

A posterior draw depends on how many groups there are:

- 3 or more groups: Dirichlet((G - 2) / G) weights over the groups' own band means. The spread
  of those means already contains both the process-to-process and the within-process noise, so
  resampling only at this level counts each once; with Dirichlet(1, ..., 1) the posterior
  variance of a weighted mean of G values is the plug-in variance over G + 1, about half the
  unbiased s^2 / G for 3 processes, and concentration (G - 2) / G makes it exactly s^2 / G, so a
  handful of processes is not over-trusted.
- 1 or 2 groups (too few to see process-to-process noise): Dirichlet(1, ..., 1) weights over
  the groups, then over the samples within each group, and the band mean of all samples under
  the product of both weights.

In paired mode the samples are per-round log-ratios log(head[i] / base[i]) instead: what a round
shares cancels in the ratio, and interference on either side of a round makes the ratio too high
or too low, so the band is the central one, the 45th to the 55th percentile (a smoothed median).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

Band = tuple[float, float]
LOW: Band = (0.10, 0.40)  # plain log-times: interference only ever adds time
CENTRAL: Band = (0.45, 0.55)  # per-round log-ratios: interference on either side, symmetric

# Float32 working arrays of about 2 MB stay in cache, which is faster than one big pass.
CHUNK_ELEMENTS = 1 << 19
MIN_GROUPS_FOR_GROUP_LEVEL = 3


@dataclass(frozen=True)
class Packed:
    """Many configurations' samples for one side, padded to one array shape."""

    values: np.ndarray  # (C, N) log-times, sorted within each configuration; padding is 0
    mask: np.ndarray  # (C, N) 1.0 for a sample, 0.0 for padding
    onehot: np.ndarray  # (C, N, G) sample -> group membership
    group_mask: np.ndarray  # (C, G) 1.0 for a real group
    centre: np.ndarray  # (C,) a typical value, subtracted so float32 arithmetic stays exact enough

    def rows(self, start: int, stop: int) -> Packed:
        return Packed(
            self.values[start:stop],
            self.mask[start:stop],
            self.onehot[start:stop],
            self.group_mask[start:stop],
            self.centre[start:stop],
        )


def pack(sides: list[list[np.ndarray]]) -> Packed:
    """Pack each configuration's groups of log-times into padded arrays, sorted by value."""
    n_max = max(sum(len(g) for g in groups) for groups in sides)
    g_max = max(len(groups) for groups in sides)
    c = len(sides)
    values = np.zeros((c, n_max))
    mask = np.zeros((c, n_max))
    onehot = np.zeros((c, n_max, g_max))
    group_mask = np.zeros((c, g_max))
    for i, groups in enumerate(sides):
        flat = np.concatenate(groups)
        member = np.concatenate([np.full(len(g), k) for k, g in enumerate(groups)])
        order = np.argsort(flat, kind="stable")
        n = len(flat)
        values[i, :n] = flat[order]
        mask[i, :n] = 1.0
        onehot[i, np.arange(n), member[order]] = 1.0
        group_mask[i, : len(groups)] = 1.0
    centre = np.array([float(np.median(np.concatenate(groups))) for groups in sides])
    return Packed(values, mask, onehot, group_mask, centre)


def location_draws(
    sides: list[list[np.ndarray]], resamples: int, rng: np.random.Generator, band: Band
) -> np.ndarray:
    """(C, R) posterior draws of the location of each configuration's groups of log-times."""
    draws = np.empty((len(sides), resamples))
    many = [i for i, groups in enumerate(sides) if len(groups) >= MIN_GROUPS_FOR_GROUP_LEVEL]
    few = [i for i, groups in enumerate(sides) if len(groups) < MIN_GROUPS_FOR_GROUP_LEVEL]
    if many:
        means = [np.array([point_location([g], band) for g in sides[i]]) for i in many]
        draws[many] = _group_level_draws(means, resamples, rng)
    if few:
        draws[few] = _two_level_draws(pack([sides[i] for i in few]), resamples, rng, band)
    return draws


def _group_level_draws(
    means: list[np.ndarray], resamples: int, rng: np.random.Generator
) -> np.ndarray:
    """Dirichlet((G - 2) / G) weights over each configuration's G group locations."""
    g_max = max(len(m) for m in means)
    values = np.zeros((len(means), g_max))
    real = np.zeros((len(means), g_max), dtype=bool)
    concentration = np.ones((len(means), g_max))  # padding draws are masked out below
    for i, m in enumerate(means):
        values[i, : len(m)] = m
        real[i, : len(m)] = True
        concentration[i, : len(m)] = (len(m) - 2) / len(m)
    shape = (*values.shape, resamples)
    weights = rng.standard_gamma(np.broadcast_to(concentration[:, :, None], shape))
    weights *= real[:, :, None]
    # A draw whose group weights all underflow to 0 is vanishingly rare; give it equal weights.
    totals = weights.sum(axis=1, keepdims=True)
    equal = (real / real.sum(axis=1, keepdims=True))[:, :, None]
    weights = np.where(totals > 0, weights / np.where(totals > 0, totals, 1.0), equal)
    result: np.ndarray = np.einsum("cgr,cg->cr", weights, values)
    return result


def _exponentials(shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    """Standard exponentials in float32 as -log(U), U uniform on (0, 1): about twice as fast as
    numpy's own here, never exactly 0 (so a normalising sum is never 0), and float32 resolution
    (1e-7) is far finer than anything a Dirichlet weight needs."""
    u = rng.random(shape, dtype=np.float32)
    u += np.float32(2.0**-25)  # [0, 1) -> (0, 1)
    np.log(u, out=u)
    np.negative(u, out=u)
    return u


def _running_sum(weights: np.ndarray) -> np.ndarray:
    """Cumulative sum along axis 1; a loop over the few samples adds whole (C, R) rows at a
    time, which is several times faster than np.cumsum on a middle axis."""
    out = np.empty_like(weights)
    out[:, 0] = weights[:, 0]
    for j in range(1, weights.shape[1]):
        np.add(out[:, j - 1], weights[:, j], out=out[:, j])
    return out


def _two_level_draws(
    side: Packed, resamples: int, rng: np.random.Generator, band: Band
) -> np.ndarray:
    """Dirichlet(1) weights over groups, then within them, in cache-sized chunks."""
    c, n = side.values.shape
    step = max(1, CHUNK_ELEMENTS // (n * resamples))
    parts = []
    for i in range(0, c, step):
        chunk = side.rows(i, i + step)
        parts.append(_band_mean(chunk, _sample_weights(chunk, resamples, rng), band))
    return np.concatenate(parts)


def _sample_weights(side: Packed, resamples: int, rng: np.random.Generator) -> np.ndarray:
    """(C, N, R) weights: Dirichlet(1) over groups times Dirichlet(1) within each group."""
    weights = _exponentials((*side.values.shape, resamples), rng)
    weights *= side.mask[:, :, None].astype(np.float32)
    if side.onehot.shape[2] == 1:
        weights /= weights.sum(axis=1, keepdims=True)
        return weights
    onehot = side.onehot.astype(np.float32)
    group_sums = onehot.transpose(0, 2, 1) @ weights  # (C, G, R)
    across = _exponentials(group_sums.shape, rng) * side.group_mask[:, :, None]
    across /= across.sum(axis=1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        per_group = np.where(group_sums > 0, across / group_sums, 0.0).astype(np.float32)
    weights *= onehot @ per_group  # columns sum to 1
    return weights


def _band_mean(side: Packed, weights: np.ndarray, band: Band) -> np.ndarray:
    """(C, R) the mean of the sorted values between the band's quantiles of their weights
    (overwrites the weights)."""
    # Resamples run along the last, contiguous axis so the running sum over samples is a fast add
    # of whole rows.
    lo, hi = band
    # kept[j] = the part of sample j's weight that lies inside [lo, hi] of the cumulative weight.
    upper = _running_sum(weights)
    lower = np.subtract(upper, weights, out=weights)
    np.clip(upper, lo, hi, out=upper)
    np.clip(lower, lo, hi, out=lower)
    kept = np.subtract(upper, lower, out=upper)
    centred = (side.values - side.centre[:, None]).astype(np.float32)
    banded = (centred[:, None, :] @ kept)[:, 0, :].astype(np.float64)
    result: np.ndarray = banded / (hi - lo) + side.centre[:, None]
    return result


def point_location(groups: list[np.ndarray], band: Band) -> float:
    """The same estimator with the expected weights (equal groups, equal samples within a group)."""
    flat = np.concatenate(groups)
    w = np.concatenate([np.full(len(g), 1.0 / (len(g) * len(groups))) for g in groups])
    order = np.argsort(flat, kind="stable")
    flat, w = flat[order], w[order]
    upper = np.cumsum(w)
    lo, hi = band
    kept = np.clip(upper, lo, hi) - np.clip(upper - w, lo, hi)
    return float((kept * flat).sum() / (hi - lo))


def group_locations(groups: list[np.ndarray], band: Band, *, log: bool = False) -> np.ndarray:
    """point_location of each group on its own, vectorised: one padded sort for all of them.
    log=True: the groups are plain times, and the locations are of their logs."""
    lengths = np.array([len(g) for g in groups])
    n_max = int(lengths.max())
    if np.all(lengths == n_max):
        values = np.sort(np.stack(groups), axis=1)
    else:
        values = np.full((len(groups), n_max), np.inf)
        for i, g in enumerate(groups):
            values[i, : len(g)] = g
        values.sort(axis=1)
        values[np.isinf(values)] = 1.0 if log else 0.0  # padding: its weight below is 0
    if log:
        values = np.log(values)
    w = 1.0 / lengths[:, None]
    upper = np.arange(1, n_max + 1)[None, :] * w
    lo, hi = band
    kept = np.clip(upper, lo, hi) - np.clip(upper - w, lo, hi)
    result: np.ndarray = (kept * values).sum(axis=1) / (hi - lo)
    return result
