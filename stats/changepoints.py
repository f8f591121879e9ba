"""Change points in a baseline branch's history: E-Divisive means, as in Apache Otava/Hunter.

One configuration's history is one number per run, in run order: the run's location on the log
scale (`run_location`). `detect` finds step changes of it:

1. **Candidates (E-Divisive, Matteson and James 2014).** Within a segment, every split tau and
   every end kappa > tau give Q(tau, kappa) = n m / (n + m) * (2 mean|X - Y| - mean|X - X'| -
   mean|Y - Y'|) for X = the runs before tau and Y = the runs from tau up to kappa (the energy
   distance of the two sides, weighted by their sizes). The split with the largest Q, with at
   least `min_runs` runs on each side, is the segment's candidate.
2. **Significance.** The candidate is kept when a two-sided Mann-Whitney U test of X against Y
   gives p <= `p_value`, and the shift (the Hodges-Lehmann estimate, the median of all Y - X
   differences) is at least `min_change` and `min_signal` times the run-to-run noise (robust,
   from consecutive differences). Runs are not independent (a runner's speed wanders), so the
   final test (the merge step) divides the rank test's z-score by sqrt((1 + rho) / (1 - rho)),
   rho the lag-1 autocorrelation of the two sides' residuals: n such runs carry the evidence of
   about n (1 - rho) / (1 + rho) independent ones. Otava uses Student's t-test here; run
   locations have a heavy right tail (a run whose processes all met a noisy neighbour), and one
   such run in a short segment makes a t-test call a change where a rank test does not. A
   kept split divides its segment and both halves are searched again; then each new split is
   re-tested between its final neighbours and the weakest failing one dropped until all pass
   (Otava's merge step).
3. **Incremental use.** Change points reported before (`known`) are fixed boundaries and never
   reported again. A split fewer than SHORT runs after the change before it is tested against
   those runs and the segment before that change moved to their level, so that a change soon
   after another (or its revert) is placed once it has `min_runs` runs after it, as when both
   are found in one search. The runs after the newest known change are searched, and so,
   around that change, are the runs from the boundary before it, as if it were not known: a
   change it masked (placed before it, or found only as part of it) is found there, and a
   split within `min_runs` runs of it that moves the same way is that change again, not a new
   one (`_around_newest`). Older segments are not searched again: they were searched when they
   were the newest, and searching them again as old runs leave the window only finds what
   those runs' absence suggests. A new change `undoes` the change just
   before it when it moves the other way and the level after it is within `min_change` of the
   level before that earlier change (the interval of their ratio reaches that band).
   With known changes in the history, a split that passes the final test is tested again
   assuming at least the history's own autocorrelation (`_window_rho`): the lag-1
   autocorrelation of the residuals about the levels that a search of the history with
   nothing known finds, the new splits and the known change just before each (whose test
   takes it as real), taken WINDOW_RHO_ALLOWANCE / sqrt(n) low for n runs. The other known
   changes are left out of it on purpose: a season, a random
   walk or a trend's curve, reported piece by piece while each new piece looked like a level,
   is flat within each piece, and the short segments between those changes show no
   correlation, so every next swing would pass as a step; the history searched as a whole
   shows the correlation (it finds no level there). Where the known changes are real steps
   that search finds them too, and the residuals stay independent. The early test (4.)
   assumes it as well.

4. **Early reports.** In a history of fewer than EARLY_BELOW runs, where no rank test can reach
   `p_value`, a split is tested by Student's t of its shift on the sides' pooled standard
   deviation, corrected for their lag-1 autocorrelation and made EARLY_STRICTNESS times
   stricter; what it finds is reported with `early=True`.
5. **Drifts.** A change is a drift (with an `end`, the first run at its newest level) when a
   flat-ramp-flat fit explains its runs better than a step; a change the same way soon after
   one `continues` it when one ramp fits both, so a gradual change is one report, not a
   staircase, and the caller updates the change it reported before. A split whose runs read
   as a drift is held to the floor by the drift's climb so far, not the step's shift (about
   half of it while the drift is still going); a drift needs `min_runs` runs of a level
   before it, as a step does: where the runs have moved since the segment began (the
   history's start, or a known change the same way), there is no level that changed, and
   nothing is reported.

NaN in the history is a gap, skipped and placed back; a long segment is searched in
overlapping blocks of BLOCK runs, and shifts use at most NEAR runs a side, so time and memory
grow linearly with the history.

Everything is deterministic: the same history and known change points give the same answer.
See docs/statistics.md#change-points for the parameters and the measured quality.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from scipy.special import ndtri

from stats import bootstrap
from stats._validate import as_groups, check_fraction

INTERVAL = 0.90  # the ratio's interval, as for comparisons
EXACT_UP_TO = 20  # the Mann-Whitney test is exact when a side has at most this many runs
BLOCK = 256  # a longer segment's candidates are searched in overlapping blocks of this many runs
TRIED = 4  # ... and the best of at most this many blocks' candidates tested, the largest Q first
NEAR = 250  # a change's shift and test use at most this many runs on each side of it
LARGEST_LOG = 709.0  # exp of more overflows a float: ratios saturate there
MAX_RHO = 0.95  # the largest lag-1 autocorrelation assumed: beyond it runs carry no evidence
SHORT = 15  # fewer runs since the previous change: the test also uses the runs before it
STEADY_FROM = 5  # a longer side of fewer runs cannot tell a burst from a step
SPREAD_LIMIT = 3.0  # a short side's spread beyond this many times the other's is a burst
RHO_BIAS = 11.0  # rho is taken (RHO_BIAS / n)^2 below its estimate from n runs (0.2 at 25)
DRIFT_GAP = 30  # a change this many runs or fewer after the end of one the same way may continue it
DRIFT_SLACK = 12.0  # ... when one ramp fits within this x the noise variance of the two as reported
DRIFT_NEAR = 60  # a drift's fits use at most this many runs after the change (twice before it)
DRIFT_LEVEL_RUNS = 3  # ... and once this many runs hold its new level
DRIFT_WIDTH = 4  # a change on its own is a drift only over at least this many runs
DRIFT_PENALTY = 6.0  # ... and when a ramp fits better than a step by this x the noise variance
EARLY_BELOW = 16  # runs: a shorter history may be reported early (see _Test.early)
EARLY_STRICTNESS = 10.0  # an early p-value is this many times the t-test's (see _early_p_value)
RAMP_CHECK_RHO = 0.5  # residuals this alike in a row: is it a drift (see _autocorrelation)?
MIN_RUNS_FOR_RHO = 5  # fewer runs a side on average: autocorrelation is not estimated (0)
WINDOW_RHO_ALLOWANCE = 2.0  # the window's own rho is taken this / sqrt(n) low (_window_rho)


@dataclass(frozen=True)
class KnownChange:
    """A change point reported earlier, placed in the history passed to `detect`."""

    after: int  # index of the first run after it; <= 0 when it lies at or before the first run
    ratio: float  # as reported: later/earlier typical time, with its interval
    low: float
    high: float
    key: Any = None  # the caller's own handle (e.g. a database id), for `undoes`
    end: int | None = None  # a drift's first run at its new level; None for a step


@dataclass(frozen=True)
class ChangePoint:
    """A new step change: the typical time moved by `ratio` between runs `before` and `after`."""

    before: int  # index of the last run before the change (after - 1)
    after: int  # index of the first run after it
    ratio: float  # later/earlier typical time: exp of the Hodges-Lehmann shift of log-times
    low: float  # 90% interval of the ratio (Moses' interval for the Hodges-Lehmann shift)
    high: float
    p_value: float  # two-sided Mann-Whitney U test, runs before against runs after
    runs_before: int  # runs in the segment before (back to the previous change or the start)
    runs_after: int  # runs in the segment after (up to the next change or the end)
    undoes: KnownChange | ChangePoint | None  # the earlier change this one takes back
    early: bool = False  # too few runs for the rank test: found by the noise-scaled test
    # A drift: the level moves over runs `after` to `end - 1` and holds from `end` on; `ratio`
    # is the total change. None for a step.
    end: int | None = None
    # The known change this drift extends (the same drift, reported before and still going):
    # the caller updates that one instead of storing a new change.
    continues: KnownChange | None = None


def run_location(groups: Any) -> float:
    """One run's location: the natural log of its typical time, from its sample times (one
    sequence per worker process, or one sequence).

    Each process's location is the band mean of its log-times (the 10th to the 40th
    percentile, the verdict's estimator); the run's is the same low band over those process
    locations (with 3 processes: 0.78 x the fastest + 0.22 x the middle one). Interference only
    ever adds time, so a process that met a noisy neighbour barely moves it."""
    per_process = [
        bootstrap.point_location([np.log(g)], bootstrap.LOW) for g in as_groups(groups, "groups")
    ]
    return bootstrap.point_location([np.array(per_process)], bootstrap.LOW)


@dataclass(frozen=True)
class _Shift:
    """How the runs after a split differ from those before it."""

    p_value: float
    log_ratio: float
    low: float
    high: float


def detect(
    history: Sequence[float] | np.ndarray,
    *,
    known: Sequence[KnownChange] = (),
    p_value: float = 0.0005,
    min_runs: int = 3,
    min_change: float = 0.02,
    min_signal: float = 2.0,
) -> tuple[ChangePoint, ...]:
    """The change points in `history` that are not among `known`, in run order.

    history: one configuration's run locations (`run_location`) on a baseline branch, oldest
        first; a window of the newest 100-200 runs is plenty.
    known: the change points reported for it before, in run order, with indices into this
        history; include the newest one before the window (after <= 0) so that a new change
        can undo it.
    p_value: the significance level of the Mann-Whitney U test.
    min_runs: the fewest runs on each side of a change point: a change is reported once
        `min_runs` runs after it are stored, and never within `min_runs` of a known one.
    min_change: the smallest step reported (2%), and the margin within which a later step
        counts as undoing an earlier one.
    min_signal: the smallest step reported in units of the history's run-to-run noise (a
        robust standard deviation of consecutive runs' differences).
    """
    y = _locations(history)
    known = _check_known(known, len(y))
    p_value = check_fraction(p_value, "p_value", low=0.0, high=1.0)
    min_change = check_fraction(min_change, "min_change", low=0.0, high=1.0)
    if not (isinstance(min_signal, (int, float)) and 0 <= min_signal < math.inf):
        raise ValueError(f"min_signal must be a finite number >= 0, got {min_signal!r}")
    if isinstance(min_runs, bool) or not isinstance(min_runs, (int, np.integer)) or min_runs < 2:
        raise ValueError(f"min_runs must be an integer >= 2, got {min_runs!r}")
    # NaN is a gap (a run without this configuration's location): the search runs over the
    # runs that have one, and what it finds is placed back on the history's own indices.
    present = np.flatnonzero(~np.isnan(y))
    y, given, known = y[present], known, [_compact(k, present) for k in known]
    # Locations are logs (|y| < 750), but a caller may pass raw values: scaled so that no
    # difference or sum of differences overflows; the ranks, splits and tests are the same.
    scale = max(1.0, float(np.max(np.abs(y)))) if len(y) and np.max(np.abs(y)) > 1e6 else 1.0
    y, margin = y / scale, math.log1p(min_change) / scale
    # The smallest step reported is also `min_signal` times the run-to-run noise: the split is
    # the best of hundreds, and under noise well above `min_change` the rank test's p-value of
    # the best split alone would report several false changes per 1,000 runs.
    noise = _noise(y)
    test = _Test(p_value, max(margin, min_signal * noise), margin, noise, int(min_runs))
    inside = sorted({b for k in known for b in _bounds(k) if 0 < b < len(y)})
    found = _divide(y, [0, *inside], int(min_runs), test)
    found = _merge(y, inside, _around_newest(y, known, inside, found, int(min_runs), test), test)
    if inside and found:
        # After known changes, what passes is tested again assuming at least the noise's
        # autocorrelation about the window's own levels (the known changes left out: a season
        # or a walk reported piece by piece looks flat within each piece). It only makes the
        # test stricter, so the window is searched for its levels only when something passed.
        found = _merge(y, inside, found, test, _own_levels(y, int(min_runs), test))
    originals = {id(k): g for k, g in zip(known, given, strict=True)}
    return _expand(_report(y, known, found, test, scale), present, originals)


@dataclass(frozen=True)
class _Test:
    """When a split is a change: the rank test's p <= p_value (the early test's where the rank
    test cannot reach it) and a shift of at least `floor` (log scale)."""

    p_value: float
    floor: float
    margin: float  # min_change on the (scaled) log scale: the band for `undoes`
    noise: float  # the history's run-to-run noise (`_noise`)
    min_runs: int  # the fewest runs of a level on each side of a change (a drift's too)

    def early(self, before: np.ndarray, after: np.ndarray) -> bool:
        """Whether the sides are a short history (fewer than EARLY_BELOW runs) in which the
        rank test cannot reach p_value. Longer ones wait the run or two the rank test needs
        (3 runs after 23 cannot reach 5e-4, 4 after 22 can)."""
        n1, n2 = min(len(before), NEAR), min(len(after), NEAR)
        return n1 + n2 < EARLY_BELOW and 2 / math.comb(n1 + n2, min(n1, n2)) > self.p_value


def _noise(y: np.ndarray) -> float:
    """The run-to-run noise: a robust standard deviation of one run, the normal-consistent
    median absolute deviation of consecutive differences over sqrt 2 (a step moves one
    difference and a slowed run two, which the median does not see)."""
    if len(y) < 3:
        return 0.0
    d = np.diff(y)
    return float(1.4826 * np.median(np.abs(d - np.median(d))) / math.sqrt(2))


def _compact(k: KnownChange, present: np.ndarray) -> KnownChange:
    """A known change's place among the runs that have a location."""
    end = None if k.end is None else int(np.searchsorted(present, k.end)) if k.end > 0 else k.end
    after = int(np.searchsorted(present, k.after)) if k.after > 0 else k.after
    return replace(k, after=after, end=end)


def _bounds(k: KnownChange) -> tuple[int, ...]:
    """The boundaries a known change fixes: its first run after, and a drift's end."""
    return (k.after,) if k.end is None else (k.after, k.end)


def _expand(
    found: tuple[ChangePoint, ...], present: np.ndarray, originals: dict[int, KnownChange]
) -> tuple[ChangePoint, ...]:
    """Change points found among the runs with a location, on the history's indices; what one
    undoes is the caller's own KnownChange (`originals`: by id of its compacted copy) or the
    placed copy of a change found with it."""
    placed: dict[int, KnownChange | ChangePoint] = dict(originals)
    for cp in found:
        undoes = placed.get(id(cp.undoes), cp.undoes)
        continues = originals.get(id(cp.continues), cp.continues)
        after, before = int(present[cp.after]), int(present[cp.before])
        end = None if cp.end is None else int(present[cp.end]) if cp.end < len(present) else None
        placed[id(cp)] = replace(
            cp,
            before=before,
            after=after,
            end=end,
            undoes=undoes,
            continues=continues,
        )
    return tuple(placed[id(cp)] for cp in found)  # type: ignore[misc]


def _locations(history: Sequence[float] | np.ndarray) -> np.ndarray:
    if isinstance(history, (str, bytes)) or not isinstance(history, (Sequence, np.ndarray)):
        kind = type(history).__name__
        raise TypeError(f"history must be a sequence of run locations, got {kind}")
    try:
        y = np.asarray(history, dtype=np.float64)
    except (TypeError, ValueError):
        raise TypeError("history must contain only numbers (run locations)") from None
    if y.ndim != 1:
        raise ValueError(f"history must be one-dimensional, got shape {y.shape}")
    bad = np.flatnonzero(np.isinf(y))
    if bad.size:
        raise ValueError(
            f"history[{bad[0]}] is {y[bad[0]]}; run locations must be finite (NaN for a gap)"
        )
    return y


def _check_known(known: Sequence[KnownChange], n: int) -> list[KnownChange]:
    if isinstance(known, (str, bytes)) or not isinstance(known, Sequence):
        raise TypeError(f"known must be a sequence of KnownChange, got {type(known).__name__}")
    for i, k in enumerate(known):
        if not isinstance(k, KnownChange):
            raise TypeError(f"known[{i}] must be a KnownChange, got {type(k).__name__}")
        if isinstance(k.after, bool) or not isinstance(k.after, (int, np.integer)):
            raise TypeError(f"known[{i}].after must be an integer run index")
        if k.after >= n:
            raise ValueError(
                f"known[{i}].after is {k.after}, past the history's last run ({n - 1}); "
                "pass a history that contains it"
            )
        if not all(math.isfinite(v) and v > 0 for v in (k.ratio, k.low, k.high)):
            raise ValueError(f"known[{i}] needs a finite positive ratio, low and high")
        if i and k.after < known[i - 1].after:
            raise ValueError("known must be in run order (non-decreasing after)")
        if k.end is not None and (
            isinstance(k.end, bool) or not isinstance(k.end, (int, np.integer)) or k.end <= k.after
        ):
            raise ValueError(f"known[{i}].end must be a run index after its `after`, or None")
    return list(known)


# ---------------------------------------------------------------- the split step


def _divide(y: np.ndarray, edges: list[int], min_runs: int, test: _Test) -> list[int]:
    """Binary segmentation of the runs after the newest of `edges` (known boundaries, with 0):
    split a segment at its E-Divisive candidate while the split is significant; returns the new
    boundaries (indices of a first run after)."""
    start = edges[-1]
    pending = [(edges[-2] if len(edges) > 1 else start, start, len(y))]
    found: list[int] = []
    while pending:
        previous, lo, hi = pending.pop()
        # A segment longer than BLOCK has one candidate per block: the largest Q first, the
        # next (up to TRIED) when it fails (the largest Q of a long, many-stepped segment can
        # be a weak split spanning several steps while a block holds a clear one).
        for tau, kappa, _ in _candidates(y[lo:hi], min_runs)[:TRIED]:
            # Test the candidate's own two sides: for a change that is later taken back (a
            # spike), the runs after the end kappa would hide it from a test against the whole
            # segment.
            before = _before_side(y[previous:lo], y[lo : lo + tau])
            # Not corrected for autocorrelation here: a side may still hold another step, which
            # would look like strong autocorrelation; `_merge` tests each split with the
            # correction once its neighbours are final (sides without other steps).
            if _significance(before, y[lo + tau : lo + kappa], test, final=False) <= 1.0:
                found.append(lo + tau)
                # A split found in this search is not a known change: the segments around it
                # are tested on their own runs (`_merge` re-tests them all).
                pending += [(lo, lo, lo + tau), (lo + tau, lo + tau, hi)]
                break
    return sorted(found)


def _around_newest(
    y: np.ndarray,
    known: list[KnownChange],
    inside: list[int],
    found: list[int],
    min_runs: int,
    test: _Test,
) -> list[int]:
    """`found` and the splits of a search again around the newest known change: from the
    boundary before it to the newest run, as if it were not known. A change that came soon
    before or after it (masked by it: its own segment was too short to test, or the newest
    change was placed between the two) is found there; the search finds the newest known
    change itself again, and a split within `min_runs` runs of it that moves the same way is
    that change, not a new one. A split within `min_runs` of any other known boundary or of a
    split in `found` is dropped; `_merge` then tests what is left with every known change
    fixed. Only a step is searched around (a drift's runs are its own ramp)."""
    steps = [k for k in known if 0 < k.after < len(y)]
    if not steps or steps[-1].end is not None:
        return found
    newest = steps[-1]
    edges = [0, *[b for b in inside if b < newest.after]]
    splits = _divide(y, edges, min_runs, test)
    bounds = sorted({edges[-1], len(y), *splits})
    taken = [b for b in inside if b != newest.after] + found
    for cut in splits:
        i = bounds.index(cut)
        shift = float(np.median(y[cut : bounds[i + 1]]) - np.median(y[bounds[i - 1] : cut]))
        same = abs(cut - newest.after) < min_runs and (shift > 0) == (newest.ratio > 1)
        if not same and all(abs(cut - b) >= min_runs for b in [newest.after, *taken]):
            taken.append(cut)
            found = [*found, cut]
    return sorted(found)


def _before_side(earlier: np.ndarray, before: np.ndarray) -> np.ndarray:
    """The runs a split is tested against: the runs since the change before it, and when those
    are few and that change is a known one (a change soon after a reported one, or its revert),
    also the segment before that change moved to their level (by the Hodges-Lehmann shift
    between the two). Without them a second change 5 runs after a first cannot reach the
    test's level until many runs later; with them it is placed as soon as it has `min_runs`
    runs, as when both are found in one search."""
    if len(before) >= SHORT or len(earlier) < SHORT:
        return before
    earlier = earlier[-NEAR:]
    level = float(np.median(before[:, None] - earlier[None, :]))
    return np.concatenate([earlier + level, before])


def _candidate(z: np.ndarray, min_runs: int) -> tuple[int, int, float] | None:
    """The largest E-Divisive statistic Q(tau, kappa) with at least `min_runs` runs in X =
    z[:tau] and in Y = z[tau:kappa], as (tau, kappa, Q); None if no split fits. In a segment
    longer than BLOCK, X and Y lie within one block of BLOCK runs."""
    found = _candidates(z, min_runs)
    return found[0] if found else None


def _candidates(z: np.ndarray, min_runs: int) -> list[tuple[int, int, float]]:
    """`_candidate`'s candidate of each block of a segment longer than BLOCK, the largest Q
    first (one for a shorter segment; none if no split fits)."""
    m = len(z)
    if m < 2 * min_runs:
        return []
    if m > BLOCK:
        # Time and memory grow with the square of a block, so a long segment is searched in
        # blocks that overlap by half: sides spanning up to BLOCK / 2 runs together always lie
        # inside one of them (longer ones often do), and the largest Q of all is the candidate.
        starts = sorted({*range(0, m - BLOCK, BLOCK // 2), m - BLOCK})
        tops = [(b, _candidates(z[b : b + BLOCK], min_runs)) for b in starts]
        shifted = [(b + f[0][0], b + f[0][1], f[0][2]) for b, f in tops if f]
        return sorted(shifted, key=lambda c: -c[2])
    # c[a, b] = sum of |z[i] - z[j]| over i < a, j < b: every block sum below in O(1).
    c = np.zeros((m + 1, m + 1))
    c[1:, 1:] = np.abs(z[:, None] - z[None, :]).cumsum(axis=0).cumsum(axis=1)
    grid = _grid(m, min_runs)
    flat = c.ravel()
    c_tt, c_tk, c_kk = flat[grid.tt], flat[grid.tk], flat[grid.kk]
    q = grid.between * (c_tk - c_tt) - grid.within_x * c_tt
    q -= grid.within_y * (c_kk - 2 * c_tk + c_tt)
    best = int(np.argmax(q))
    return [(int(grid.tau[best]), int(grid.kappa[best]), float(q[best]))]


@dataclass(frozen=True)
class _Grid:
    """Every (tau, kappa) pair of a segment of m runs with >= min_runs runs in X and in Y, as
    flat indices into the (m + 1, m + 1) block-sum matrix and the coefficients of Q."""

    tau: np.ndarray
    kappa: np.ndarray
    tt: np.ndarray
    tk: np.ndarray
    kk: np.ndarray
    between: np.ndarray  # n m / (n + m) * 2 / (n m)
    within_x: np.ndarray  # n m / (n + m) / (n (n - 1)): the block sum counts each pair twice
    within_y: np.ndarray


@functools.lru_cache(maxsize=8)
def _grid(m: int, min_runs: int) -> _Grid:
    tau, kappa = np.meshgrid(np.arange(m + 1), np.arange(m + 1), indexing="ij")
    keep = (tau >= min_runs) & (kappa - tau >= min_runs)
    tau, kappa = tau[keep], kappa[keep]
    n_x, n_y = tau.astype(np.float64), (kappa - tau).astype(np.float64)
    size = n_x * n_y / (n_x + n_y)
    return _Grid(
        tau=tau,
        kappa=kappa,
        tt=tau * (m + 1) + tau,
        tk=tau * (m + 1) + kappa,
        kk=kappa * (m + 1) + kappa,
        between=size * 2 / (n_x * n_y),
        within_x=size / (n_x * (n_x - 1)),
        within_y=size / (n_y * (n_y - 1)),
    )


def _shift(before: np.ndarray, after: np.ndarray, scale: float) -> _Shift:
    """Hodges-Lehmann shift (log scale, times `scale`) with Moses' 90% interval, and the
    Mann-Whitney U test's p-value."""
    log_ratio, low, high = _hodges_lehmann(before, after)
    return _Shift(_p_value(before, after), log_ratio * scale, low * scale, high * scale)


def _exp(log_ratio: float) -> float:
    """A ratio from its log, saturated at the largest and smallest floats (a step of thousands
    on the log scale is a ratio no float holds; it is still reported, as the largest one)."""
    return math.exp(min(max(log_ratio, -LARGEST_LOG), LARGEST_LOG))


def _near(before: np.ndarray, after: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The runs next to a change that its shift and test use: at most NEAR on each side, so
    that the all-pairs differences stay bounded (NEAR^2) however long the segments are."""
    return before[-NEAR:], after[:NEAR]


def _hodges_lehmann(before: np.ndarray, after: np.ndarray) -> tuple[float, float, float]:
    before, after = _near(before, after)
    diffs = np.sort((after[:, None] - before[None, :]).ravel())
    n1, n2 = len(before), len(after)
    # Moses: the interval between the k-th smallest and the k-th largest difference, k from
    # the normal approximation of U's null distribution.
    sd = math.sqrt(n1 * n2 * (n1 + n2 + 1) / 12)
    k = int(max(1, math.floor(n1 * n2 / 2 - ndtri(0.5 + INTERVAL / 2) * sd)))
    return float(np.median(diffs)), float(diffs[k - 1]), float(diffs[-k])


def _p_value(before: np.ndarray, after: np.ndarray, prior: float = 0.0) -> float:
    """Two-sided Mann-Whitney U test, corrected for autocorrelated runs: the rank test's z-score
    (from its exact or approximate p-value) is divided by the square root of the variance
    inflation (1 + rho) / (1 - rho) of an AR(1) series, rho estimated from the two sides'
    residuals (`_autocorrelation`). A runner whose speed wanders (thermal state, a neighbour's
    load) makes consecutive runs alike: n such runs carry the evidence of about
    n (1 - rho) / (1 + rho) independent ones, and the uncorrected test calls wander a change."""
    before, after = _near(before, after)
    p = _rank_p_value(before, after)
    inflation = _inflation(before, after, prior)
    if inflation <= 1.0 or p >= 1.0:
        return p
    from scipy.stats import norm

    return float(min(1.0, 2 * norm.sf(norm.isf(p / 2) / math.sqrt(inflation))))


def _rank_p_value(before: np.ndarray, after: np.ndarray) -> float:
    """Two-sided Mann-Whitney U test: exact when a side has at most EXACT_UP_TO runs, where the
    normal approximation is far off (3 runs above 197 others: exactly 2 / C(200, 3) = 1.5e-6,
    3e-3 by the approximation), else the normal approximation, which is close there and costs
    nothing to set up (scipy's exact distribution for 300 against 300 runs takes tens of
    seconds to build)."""
    if np.ptp(np.concatenate([before, after])) == 0:
        return 1.0
    # Here, not at the top: scipy.stats takes most of a second to import, which every process
    # that imports the statistics (each server start, each `rnx` command) would pay.
    from scipy.stats import mannwhitneyu

    method = "exact" if min(len(before), len(after)) <= EXACT_UP_TO else "asymptotic"
    return float(mannwhitneyu(after, before, alternative="two-sided", method=method).pvalue)


def _autocorrelation(before: np.ndarray, after: np.ndarray) -> float:
    """Lag-1 autocorrelation rho of the runs: their residuals about their own side's median,
    pairs within one side only (the step between the sides is not noise), each clipped at 3
    robust standard deviations so that a few slowed runs do not decide it. Taken
    (RHO_BIAS / n)^2 low (n runs in all): a short history of independent runs often shows a rho
    of 0.2 by chance, which would cost it its changes. Clipped to [0, MAX_RHO]."""
    sides = [side for side in (before, after) if len(side) > 2]
    n = sum(len(side) for side in sides)
    if n < 2 * MIN_RUNS_FOR_RHO:
        return 0.0
    rho = _lag1([side - np.median(side) for side in sides])
    if rho > RAMP_CHECK_RHO and len(before) > 2 and len(after) > 2:
        # Residuals alike in a row: wander, or a drift (its runs about each side's median are
        # alike in a row too, and the correction would dismiss it).
        # About the best ramp through both sides a drift leaves noise, wander mostly not (a
        # ramp also fits some of it: only residuals near independent count as a drift's).
        z = np.concatenate([before[-DRIFT_NEAR:], after[:DRIFT_NEAR]])
        ramp = _best_ramp(z, 2)
        about_ramp = 1.0 if ramp is None else _lag1([_ramp_residuals(z, ramp)])
        if about_ramp < RAMP_CHECK_RHO / 2:
            rho = about_ramp
    rho -= (RHO_BIAS / n) ** 2
    return min(MAX_RHO, max(0.0, rho))


def _own_levels(y: np.ndarray, min_runs: int, test: _Test) -> tuple[list[int], set[int]]:
    """The window's own levels: the boundaries (and drifts' ends) that a search of it with no
    known change finds, and the first runs of those drifts (`_report`)."""
    found = _merge(y, [], _divide(y, [0], min_runs, test), test)
    changes = _report(y, [], found, test, 1.0)
    bounds = {b for cp in changes for b in (cp.after, cp.end) if b is not None and b < len(y)}
    return [0, len(y), *sorted(bounds)], {cp.after for cp in changes if cp.end is not None}


def _window_rho(y: np.ndarray, edges: list[int], ramps: set[int]) -> float:
    """The lag-1 autocorrelation of the window's noise about its own levels: the residuals of
    each segment between `edges` about its median (`_lag1`; drifts' ramps and segments of 2
    runs or fewer left out), taken WINDOW_RHO_ALLOWANCE / sqrt(n) low for n runs (independent
    runs exceed that about 1 time in 40, and then by little); 0 below 0."""
    parts = [
        y[lo:hi] - np.median(y[lo:hi])
        for lo, hi in zip(edges[:-1], edges[1:], strict=True)
        if hi - lo > 2 and lo not in ramps
    ]
    n = sum(len(p) for p in parts)
    if n < 2 * MIN_RUNS_FOR_RHO:
        return 0.0
    return max(0.0, _lag1(parts) - WINDOW_RHO_ALLOWANCE / math.sqrt(n))


def _lag1(parts: list[np.ndarray]) -> float:
    """Lag-1 correlation of zero-centred parts, pairs within a part, each value clipped at 3
    robust standard deviations (of all parts together)."""
    pooled = np.concatenate(parts)
    centre = float(np.median(pooled))
    spread = 1.4826 * float(np.median(np.abs(pooled - centre)))
    if spread == 0:
        return 0.0
    clipped = [np.clip(p - centre, -3 * spread, 3 * spread) for p in parts]
    total = sum(float(np.dot(p, p)) for p in clipped)
    return sum(float(np.dot(p[1:], p[:-1])) for p in clipped) / total if total > 0 else 0.0


def _inflation(before: np.ndarray, after: np.ndarray, prior: float = 0.0) -> float:
    """The variance inflation of a mean of AR(1) runs, (1 + rho) / (1 - rho), rho at least
    `prior`."""
    rho = max(_autocorrelation(before, after), min(MAX_RHO, prior))
    return (1 + rho) / (1 - rho)


def _significance(
    before: np.ndarray, after: np.ndarray, test: _Test, *, final: bool = True, prior: float = 0.0
) -> float:
    """The split's p-value when it passes `test`, else 2.0 for a shift too small (the weakest
    of all) or the p-value plus 1 (both fail). `corrected`: for autocorrelation (`_p_value`),
    else the plain rank test."""
    before, after = _near(before, after)
    shift = float(np.median(after[:, None] - before[None, :]))
    if abs(shift) < test.floor and abs(_drift_size(before, after, test)) < test.floor:
        return 2.0  # too small to matter, as a step and as a drift: no test needed
    if not _steady(before, after):
        return 2.0  # a burst of disturbed runs, not a new level: no test needed
    if test.early(before, after):
        p = _early_p_value(before, after, prior)
    else:
        p = _p_value(before, after, prior) if final else _rank_p_value(before, after)
    return p if p <= test.p_value else 1.0 + p


def _drift_size(before: np.ndarray, after: np.ndarray, test: _Test) -> float:
    """How far the runs around a split have climbed when they read as a drift
    (`_lone_ramp`): the Hodges-Lehmann shift from the level before the ramp to its newest
    level (the runs from its end, or the newest `min_runs` while it is still going), when
    the rank test finds those two apart at `test.p_value`; 0.0 when a step fits as well or
    they are not apart. A drift still going is held to `test.floor` by this: the step's
    shift, the median of after - before differences, sees about half of what a ramp has
    climbed (its after side holds the ramp's early runs), and a 10% ramp over 40 runs at 1%
    noise stayed below 2x the noise for 15 runs while the rank test's p was below 1e-5. The
    newest level's own test keeps the best of many ramps through noise from passing on a few
    runs' chance excursion."""
    runs = np.concatenate([before[-DRIFT_NEAR:], after[:DRIFT_NEAR]])
    ramp = _lone_ramp(_median3(runs), len(before[-DRIFT_NEAR:]), test)
    if ramp is None:
        return 0.0
    level, newest = runs[: ramp.start], runs[min(ramp.end, len(runs) - test.min_runs) :]
    if _rank_p_value(level, newest) > test.p_value:
        return 0.0
    return _hodges_lehmann(level, newest)[0]


def _early_p_value(before: np.ndarray, after: np.ndarray, prior: float = 0.0) -> float:
    """The evidence of a short history, where no rank test reaches the level (3 runs above 10
    are at best p = 2 / C(13, 3) = 0.007): Student's t of the Hodges-Lehmann shift against the
    sides' pooled standard deviation (each about its own median, n - 2 degrees of freedom),
    times EARLY_STRICTNESS. The pooled standard deviation, not the consecutive differences'
    (which correlated runs make small), keeps it from calling a wander a change; a slowed run
    only makes it larger; the score is divided by the AR(1) variance inflation, as in
    `_p_value` (rho at least `prior`, as there)."""
    from scipy.stats import t as student

    n1, n2 = len(before), len(after)
    residuals = np.concatenate([before - np.median(before), after - np.median(after)])
    sd = math.sqrt(float(np.dot(residuals, residuals)) / max(1, n1 + n2 - 2))
    shift = float(np.median(after[:, None] - before[None, :]))
    if sd == 0:
        return 0.0 if shift else 1.0
    # Correlated runs: the lag-1 autocorrelation of the residuals as measured, without the
    # long test's allowance for a short history's chance correlation (a false early report
    # costs more than a real change found a few runs later).
    rho = _lag1([before - np.median(before), after - np.median(after)])
    rho = min(MAX_RHO, max(0.0, rho, prior))
    score = abs(shift) / (sd * math.sqrt((1 / n1 + 1 / n2) * (1 + rho) / (1 - rho)))
    return float(min(1.0, EARLY_STRICTNESS * 2 * student.sf(score, n1 + n2 - 2)))


def _steady(before: np.ndarray, after: np.ndarray) -> bool:
    """Whether the shorter side (when short) is as steady as the longer one: its spread at most
    SPREAD_LIMIT times the longer side's. A new level keeps the run-to-run noise; a burst
    of runs that each met a different neighbour (slowed by 10-30%, at random) does not, and the
    rank test alone calls three such runs in a row a step (and then its undo)."""
    short, long = sorted((before, after), key=len)
    if len(short) >= SHORT or len(long) < STEADY_FROM:
        return True
    # The short side's plain standard deviation (the outlying runs are what is looked for):
    # for steady runs its square over the noise's is chi-square / (m - 1), above 3^2 for 3
    # runs about once in 8,000 (exp(-9)).
    limit = SPREAD_LIMIT * max(_spread(long), _noise(long))
    return float(np.std(short - np.median(short), ddof=1)) <= limit  # exact 0 when constant


def _spread(z: np.ndarray) -> float:
    """Normal-consistent median absolute deviation about the median."""
    return float(1.4826 * np.median(np.abs(z - np.median(z))))


# ---------------------------------------------------------------- the merge step


def _merge(
    y: np.ndarray,
    fixed: list[int],
    found: list[int],
    test: _Test,
    own: tuple[list[int], set[int]] | None = None,
) -> list[int]:
    """Re-test each new boundary between its final neighbours; drop the weakest failing one
    (the largest p-value) and repeat until every new boundary passes. With `own` (the window's
    own levels, `_own_levels`), each test assumes at least the window's autocorrelation about
    those levels, the new boundaries and the boundary just before each (`_window_rho`)."""
    found = list(found)
    while found:
        edges = sorted([0, len(y), *fixed, *found])
        # The known change just before each new split is a level of it too: the split's test
        # takes it as real (its sides begin there).
        leaning = {edges[edges.index(cut) - 1] for cut in found}
        prior = 0.0 if own is None else _window_rho(y, sorted({*own[0], *found, *leaning}), own[1])
        scores = []
        for cut in found:
            i = edges.index(cut)
            known_before = i >= 2 and edges[i - 1] in fixed
            earlier = y[edges[i - 2] : edges[i - 1]] if known_before else y[:0]
            before = _before_side(earlier, y[edges[i - 1] : cut])
            after = y[cut : edges[i + 1]]
            scores.append((_significance(before, after, test, prior=prior), cut))
        weakest, cut = max(scores)
        if weakest <= 1.0:
            break
        found.remove(cut)
    return found


# ---------------------------------------------------------------- what is reported


def _report(
    y: np.ndarray, known: list[KnownChange], found: list[int], test: _Test, scale: float
) -> tuple[ChangePoint, ...]:
    """The new change points, each measured between its neighbours, with what it undoes and
    whether it is early (too few runs for the rank test); `scale` is what y was divided by
    (ratios are of the caller's values)."""
    margin = test.margin
    inside = {k.after: k for k in known if 0 < k.after < len(y)}
    ends = {k.end for k in known if k.end is not None and 0 < k.end < len(y)}
    outside = [k for k in known if k.after <= 0]
    edges = sorted({0, len(y), *inside, *ends, *found})
    previous: KnownChange | ChangePoint | None = outside[-1] if outside else None
    reported: list[ChangePoint] = []
    i = 0
    while i < len(edges) - 2:
        i += 1
        cut = edges[i]
        if cut in inside:
            previous = inside[cut]
            continue
        if cut in ends:
            continue  # a known drift's end: the drift is still the previous change
        before, after = y[edges[i - 1] : cut], y[cut : edges[i + 1]]
        shift = _shift(before, after, scale)
        # Tested as `_merge` tested it: after a known change, with the segment before it.
        tested = (
            _before_side(y[edges[i - 2] : edges[i - 1]], before)
            if i >= 2 and edges[i - 1] in inside
            else before
        )
        early = test.early(tested, after)
        if early:
            shift = replace(shift, p_value=_early_p_value(*_near(tested, after)))
        # The level before the previous change, when this history holds it.
        level_before = y[edges[i - 2] : edges[i - 1]] if i >= 2 else y[:0]
        undoes = previous is not None and _undoes(
            shift, previous, level_before, y[cut : edges[i + 1]], margin, scale
        )
        change = ChangePoint(
            before=cut - 1,
            after=cut,
            ratio=_exp(shift.log_ratio),
            low=_exp(shift.low),
            high=_exp(shift.high),
            p_value=shift.p_value,
            runs_before=cut - edges[i - 1],
            runs_after=edges[i + 1] - cut,
            undoes=previous if undoes else None,
            early=early,
        )
        drift = _as_drift(y, edges, i, change, previous, test, scale)
        if isinstance(drift, _NoLevel):
            # Not a change: the runs have moved since the segment began. The segments on
            # either side are one (the next change is measured from the one before).
            edges.pop(i)
            i -= 1
            continue
        if drift is not None:
            change, extends = drift
            if extends and isinstance(previous, ChangePoint):
                reported.remove(previous)  # one drift, found as steps in one look
        reported.append(change)
        previous = change
    return tuple(reported)


# ---------------------------------------------------------------- drifts


@dataclass(frozen=True)
class _Ramp:
    """The best flat-ramp-flat fit of a stretch of runs: level until `start`, a straight line
    from there to `end`, the new level from `end` on; `sse` its residual sum of squares."""

    sse: float
    start: int
    end: int


def _ramp_shape(m: int, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Each ramp's shape over m runs, centred: 0 before `start`, rising in a straight line,
    1 from `end` on (end == start: a step)."""
    t = np.arange(m)[None, :]
    width = (end - start + 1)[:, None].astype(np.float64)
    g = np.clip((t - start[:, None] + 1) / width, 0.0, 1.0)
    return g - g.mean(axis=1, keepdims=True)


def _ramp_sse(z: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Residual sum of squares of z on a ramp from each start to each end, by least squares
    on the ramp's shape (`_ramp_shape`), from prefix sums: O(1) a ramp, so that the grid of
    `_best_ramp` costs O(m^2), not O(m^3)."""
    m = len(z)
    zc = z - z.mean()
    t = np.arange(m, dtype=np.float64)
    t0 = np.concatenate([[0.0], np.cumsum(zc)])  # t0[a] = sum of zc[:a]
    t1 = np.concatenate([[0.0], np.cumsum(t * zc)])  # t1[a] = sum of t zc[:a]
    start, end = np.asarray(start), np.asarray(end)
    # The raw shape is (t - start + 1) / width on the `rising` runs start..end-1, then 1 on
    # the `flat` runs from end; zc sums to 0, so its dot with the centred shape is the raw
    # one's, and the centred shape's square is the raw one's less m times its mean squared.
    rising = (end - start).astype(np.float64)
    width, flat = rising + 1.0, m - end
    sgz = ((t1[end] - t1[start]) - (start - 1) * (t0[end] - t0[start])) / width
    sgz += t0[m] - t0[end]
    total = rising / 2 + flat
    squares = rising * (2 * rising + 1) / (6 * width) + flat
    sgg = squares - total**2 / m
    with np.errstate(invalid="ignore", divide="ignore"):
        explained = np.where(sgg > 1e-12, sgz**2 / sgg, 0.0)
    return float(np.dot(zc, zc)) - explained


def _ramp_residuals(z: np.ndarray, ramp: _Ramp) -> np.ndarray:
    """z less its least-squares fit on `ramp`'s shape."""
    g = _ramp_shape(len(z), np.array([ramp.start]), np.array([ramp.end]))[0]
    zc = z - z.mean()
    sgg = float(np.dot(g, g))
    return zc - (float(np.dot(g, zc)) / sgg * g if sgg > 0 else 0.0)


def _best_ramp(z: np.ndarray, min_width: int) -> _Ramp | None:
    """The best ramp of at least `min_width` runs with at least 2 runs of level before it; it
    may still be going at the last run (end == len(z): no new level yet)."""
    m = len(z)
    start, end = np.meshgrid(np.arange(2, m + 1), np.arange(2, m + 1), indexing="ij")
    keep = end - start >= min_width
    start, end = start[keep], end[keep]
    if not len(start):
        return None
    sse = _ramp_sse(z, start, end)
    best = int(np.argmin(sse))
    return _Ramp(float(sse[best]), int(start[best]), int(end[best]))


def _as_drift(
    y: np.ndarray,
    edges: list[int],
    i: int,
    step: ChangePoint,
    previous: KnownChange | ChangePoint | None,
    test: _Test,
    scale: float,
) -> tuple[ChangePoint, bool] | None | _NoLevel:
    """The change at edges[i] as a drift, and whether it extends `previous`; None if a step
    fits it better; `_NoLevel` if it is a drift without `min_runs` runs of a level before it.

    A change the same way as the one before it, within DRIFT_GAP runs of its end, continues it
    when one ramp fits the runs from before that change to after this one about as well as that
    change as reported plus a step here (within DRIFT_SLACK times the noise's variance: the
    ramp has two parameters fewer): a drift found as a staircase of steps becomes one drift.

    A change on its own is a drift when a ramp of at least DRIFT_WIDTH runs fits better than
    the step by DRIFT_PENALTY times the noise's variance (the ramp has one parameter more),
    and DRIFT_LEVEL_RUNS runs hold its new level or it is twice that wide."""
    # The fits see at most DRIFT_NEAR runs a side (a grid of starts and ends: cubic in them),
    # each run replaced by the median of it and its neighbours: least squares would let one
    # outlying run near a step bend the best ramp towards it (a ramp and a step pass
    # unchanged).
    y = _median3(y)
    hi, cut = min(edges[i + 1], edges[i] + DRIFT_NEAR), edges[i]
    same_way = previous is not None and (previous.ratio > 1) == (step.ratio > 1)
    if same_way and previous is not None and previous.after > 0:
        last = previous.after if previous.end is None else previous.end
        lo = max([e for e in edges if e < previous.after] + [cut - 2 * DRIFT_NEAR])
        if cut - last <= DRIFT_GAP:
            ramp = _best_ramp(y[lo:hi], 2)
            earlier = previous.after - lo, (previous.end or previous.after) - lo
            two = float(_ramp_sse(y[lo:cut], np.array([earlier[0]]), np.array([earlier[1]]))[0])
            two += float(np.sum((y[cut:hi] - y[cut:hi].mean()) ** 2))
            if ramp is not None and ramp.sse <= two + DRIFT_SLACK * test.noise**2:
                return _drift(y, lo, hi, ramp, previous, scale), True
    lo = max(edges[i - 1], cut - DRIFT_NEAR)
    ramp = _lone_ramp(y[lo:hi], cut - lo, test)
    if ramp is None:
        return None
    # A drift the other way from the known change just before it is a new movement (the
    # known change's level is its level before, however short); the same way, it is that
    # movement going on, which only the continuation above may report.
    turns = (
        isinstance(previous, KnownChange)
        and edges[i - 1] in _bounds(previous)
        and (previous.ratio > 1) != (step.ratio > 1)
    )
    if lo + ramp.start - edges[i - 1] < test.min_runs and not turns:
        return _NoLevel()
    return _drift(y, lo, hi, ramp, None, scale), False


class _NoLevel:
    """`_as_drift`'s answer for a drift with fewer than `min_runs` runs of a level before it
    in its segment: the runs have moved since the segment began (the history's start, or a
    change reported before the same way, whose movement this is), so there is no level that
    changed. A step test there compares two parts of one ramp (a trend since the series'
    first runs passes it at 15 runs), and the drift's own level before is 2 runs (its p-value
    0.06-0.3 on TCPD's trending series)."""


def _lone_ramp(z: np.ndarray, cut: int, test: _Test) -> _Ramp | None:
    """The drift that z reads as, a step at `cut` being the other reading: the best ramp of
    at least DRIFT_WIDTH runs when it fits better than the step by DRIFT_PENALTY times the
    noise's variance and DRIFT_LEVEL_RUNS runs hold its new level or it is twice that wide;
    else None."""
    ramp = _best_ramp(z, DRIFT_WIDTH)
    if ramp is None or test.noise == 0:
        return None
    if len(z) - ramp.end < DRIFT_LEVEL_RUNS and ramp.end - ramp.start < 2 * DRIFT_WIDTH:
        return None  # a short ramp into the newest runs: as likely a step's noisy tail
    as_step = float(_ramp_sse(z, np.array([cut]), np.array([cut]))[0])
    if as_step - ramp.sse <= DRIFT_PENALTY * test.noise**2:
        return None
    return ramp


def _median3(y: np.ndarray) -> np.ndarray:
    """Each run replaced by the median of it and its two neighbours (the ends kept)."""
    if len(y) < 3:
        return y
    out = y.copy()
    out[1:-1] = np.median(np.stack([y[:-2], y[1:-1], y[2:]]), axis=0)
    return out


def _drift(
    y: np.ndarray,
    lo: int,
    hi: int,
    ramp: _Ramp,
    previous: KnownChange | ChangePoint | None,
    scale: float,
) -> ChangePoint:
    """The drift of `ramp` in y[lo:hi]: its total change is the shift between the level before
    it and the level after it (a drift still going: its newest runs; its end is then the
    last run, moved on as it continues); it continues `previous` when that is a known one."""
    start, end = lo + ramp.start, min(lo + ramp.end, hi - 1)
    shift = _shift(y[lo:start], y[min(end, hi - 2) : hi], scale)
    return ChangePoint(
        before=start - 1,
        after=start,
        ratio=_exp(shift.log_ratio),
        low=_exp(shift.low),
        high=_exp(shift.high),
        p_value=shift.p_value,
        runs_before=start - lo,
        runs_after=hi - end,
        undoes=None,
        end=end,
        continues=previous if isinstance(previous, KnownChange) else None,
    )


def _undoes(
    shift: _Shift,
    previous: KnownChange | ChangePoint,
    level_before: np.ndarray,
    level_after: np.ndarray,
    margin: float,
    scale: float,
) -> bool:
    """Whether a change takes `previous` back: it moves the other way, and the level after it
    is within `margin` of the level before `previous` (the interval of their ratio reaches into
    [-margin, margin] on the log scale). That ratio comes from the runs when the level before
    `previous` is in the history, else from the product of the two reported ratios."""
    earlier = math.log(previous.ratio)
    if earlier == 0 or shift.log_ratio == 0 or (earlier > 0) == (shift.log_ratio > 0):
        return False
    if len(level_before) >= 2:
        _, low, high = _hodges_lehmann(level_before, level_after)
        low, high, margin = low * scale, high * scale, margin * scale
    else:
        margin *= scale
        half = math.hypot(
            (math.log(previous.high) - math.log(previous.low)) / 2, (shift.high - shift.low) / 2
        )
        low, high = earlier + shift.log_ratio - half, earlier + shift.log_ratio + half
    return low <= margin and high >= -margin
