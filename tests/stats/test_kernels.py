"""stats/_kernels.py: each kernel gives the same numbers as the plain numpy call it stands for,
on random tables with ties, NaN and -0.0 where numpy's answer depends on them."""

from __future__ import annotations

import numpy as np
import pytest

from stats import _kernels


def test_rows_searchsorted_is_a_binary_search_per_row_ties_included() -> None:
    rng = np.random.default_rng(3)
    for trial in range(60):
        rows, points = int(rng.integers(1, 50)), int(rng.integers(2, 402))
        weights = rng.random((rows, points)) * (rng.random((rows, points)) < 0.7)
        weights[:, 0] += 1e-300
        cdf = np.cumsum(weights, axis=1)
        cdf /= cdf[:, -1:]
        u = rng.random(int(rng.integers(1, 3000)))
        if trial % 3 == 0:  # u equal to values of the rows, and to each other
            u[: u.size // 2] = cdf[0, rng.integers(0, points, u.size // 2)]
            u[: u.size // 4] = u[0]
        expected = np.stack([np.searchsorted(row, u) for row in cdf])
        assert np.array_equal(_kernels.rows_searchsorted(cdf, u), expected)


def test_median_of_all_is_numpys_median() -> None:
    rng = np.random.default_rng(4)
    for n in (1, 2, 3, 4, 7, 100, 101, 96_000):
        x = rng.standard_normal(n)
        if n > 3:
            x[: n // 2] = x[0]  # ties at the middle
        assert _kernels.median_of_all(x) == np.median(x)
        assert _kernels.median_of_all(x.reshape(1, -1)) == np.median(x)
    with_nan = rng.standard_normal(10)
    with_nan[3] = np.nan
    assert np.isnan(_kernels.median_of_all(with_nan))


def _tables(seed: int) -> list[np.ndarray]:
    """Small and odd-shaped tables as the model sees them, with ties and a -0.0."""
    rng = np.random.default_rng(seed)
    out = []
    for rows, cols in ((1, 1), (1, 2), (3, 3), (4, 6), (7, 5), (48, 9), (2, 101)):
        x = rng.standard_normal((rows, cols))
        if cols > 2:
            x[:, 0] = x[:, 1]  # ties
            x[0, -1] = -0.0
        out.append(x)
    return out


@pytest.mark.filterwarnings("ignore:All-NaN slice")  # a one-row table with its NaN
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_column_row_and_table_medians_are_numpys_median(seed: int) -> None:
    for x in _tables(seed):
        assert np.array_equal(_kernels.column_medians(x.copy()), np.median(x, axis=0))
        assert np.array_equal(_kernels.row_medians(x), np.median(x, axis=1))
        assert np.array_equal(_kernels.table_medians(x), np.median(x, axis=1))
        y = x.copy()
        y[0, 0] = np.nan
        assert np.array_equal(_kernels.column_medians(y), np.median(y, axis=0), equal_nan=True)
        assert np.array_equal(
            _kernels.nanmedian(y, axis=0), np.nanmedian(y, axis=0), equal_nan=True
        )
        assert np.array_equal(_kernels.nanmedian(x, axis=1), np.median(x, axis=1))


def test_cell_medians_and_minima_are_each_cells_median_and_minimum() -> None:
    rng = np.random.default_rng(5)
    for size in (1, 3, 12, 40):
        cell = rng.integers(0, size, 200)
        values = rng.standard_normal(200).round(1)  # ties
        medians = _kernels.cell_medians(values, cell, size)
        minima = _kernels.cell_minima(values, cell, size)
        for c in range(size):
            inside = values[cell == c]
            if inside.size:
                assert medians[c] == np.median(inside)
                assert minima[c] == inside.min()
            else:
                assert np.isnan(medians[c]) and minima[c] == np.inf
    assert np.isnan(_kernels.cell_medians(np.array([]), np.array([], dtype=int), 2)).all()


def test_nan_reductions_are_numpys() -> None:
    rng = np.random.default_rng(6)
    for x in _tables(6):
        assert np.array_equal(_kernels.nanmean(x, axis=1), np.nanmean(x, axis=1))
        assert _kernels.nanmean(x, axis=None) == np.nanmean(x)
        assert _kernels.nanmax(x) == np.nanmax(x)
        assert _kernels.nanvar(x) == np.nanvar(x)
        y = x.copy()
        y.flat[rng.integers(0, y.size)] = np.nan
        if np.isfinite(y).any():
            assert np.allclose(_kernels.nanmean(y, axis=None), np.nanmean(y))
            assert _kernels.nanmax(y) == np.nanmax(y)
            assert _kernels.nanvar(y) == np.nanvar(y)


def test_run_means_are_each_runs_mean_over_its_processes() -> None:
    rng = np.random.default_rng(7)
    for k, p in ((2, 3), (6, 3), (5, 9)):
        run_of = np.repeat(np.arange(k), p)
        rng.shuffle(run_of)
        members = rng.standard_normal((4, k * p))
        blocks = np.argsort(run_of, kind="stable")
        expected = np.zeros_like(members)
        for r in range(k):
            cols = run_of == r
            expected[:, cols] = members[:, cols].mean(axis=1, keepdims=True)
        assert np.allclose(
            _kernels.run_means(members, blocks, run_of, k), expected, rtol=0, atol=1e-15
        )
