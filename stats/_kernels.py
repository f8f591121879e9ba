"""The run-level model's numerical kernels: numpy reductions in forms that are cheap on the
model's small tables (a few rows of configurations and runs, re-gated on every upload).

Each gives the same numbers as the plain numpy call named in its docstring
(tests/stats/test_kernels.py checks them against it); none holds any part of the model, which
reads top to bottom in stats/runlevel.py.
"""

from __future__ import annotations

import math

import numpy as np


def cell_medians(values: np.ndarray, cell: np.ndarray, size: int) -> np.ndarray:
    """The median of the values in each cell 0..size-1 (NaN for an empty cell)."""
    if values.size == 0:
        return np.full(size, np.nan)
    order = np.lexsort((values, cell))
    v, c = values[order], cell[order]
    counts = np.bincount(c, minlength=size)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    safe = np.maximum(counts, 1)
    lo = np.minimum(starts + (safe - 1) // 2, len(v) - 1)
    hi = np.minimum(starts + safe // 2, len(v) - 1)
    result: np.ndarray = np.where(counts > 0, (v[lo] + v[hi]) / 2, np.nan)
    return result


def table_medians(table: np.ndarray) -> np.ndarray:
    """The median of each row: cell_medians' numbers for cells of equal size."""
    ordered = np.sort(table, axis=1)
    n = ordered.shape[1]
    result: np.ndarray = (ordered[:, (n - 1) // 2] + ordered[:, n // 2]) / 2
    return result


def cell_minima(values: np.ndarray, cell: np.ndarray, size: int) -> np.ndarray:
    result = np.full(size, np.inf)
    np.minimum.at(result, cell, values)
    return result


def run_means(members: np.ndarray, blocks: np.ndarray, run_of: np.ndarray, k: int) -> np.ndarray:
    """(M, N) each value's run's mean over its processes, for M > 1 configurations whose runs
    all have as many processes (blocks: the columns in run order). The same sums as the mean of
    a run's columns taken out by a mask: that copy is strided along the processes, so numpy adds
    them one process after another, as this sum over the leading axis does."""
    by_process = members[:, blocks].reshape(len(members), k, -1).transpose(2, 0, 1)
    means: np.ndarray = np.add.reduce(np.ascontiguousarray(by_process), axis=0)
    means /= by_process.shape[0]
    return means[:, run_of]


def row_medians(x: np.ndarray) -> np.ndarray:
    """median_of_all of each row of a 2-D array without NaN, from one partition."""
    n = x.shape[1]
    half = n // 2
    part = np.partition(x, half, axis=1)
    if n % 2:
        return 0.0 + part[:, half]
    result: np.ndarray = (0.0 + part[:, :half].max(axis=1) + part[:, half]) / 2
    return result


def rows_searchsorted(rows: np.ndarray, u: np.ndarray) -> np.ndarray:
    """np.searchsorted(row, u) for every sorted row at once: (rows, len(u)) counts of each
    row's values below each u. The u are sorted once; a row value v lies below the k-th smallest
    u exactly when fewer than k + 1 of the u are <= v, so counting the row's values by that
    number and summing them up gives every count with the same comparisons, without a binary
    search of the row per u (which was most of the model's time with many configurations)."""
    n_rows, n_u = rows.shape[0], u.size
    order = np.argsort(u)  # equal u get equal counts, so their order does not matter
    at_or_below = np.searchsorted(u[order], rows, side="right")  # (rows, points)
    offsets = (np.arange(n_rows) * (n_u + 1))[:, None]
    counts = np.bincount((at_or_below + offsets).ravel(), minlength=n_rows * (n_u + 1))
    below_sorted = np.cumsum(counts.reshape(n_rows, n_u + 1), axis=1)[:, :n_u]
    result = np.empty((n_rows, n_u), dtype=below_sorted.dtype)
    result[:, order] = below_sorted
    return result


def nanmean(x: np.ndarray, axis: int | None) -> np.ndarray:
    """np.nanmean without its overhead when nothing is missing (the usual case): then it is
    x.mean, which is this sum over the count (the same numbers, without mean's wrapper). A sum
    that is not NaN had no NaN in it."""
    total = np.add.reduce(x, axis=axis)
    if not np.isnan(total).any():
        result: np.ndarray = total / (x.size if axis is None else x.shape[axis])
        return result
    return np.asarray(np.nanmean(x, axis=axis))


def median_of_all(x: np.ndarray) -> float:
    """np.median(x), the same number, from a partition at one point instead of two (numpy's
    two-point partition of an even-sized array costs several times more)."""
    flat = x.ravel()
    half = flat.size // 2
    part = np.partition(flat, half)
    if np.isnan(part[-1]):  # numpy sorts NaN last; np.median is NaN then
        return math.nan
    if flat.size % 2:  # 0.0 + ...: as numpy's mean of the middle values, -0.0 becomes 0.0
        return float(0.0 + part[half])
    return float((0.0 + part[:half].max() + part[half]) / 2)


def nanmedian(x: np.ndarray, axis: int) -> np.ndarray:
    if not np.isnan(x).any():
        return column_medians(x) if axis == 0 else np.asarray(np.median(x, axis=axis))
    return np.asarray(np.nanmedian(x, axis=axis))


def column_medians(x: np.ndarray, *, finite: bool = False) -> np.ndarray:
    """np.median(x, axis=0) of a 2-D array, the same numbers, from a partition at one point
    (see median_of_all): numpy's median costs ten times more on a table of a few rows.
    finite: the caller knows x holds no NaN."""
    n = x.shape[0]
    half = n // 2
    part = np.partition(x, half, axis=0)
    # 0.0 + ...: numpy's mean of the middle values starts its sum at +0, so -0.0 becomes 0.0.
    result = 0.0 + part[half] if n % 2 else (0.0 + part[:half].max(axis=0) + part[half]) / 2
    if not finite:
        result[np.isnan(x).any(axis=0)] = np.nan  # np.median is NaN where a NaN is
    return result


def nanmax(x: np.ndarray) -> float:
    """np.nanmax(x): the reduction it runs (fmax passes over NaN), without its wrapper."""
    return float(np.fmax.reduce(x, axis=None))


def nanvar(x: np.ndarray) -> float:
    """np.nanvar(x) without its overhead when nothing is missing (then it is np.var)."""
    if not np.isnan(x).any():
        return float(x.var())
    return float(np.nanvar(x))
