"""The run-level model: one head run against baseline runs, with run-to-run variation in it.

Every process of a run gives one location per configuration: the band mean of its log-times
(bootstrap.LOW). Process p of run r measures configuration c at

    y[c, r, p] = mu[c] + delta[c] * (r is the head) + u[r] + v[c, r] + e[c, r, p]

- u[r], the run's common shift: a busy or a quiet runner moves every configuration of the run
  alike. The head's processes all ran in one CI job, so they share one u; treating them as
  independent draws of the environment would call a busy runner a regression.
- v[c, r], a configuration's own shift in a run (sd sigma_v[c]): what is left of run-to-run
  variation once the common shift is taken out.
- e[c, r, p], process-to-process noise (sd sigma_e[c]), seen within every run, head included.

The history (the baseline runs) estimates the three spreads: sigma_u pulled toward a prior while
there are few runs (a scaled inverse chi-square update: the prior counts as a few runs), sigma_e
and sigma_v pooled across the run's configurations (empirical Bayes on log-variances), sigma_v
the prior alone with one baseline run. A configuration whose runs clearly do not move with the
common shift (a long GPU kernel beside launch-bound ones) is set apart from it; those set apart
that clearly move together form a group with shifts of their own (_shift_groups), and each
process's shift within a group (a GPU process's state, shared by its launch-bound kernels) is
taken out where that makes the processes agree (_base_without_process_shifts). The head's
common shift s = u[head] - mean u[base] is estimated jointly from the configurations of its group
that move with it: on a grid, its posterior is the prior N(0, tau^2), tau^2 = sigma_u^2 (1 +
1/K), times, per configuration, a mixture of "unchanged" (the configuration's difference is s
plus noise) and "changed" (a wide slab). So a shift most configurations share is the runner's,
and is taken out; a shift far beyond what runs vary by is not (a change that slows everything by
40% is not a busy runner, as the history shows). What is left per configuration has only sigma_v
and sigma_e in it. Last, the head's other configurations say how far this head strays from what
the history and its processes predict (_head_scale: a robust mean of their squared standardised
residuals, a factor on each configuration's variance, pulled toward 1 by its noise). Draws of
delta[c] share one draw of s across configurations, so the gate's family control sees how the
configurations move together.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
from scipy.special import chdtri, digamma, expit, fdtri, gammaln, ndtr, polygamma, stdtrit

from stats._kernels import (
    cell_medians,
    cell_minima,
    column_medians,
    median_of_all,
    nanmax,
    nanmean,
    nanmedian,
    nanvar,
    row_medians,
    rows_searchsorted,
    run_means,
    table_medians,
)

# The prior's weight, in runs, for the spread of a run's common shift.
PRIOR_RUNS_COMMON = 2.0
UNCHANGED_SHARE = 0.9  # prior share of configurations a change leaves alone
SLAB_SD = 0.5  # log-ratio sd of a changed configuration
GRID_POINTS = 401
GRID_WIDTH = 6.0  # the common shift's grid spans +-6 prior sd
# The degrees of freedom the draws are widened with lie between these: past 60, t's 95% point
# is the normal's to 1%; below 2, t's variance is infinite and one draw in a few hundred would
# decide a run.
MAX_DF = 60.0
MIN_DF = 2.0
# A process's shift shared by its configurations is taken out only over at least this many:
# over fewer, the median across them is mostly their own noise.
MIN_CONFIGS_FOR_PROCESS_SHIFTS = 4
# A configuration is set apart from the runs' common shift when its run locations agree better
# without it than runs that do move with it would, by chance, in this share of baselines: the
# ratio of its squared deviations with and without the shift below the F distribution's
# SET_APART_LEVEL point (k - 1 and k - 1 degrees of freedom for k runs). A fixed ratio of 4
# set apart 20% of configurations that do move with the runs at 3 runs (F(2, 2) < 1/4), and
# those lost the shift's correction: 90% intervals covered 0.83
# (benchmarks/quality/interval_coverage.py).
SET_APART_LEVEL = 0.01
# Configurations' variances are pooled unless they differ beyond what sampling noise gives in
# this share of cases (_shrunk_variances).
POOL_EVIDENCE = 0.9
# The least spread (of log-variances) the pooling allows between configurations: never pooled
# all the way, since configurations may differ.
POOL_FLOOR = 0.05
# A process's deviation from its run's median counts at most this many robust sd (1.4826 MAD)
# of its configuration in the process spread (_spread).
DEVIATION_CAP_SD = 3.0
MIN_RUNS_TO_SET_APART = 3
# The median's shape (_median_shape) is pulled toward normal processes' as if they had been
# measured with this many degrees of freedom: with 3 baseline runs of 6 processes and 8
# configurations (24 of them) the prior holds 30%.
SHAPE_PRIOR_DF = 10.0
# A later group of configurations sharing their runs' shifts has at least this many.
MIN_GROUP_CONFIGS = 4
# A Baseline keeps the groups of at most this many patterns of configurations whose process
# shifts were taken out (each upload has one; hostile ones could make many).
MAX_TAKE_PATTERNS = 64
# The head's scale (_head_scale) counts each configuration's standardised residual up to this
# many sd of the scale (docs/statistics.md, "Runs", step 6; 2 and 5 move no figure by a point).
SCALE_CAP_SD = 3.0
# It is read with at least this many configurations (the recorded H200 workload's 12): a handful
# of residuals says little, and a changed configuration among them much.
MIN_CONFIGS_FOR_SCALE = 12
# It moves a configuration's variance at most this many times either way: residuals that happen
# to be all but zero (a head identical to its history) cannot make the intervals vanish.
MAX_SCALE = 4.0
# At most this many steps toward the scale's fixed point (numerical, not a decision: each step
# narrows the distance to it several times, and they stop once one moves it by under 0.01%).
_SCALE_ITERATIONS = 30
# The draws' noise is Student's t of this many degrees of freedom, scaled to the widened normal's
# WIDEN_AT point: recorded errors are peaked with heavy tails (busy CPU: central 98% intervals
# of normal draws held 0.970 of the truths), and the gate's control over a run's many
# configurations decides in the far tail.
TAIL_DF = 12.0
# The quantile the draws are widened to match Student's t at: the gate's default probability.
WIDEN_AT = 0.95
_NORMAL_AT = stdtrit(np.inf, WIDEN_AT)  # the normal distribution's, worked out once
# The noise is drawn by inverting its distribution function on a grid of this many cells of
# equal probability (numerical, not a decision: a draw lies in the same cell as an exact one
# would, and none goes beyond the t's 1 - 2**-17 point).
_NOISE_CELLS = 1 << 16


def _noise_quantiles(tail_df: float, widen_at: float) -> np.ndarray:
    """The draws' noise (step 7): Student's t of tail_df degrees of freedom, scaled to the
    normal's widen_at point, at the midpoints of _NOISE_CELLS cells of equal probability. A draw
    picks a cell at random, far cheaper than numpy's standard_t (a normal and a gamma variate
    each), which made a re-gate's draws cost more than normal noise's (docs/results.md)."""
    cells = (np.arange(_NOISE_CELLS) + 0.5) / _NOISE_CELLS
    unit = stdtrit(np.inf, widen_at) / stdtrit(tail_df, widen_at)
    return (stdtrit(tail_df, cells) * unit).astype(np.float32)


_NOISE = _noise_quantiles(TAIL_DF, WIDEN_AT)


@dataclass(frozen=True)
class RunFit:
    """What the model made of one head run: (C,) arrays unless said otherwise."""

    draws: np.ndarray  # (C, R) log-ratio draws of each configuration's own change
    shift: float  # posterior median of the head run's common shift (log scale)
    shift_sd_prior: float  # tau: the sd of a common shift the history allows
    sd: np.ndarray  # per configuration: sd of its change with the common shift known
    runs: np.ndarray  # baseline runs per configuration
    # The parts of sd^2 as estimated (benchmarks/quality/interval_coverage.py --parts sets them
    # against the truth): sigma_e^2, sigma_v^2, and the head's and the baseline's process parts.
    process_var: np.ndarray
    config_shift_var: np.ndarray
    head_var: np.ndarray
    base_var: np.ndarray
    scale: np.ndarray  # the head's scale on each configuration's variance (_head_scale)


@dataclass(frozen=True)
class Baseline:
    """What the model works out from the baseline runs alone: the same for every head run
    compared with them (a prepared baseline keeps it, stats/prepared.py: the server re-gates
    every upload of a workload against the same runs). Process locations are
    centred on each configuration's mean baseline location, so sums of squares stay exact in
    float64."""

    cb: np.ndarray  # each process location's configuration
    cell: np.ndarray  # and its (configuration, run) cell
    k_all: int  # baseline runs
    centre: np.ndarray  # (C,)
    yb: np.ndarray  # the process locations, centred
    counts: np.ndarray  # (C, K) processes per cell
    # (cells, P) yb's indices by cell where every cell holds P processes, else None
    run_table: np.ndarray | None
    run_loc: np.ndarray  # (C, K) each run's median process
    run_min: np.ndarray  # (C, K) and its fastest
    groups: list[ShiftGroup]
    # yb with each process's shift in its group taken out, with its run medians and minima;
    # None where group i is not the same worker in every configuration, or cannot be seen.
    shifted: tuple[np.ndarray, np.ndarray, np.ndarray] | None
    # (C, K, P) yb's indices of the first P processes of every run, P the fewest any
    # (configuration, run) has; None below 2 (_head_noisiness).
    first_processes: np.ndarray | None
    # _shift_groups of the run medians after the process shifts, by which configurations took
    # them (computed on first use: a few patterns recur from upload to upload).
    groups_by_take: dict[bytes, list[ShiftGroup]] = field(default_factory=dict)


def baseline(
    base: list[np.ndarray], base_runs: list[np.ndarray], *, run_shift_sd: float
) -> Baseline:
    """base[c]: a configuration's baseline process locations; base_runs[c]: their run labels
    (any ints)."""
    c_n = len(base)
    all_runs = np.concatenate(base_runs)
    labels = np.unique(all_runs)
    k_all = len(labels)
    lens = [len(b) for b in base]
    cb = np.repeat(np.arange(c_n), lens)
    cell = cb * k_all + np.searchsorted(labels, all_runs)
    yb = np.concatenate(base)
    # (With as many processes everywhere, one mean along the rows: the same sums as one row at
    # a time.)
    if min(lens) == max(lens):
        centre = yb.reshape(c_n, -1).mean(axis=1)
    else:
        centre = np.array([float(np.mean(b)) for b in base])
    yb = yb - centre[cb]
    counts = np.bincount(cell, minlength=c_n * k_all).reshape(c_n, k_all).astype(float)
    cells = _Cells(cb, cell, c_n, k_all, _run_table(cell, c_n * k_all))
    run_loc = cells.run_medians(yb)
    groups = _shift_groups(run_loc, counts, run_shift_sd)
    shifted = None
    first = base_runs[0].tolist()
    if (
        c_n >= MIN_CONFIGS_FOR_PROCESS_SHIFTS
        and groups
        and all(r.tolist() == first for r in base_runs)
    ):
        yb2 = _base_without_process_shifts(yb, np.asarray(first), c_n, groups)
        shifted = (yb2, cells.run_medians(yb2), cells.run_minima(yb2))
    made = Baseline(
        cb=cb,
        cell=cell,
        k_all=k_all,
        centre=centre,
        yb=yb,
        counts=counts,
        run_table=cells.run_table,
        run_loc=run_loc,
        run_min=cells.run_minima(yb),
        groups=_frozen_groups(groups),
        shifted=shifted,
        first_processes=_first_processes(cell, counts),
    )
    # Shared by every head run compared with it: an array changed in place by one would
    # change the others' numbers, so none can be.
    table = () if cells.run_table is None else (cells.run_table,)
    for a in (cb, cell, centre, yb, counts, run_loc, made.run_min, *table, *(shifted or ())):
        a.setflags(write=False)
    return made


def fit(
    b: Baseline,
    head: list[np.ndarray],
    resamples: int,
    rng: np.random.Generator,
    *,
    run_shift_sd: float,
    config_shift_sd: float,
    process_var_fallback: np.ndarray | None = None,
    aligned: bool = False,
) -> RunFit:
    """head[c]: the head run's process locations, against the baseline runs b.
    process_var_fallback: (C,) a process location's variance from its own samples, used only
    when no run has two processes (no process-to-process spread seen). aligned: every
    configuration has as many head processes in the same order (group i is the same worker
    process for all of them), so a process's common shift can be seen and set apart where the
    baseline's can."""
    c_n = len(head)
    k_all = b.k_all
    h_lens = [len(h) for h in head]
    ch = np.repeat(np.arange(c_n), h_lens)
    yh = np.concatenate(head) - b.centre[ch]
    heads = _HeadCells(ch, c_n)
    counts = b.counts
    present = counts > 0
    h_cnt = np.bincount(ch, minlength=c_n).astype(float)
    yb, run_loc, run_min, groups = b.yb, b.run_loc, b.run_min, b.groups
    head_loc = heads.medians(yh)
    head_level_gap = np.zeros(c_n)

    # Process-to-process spread, within runs (the head's included); where group i is the same
    # worker in every configuration, with each process's shift in its group taken out where
    # that makes the processes agree better (and then out of the locations too).
    ss_w = _spread(yb, yh, run_loc, head_loc, b.cell, b.cb, ch, c_n)
    if aligned and b.shifted is not None:
        yb2, run_loc2, run_min2 = b.shifted
        yh2, level_gap = _head_without_process_shifts(yh, c_n, groups)
        # Measured from the run medians as measured, like ss_w, so the two compare like with
        # like (from the shifted values' own medians, the 15% slowdowns flagged with one
        # baseline run fell from 83% to 75% on corpus B).
        ss_w2 = _spread(yb2, yh2, run_loc, head_loc, b.cell, b.cb, ch, c_n)
        # A launch-bound kernel shares its process's state, a configuration beside it may not,
        # and taking the shift out of that one would add noise to it.
        take = ss_w2 < ss_w
        head_level_gap = np.where(take, level_gap, 0.0)
        yb = np.where(take[b.cb], yb2, yb)
        yh = np.where(take[ch], yh2, yh)
        ss_w = np.minimum(ss_w, ss_w2)
        run_loc = np.where(take[:, None], run_loc2, run_loc)
        run_min = np.where(take[:, None], run_min2, run_min)
        head_loc = heads.medians(yh)
        groups = _groups_after(b, take, run_loc, run_shift_sd)
    df_w = np.where(present, counts - 1, 0).sum(axis=1) + (h_cnt - 1)
    # The deviations are from each run's median, not its mean: their squares add up to more than
    # n - 1 process variances (2.35 for 3 normal processes, 8.50 for 9), so they are divided by
    # what they add up to, not by their degrees of freedom. Divided by n - 1, sigma_e came out
    # 4-8% high and the intervals over-covered where process noise is most of the error.
    ss_w = ss_w * _df_per_expected_ss(counts, h_cnt, df_w)
    var_e, df_e = _process_variance(ss_w, df_w, process_var_fallback, c_n)
    k_runs = present.sum(axis=1)
    # How much a median of processes varies, against what normal processes of variance var_e
    # would give: measured on the baseline runs, where they have processes enough.
    shape = _median_shape(yb, b.run_table, var_e, c_n, k_all)

    var_v, df_v, proc_b = _config_shift_variance(
        run_loc, groups, counts, var_e, config_shift_sd, shape
    )

    base_level = nanmean(run_loc, axis=1)
    diff = head_loc - base_level
    # The head's median is only as sure as its lower processes agree: interference only adds
    # time, so a median far above the fastest process means two of them may have been hit. The
    # head is one run, and its own processes are all that is known of its conditions: its gap
    # stands alone (a runner noisier than the history's is not pooled away, and each added
    # process narrows it). A baseline run is one of several: its gap is weighed against the
    # history's process spread (_history_process_variance).
    gap = head_loc - heads.minima(yh)
    head_e = var_e
    rho = _head_noisiness(b.yb, b.first_processes, yh, h_cnt, var_e)
    if rho > 1.0:
        # var_e pools the head's processes with the baseline's (df_w degrees of freedom, h_cnt - 1
        # of them the head's): the baseline's alone, times rho.
        head_e = var_e * rho * df_w / (df_w + (rho - 1.0) * (h_cnt - 1))
    head_var = _median_var(h_cnt, shape) * np.maximum(head_e, _gap_variance(gap, h_cnt))
    run_gap = np.where(present, run_loc - run_min, 0.0)
    run_var = _median_var(counts, shape) * _history_process_variance(
        var_e[:, None], df_e[:, None], run_gap, counts
    )
    base_var = np.where(present, run_var, 0.0).sum(axis=1) / k_runs**2
    # var_v is not held at zero (_config_shift_variance), so the sum is the baseline runs'
    # estimated variance, (var_v + proc_b)(1 + 1/K), plus what the head's and the baseline's
    # process parts add beyond theirs in it; never below the head's own process part.
    runs_part = var_v * (1 + 1 / k_runs)
    var_c = np.maximum(runs_part + head_var + base_var, head_var)
    from_runs = (var_v + proc_b) * (1 + 1 / k_runs)
    sd = np.sqrt(np.maximum(var_c, 1e-12))
    # Where the head's process shifts were taken out, its level is its median process's, and
    # that is in doubt when its fastest process lies far below it: two of three processes
    # slowed alike in every configuration (a busy neighbour for most of the job) move every
    # configuration's median with them, and once their shift is out no configuration's own gap
    # shows it (on corpus-crossload-9proc, unchanged heads of that kind BLOCKed). The doubt is
    # common to the group, so it widens the prior of the head's common shift, read from that
    # gap as each configuration's is (_gap_variance): the shift can then take up what the head's
    # own processes say may be theirs, and a change that slows every process alike is still
    # not a runner's.
    level_var = _median_var(h_cnt, shape) * _gap_variance(head_level_gap, h_cnt)
    shifts = _head_shifts(groups, diff, sd, k_all, resamples, rng, level_var)
    # The spreads are estimated, so the draws are widened to the t distribution's WIDEN_AT
    # point (the gate's default probability: the one-sided point it decides at, and each end of
    # the 90% interval it shows), with the degrees of freedom of the sum of the two estimated
    # parts (Welch-Satterthwaite): the runs' variance, and the rest, from the processes; less
    # what the head's scale, where its own estimate counts, carries.
    rest = np.abs(var_c - from_runs)
    df_sd = _sum_df(from_runs, df_v, rest, df_e)
    # How far this head's configurations stray from what the model says, over the others:
    # the run's own conditions (a runner busier or quieter than the history's) scale every
    # configuration's spread alike, and the head's processes alone do not show it. Where its
    # own estimate counts (keep), the draws' degrees of freedom are its, in that share.
    scale, keep, df_scale = _head_scale(diff, shifts, sd)
    df_all = 1.0 / ((1.0 - keep) / df_sd + keep / df_scale)
    widen = np.sqrt(scale) * stdtrit(np.clip(df_all, MIN_DF, MAX_DF), WIDEN_AT) / _NORMAL_AT
    # Student's t noise of TAIL_DF degrees of freedom, scaled to the normal's WIDEN_AT point:
    # the interval shown and a single configuration's decision are as with normal noise, and
    # the far tail, where the gate's control over many configurations decides, is as heavy as
    # the recorded errors' (docs/statistics.md, "Runs", step 7).
    noise = _NOISE[rng.integers(0, _NOISE_CELLS, (c_n, resamples), dtype=np.uint16)]
    draws = diff[:, None] - shifts
    draws += (sd * widen)[:, None] * noise
    leading = groups[0].members if groups else None
    return RunFit(
        draws=draws,
        shift=0.0 if leading is None else median_of_all(_rows(shifts, leading)),
        shift_sd_prior=math.sqrt(groups[0].var_u * (1 + 1 / k_all)) if groups else 0.0,
        sd=sd,
        runs=k_runs,
        process_var=var_e,
        config_shift_var=var_v,
        head_var=head_var,
        base_var=base_var,
        scale=scale,
    )


def _head_scale(
    diff: np.ndarray, shifts: np.ndarray, sd: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per configuration: the factor its variance is read with, from how far the head's other
    configurations stray from the model (their residuals after the head's shift, over the
    variance the model gives them); the weight the factor's own estimate has in it (0: the
    model's variance as it is); and that estimate's degrees of freedom.

    The model's variances come from the history and the head's few processes; a head run under
    other conditions than its history's (a busy runner against a quiet history, or the reverse)
    has every configuration off alike, and a runner that moves each kernel its own way under
    load has them stray further. Unchanged, a configuration's residual over its sd is a
    standard normal, so the others' squares estimate the factor (a multiplicative dispersion,
    as a meta-analysis's Birge ratio). Robust to the changes the gate is there to find: a
    configuration's own residual is left out of its factor (a slowed one does not widen
    itself); among the others, each square counts up to SCALE_CAP_SD sd of the scale itself
    (Huber's proposal 2: at its fixed point the capped mean over what capped standard normals
    give is the scale again), the largest is left out (one changed configuration lends the
    others nothing; what the largest of m normals' capped squares adds is left out of the
    expectation too), and each is weighted by its posterior share of "unchanged" under the head
    shift's mixture, read at the scale but never narrower than the model (a residual the model
    finds ordinary is not made a change by a narrow scale). Its log is pulled toward 0 by its
    sampling noise (positive-part James-Stein, about 2 / df for a chi-square's df: one a
    configuration, less the one left out and one for the shift they share), and stays within
    MAX_SCALE either way."""
    c_n = len(diff)
    if c_n < MIN_CONFIGS_FOR_SCALE:
        return np.ones(c_n), np.zeros(c_n), np.full(c_n, MAX_DF)
    resid = diff - shifts.mean(axis=1)
    var = sd**2 + shifts.var(axis=1)  # the shift the residual is taken from is itself uncertain
    z2 = resid**2 / var
    own = np.eye(c_n, dtype=bool)  # (c, j): configuration j's part in c's factor
    rows = np.arange(c_n)
    beta = _capped_square_mean(SCALE_CAP_SD)
    scale = np.ones(c_n)
    for _ in range(_SCALE_ITERATIONS):
        at = np.sqrt(var[None, :] * np.maximum(scale, 1.0)[:, None])
        unchanged, changed = _mixture_parts(resid[None, :], at)
        weight = np.where(own, 0.0, expit(unchanged - changed))
        total = weight.sum(axis=1)
        # Squares in units of the scale, capped; the largest of each row's others left out.
        capped = np.minimum(z2[None, :] / scale[:, None], SCALE_CAP_SD**2)
        top = np.argmax(np.where(own, -1.0, capped), axis=1)
        held = (weight * capped).sum(axis=1) - (weight * capped)[rows, top]
        expected = total * beta - weight[rows, top] * _capped_max_mean(SCALE_CAP_SD, total)
        last, scale = scale, scale * held / np.maximum(expected, 1e-12)
        scale = np.clip(scale, 1e-6, 1e6)
        if np.max(np.abs(np.log(scale / last))) < 1e-4:
            break
    df = np.maximum(total - 2.0, 1e-9)
    log_scale = np.clip(np.log(scale), -math.log(MAX_SCALE), math.log(MAX_SCALE))
    keep = np.maximum(0.0, 1.0 - (2.0 / df) / np.maximum(log_scale**2, 1e-12))
    return np.exp(log_scale * keep), keep, df


def _mixture_parts(resid: np.ndarray, sd: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The head shift's mixture for residuals resid, as log densities with their prior shares
    (less the constant both share): "unchanged" (noise of sd) and "changed" (the slab)."""
    unchanged = -0.5 * (resid / sd) ** 2 - np.log(sd) + math.log(UNCHANGED_SHARE)
    changed = -0.5 * (resid / SLAB_SD) ** 2 - math.log(SLAB_SD) + math.log(1 - UNCHANGED_SHARE)
    return unchanged, changed


def _capped_max_mean(c: float, m: np.ndarray) -> np.ndarray:
    """E[max of m values min(Z^2, c^2)], Z standard normal (m need not be whole)."""
    t = np.linspace(0.0, c * c, 201)
    below = np.clip(2 * ndtr(np.sqrt(t)) - 1, 1e-300, 1.0)  # P(Z^2 <= t)
    tail = 1.0 - below[None, :] ** np.asarray(m, dtype=float)[:, None]
    result: np.ndarray = ((tail[:, 1:] + tail[:, :-1]) / 2).sum(axis=1) * (t[1] - t[0])
    return result


def _capped_square_mean(c: float) -> float:
    """E[min(Z^2, c^2)] for a standard normal Z."""
    inside = 2 * float(ndtr(c)) - 1
    density = math.exp(-0.5 * c * c) / math.sqrt(2 * math.pi)
    return inside - 2 * c * density + c * c * (1 - inside)


def _sum_df(a: np.ndarray, df_a: np.ndarray, b: np.ndarray, df_b: np.ndarray) -> np.ndarray:
    """Welch-Satterthwaite degrees of freedom of a + b, two variances estimated with df_a and
    df_b, between MIN_DF and MAX_DF (past MAX_DF t is the normal to 1%)."""
    total = a + b
    with np.errstate(divide="ignore", invalid="ignore"):
        df = total**2 / (a**2 / df_a + b**2 / df_b)
    return np.clip(np.nan_to_num(df, nan=MAX_DF), MIN_DF, MAX_DF)


def _head_shifts(
    groups: list[ShiftGroup],
    diff: np.ndarray,
    sd: np.ndarray,
    k_all: int,
    resamples: int,
    rng: np.random.Generator,
    level_var: np.ndarray,
) -> np.ndarray:
    """(C, R) draws of the head run's shift in each configuration's group; 0 in none.
    level_var: (C,) the head's own doubt about its level (fit's), added to the prior's."""
    if len(groups) == 1 and groups[0].members.all():  # the usual case: the run moves as one
        tau = math.sqrt(groups[0].var_u * (1 + 1 / k_all) + float(level_var.max()))
        return _shift_draws(diff, sd, tau, resamples, rng)
    shifts = np.zeros((len(diff), resamples))
    for g in groups:
        tau = math.sqrt(g.var_u * (1 + 1 / k_all) + float(level_var[g.members].max()))
        shifts[g.members] = _shift_draws(diff[g.members], sd[g.members], tau, resamples, rng)
    return shifts


def _rows(x: np.ndarray, which: np.ndarray) -> np.ndarray:
    """x[which] for a (C,) bool, without the copy where every row is taken."""
    return x if which.all() else x[which]


def _groups_after(
    b: Baseline, take: np.ndarray, run_loc: np.ndarray, run_shift_sd: float
) -> list[ShiftGroup]:
    """_shift_groups of the run medians once the configurations in take had their processes'
    shifts taken out: the baseline's own groups where none did."""
    if not take.any():
        return b.groups
    k = take.tobytes()
    found = b.groups_by_take.get(k)
    if found is None:
        found = _frozen_groups(_shift_groups(run_loc, b.counts, run_shift_sd))
        if len(b.groups_by_take) < MAX_TAKE_PATTERNS:
            b.groups_by_take[k] = found
    return found


def _frozen_groups(groups: list[ShiftGroup]) -> list[ShiftGroup]:
    """The groups with their arrays read-only: a Baseline's are shared by every head run."""
    for g in groups:
        g.members.setflags(write=False)
        g.u.setflags(write=False)
    return groups


def _first_processes(cell: np.ndarray, counts: np.ndarray) -> np.ndarray | None:
    """(C, K, P) the indices of each (configuration, run)'s first P processes, P the fewest any
    has; None where that is below 2."""
    p = int(counts.min())
    if p < 2:
        return None
    starts = np.concatenate([[0], np.cumsum(counts.ravel())[:-1]]).astype(int)
    order = np.argsort(cell, kind="stable")
    result: np.ndarray = order[starts[:, None] + np.arange(p)].reshape(*counts.shape, p)
    result.setflags(write=False)
    return result


def _run_table(cell: np.ndarray, size: int) -> np.ndarray | None:
    """(cells, P) the baseline values' indices by cell, or None if the cells differ in size."""
    per_cell = np.bincount(cell, minlength=size)
    if per_cell.min() == 0 or per_cell.min() != per_cell.max():
        return None
    return np.argsort(cell, kind="stable").reshape(size, -1)


@dataclass(frozen=True)
class _Cells:
    """Where each baseline process location (yb) belongs: its configuration (cb) and its
    (configuration, run) cell.

    Where every cell holds as many processes (the usual case), the cells' values are the rows
    of a table (run_table): medians and minima come from a sort of small rows, not from a sort
    of all of them by cell and value (which was the model's most called step)."""

    cb: np.ndarray
    cell: np.ndarray
    c_n: int
    k_all: int
    run_table: np.ndarray | None

    def run_medians(self, yb: np.ndarray) -> np.ndarray:
        """(C, K) each run's location: the median of its processes (one process beside a noisy
        neighbour moves a mean of three by a third of its shift, a median hardly at all)."""
        if self.run_table is not None:
            return table_medians(yb[self.run_table]).reshape(self.c_n, self.k_all)
        size = self.c_n * self.k_all
        return cell_medians(yb, self.cell, size).reshape(self.c_n, self.k_all)

    def run_minima(self, yb: np.ndarray) -> np.ndarray:
        if self.run_table is not None:
            return yb[self.run_table].min(axis=1).reshape(self.c_n, self.k_all)
        return cell_minima(yb, self.cell, self.c_n * self.k_all).reshape(self.c_n, self.k_all)


@dataclass(frozen=True)
class _HeadCells:
    """Each head process location's configuration (ch, in configuration order)."""

    ch: np.ndarray
    c_n: int

    @cached_property
    def _equal(self) -> bool:
        """Every configuration has as many head processes: then they are a table's rows."""
        per_config = np.bincount(self.ch, minlength=self.c_n)
        return bool(per_config.min() == per_config.max())

    def medians(self, yh: np.ndarray) -> np.ndarray:
        if self._equal:
            return table_medians(yh.reshape(self.c_n, -1))
        return cell_medians(yh, self.ch, self.c_n)

    def minima(self, yh: np.ndarray) -> np.ndarray:
        if self._equal:
            return yh.reshape(self.c_n, -1).min(axis=1)
        return cell_minima(yh, self.ch, self.c_n)


# Variance of the median of n normal values over that of one value, times n: 1 / efficiency.
_MEDIAN_INEFFICIENCY = {1: 1.0, 2: 1.0, 3: 1.346, 4: 1.193, 5: 1.435, 6: 1.289, 7: 1.473, 8: 1.346}
# The same as an array indexed by n up to 9 (0 and 9: pi / 2, the large-n limit; n past 9 is
# looked up as 9), so that a (configuration, run) table of counts is looked up in one step.
_INEFFICIENCY_BY_N = np.array([_MEDIAN_INEFFICIENCY.get(k, math.pi / 2) for k in range(10)])


def _median_shape(
    yb: np.ndarray, run_table: np.ndarray | None, var_e: np.ndarray, c_n: int, k_all: int
) -> float:
    """How much a median of 3 processes varies over what normal processes of variance var_e
    give (_MEDIAN_INEFFICIENCY[3] var_e / 3), measured on baseline runs of 6 processes or more:
    each run's processes in disjoint threes (in recorded order; a run's processes are
    exchangeable), the spread of the threes' medians about their mean pooled over runs and
    configurations, pulled toward 1 (normal processes) with SHAPE_PRIOR_DF degrees of freedom.
    A GPU's process noise is not normal: with heavier tails (gpu-aa-h200-bs1-8-9proc) a median
    varies less than normal theory says, with two states (one per process, gpu-aa-h200-9proc)
    more. The same factor serves medians of more processes:
    for many, var(median) over normal theory tends to 1 / (2 pi f(0)^2 sigma^2) whatever their
    number. 1 where no baseline run has 6 processes."""
    if run_table is None or run_table.shape[1] < 6:
        return 1.0
    threes = run_table.shape[1] // 3
    medians = table_medians(yb[run_table[:, : threes * 3]].reshape(-1, 3)).reshape(-1, threes)
    ss = float(((medians - medians.mean(axis=1, keepdims=True)) ** 2).sum())
    df = c_n * k_all * (threes - 1)
    per_df = float(var_e.mean()) * _MEDIAN_INEFFICIENCY[3] / 3
    if not per_df > 0:
        return 1.0
    return (ss + SHAPE_PRIOR_DF * per_df) / ((df + SHAPE_PRIOR_DF) * per_df)


# (median - minimum)^2 of n standard normal values, n = 0..9 (n past 9 looked up as 9, where
# the gap is smaller than theirs: the side of caution), by simulation
# (tests/stats/test_calibration.py checks them): its GAP_LEVEL point, its mean, and the
# degrees of freedom that gap^2 / mean carries as an estimate of the process variance
# (2 mean^2 / variance, as a chi-square's). 0 and 1 process have no gap.
GAP_LEVEL = 0.9
_GAP_SQ_POINT = np.array([np.inf, np.inf, 1.353, 3.229, 3.552, 4.281, 4.483, 4.907, 5.051, 5.33])
_GAP_SQ_MEAN = np.array([np.inf, np.inf, 0.501, 1.171, 1.444, 1.788, 1.992, 2.233, 2.401, 2.581])
_GAP_DF = np.array([0.0, 0.0, 1.0, 0.86, 1.37, 1.63, 2.07, 2.31, 2.72, 2.93])


# E[sum of (x - median)^2] of n standard normal values, n = 0..9, by simulation
# (tests/stats/test_calibration.py checks them); n past 9 adds what each value past 9 adds
# (1: the median's excess over the mean stays about pi / 2 - 1 of one variance).
_SS_ABOUT_MEDIAN = np.array([0.0, 0.0, 1.0, 2.347, 3.193, 4.436, 5.284, 6.472, 7.346, 8.498])


def _ss_about_median(n: np.ndarray) -> np.ndarray:
    n = np.asarray(n, dtype=int)
    top = len(_SS_ABOUT_MEDIAN) - 1
    result: np.ndarray = _SS_ABOUT_MEDIAN[np.minimum(n, top)] + np.maximum(n - top, 0)
    return result


def _df_per_expected_ss(counts: np.ndarray, h_cnt: np.ndarray, df_w: np.ndarray) -> np.ndarray:
    """Per configuration: the degrees of freedom of its within-run squared deviations from
    the run medians (baseline cells `counts` and the head's h_cnt processes) over their expected
    sum in process variances; 1 where there are none."""
    expected = _ss_about_median(counts).sum(axis=1) + _ss_about_median(h_cnt)
    with np.errstate(invalid="ignore", divide="ignore"):
        result: np.ndarray = np.where(expected > 0, df_w / expected, 1.0)
    return result


def _gap_variance(gap: np.ndarray, n: np.ndarray) -> np.ndarray:
    """The head's process variance read from how far its median of n processes lies above its
    fastest: beyond var_e in 1 - GAP_LEVEL of runs of normal processes, and growing with the
    gap where interference (which only adds time) lifted the median."""
    k = np.minimum(np.asarray(n, dtype=int), len(_GAP_SQ_POINT) - 1)
    result: np.ndarray = gap**2 / _GAP_SQ_POINT[k]
    return result


def _head_noisiness(
    yb: np.ndarray, first: np.ndarray | None, yh: np.ndarray, h_cnt: np.ndarray, var_e: np.ndarray
) -> float:
    """How much noisier the head run's processes are than the baseline runs', as a factor (at
    least 1) on the history's process variance for the head's part. A runner is quiet or busy
    for a whole job: on corpus-crossload-9proc a busy run's processes spread about three times
    the variance of a quiet run's, while a configuration's own run-to-run shift stayed small in
    both (benchmarks/quality/corpus_spread.py), and a busy head read with a quiet history's
    spread was too sure of itself. Like is
    set against like: the first m processes of every run (m the fewest any run has, the head's
    included), each one's deviation from its run's median, less that process's median deviation
    over the configurations (its shift, which the model takes out), squares weighted by
    1 / var_e and averaged, head over baseline. Its log is pulled toward 0 by its sampling noise
    (positive-part James-Stein; a log-variance's sampling variance is about 2 / df): a head no
    noisier than chance reads with the history's spread alone. Never below 1: a quiet head read
    with a busy history's spread is wider than it need be, but narrowing it by mean squares
    overcorrected (a busy process's time is heavy-tailed, and its mean square grows more than a
    median's variance does), and quiet heads' intervals covered 0.79-0.85 (docs/results.md)."""
    if first is None:
        return 1.0
    c_n = first.shape[0]
    m = min(int(h_cnt.min()), first.shape[2])
    if m < 2 or c_n < MIN_CONFIGS_FOR_PROCESS_SHIFTS:
        return 1.0
    starts = np.concatenate([[0], np.cumsum(h_cnt.astype(int))[:-1]])
    head = _without_process_shifts(yh[starts[:, None] + np.arange(m)][:, None, :])
    base = _without_process_shifts(yb[first[:, :, :m]])
    seen = var_e > 0
    if not seen.any():
        return 1.0
    weight = 1.0 / var_e[seen]
    in_base = float(weight @ (base[seen] ** 2).mean(axis=(1, 2)))
    in_head = float(weight @ (head[seen] ** 2).mean(axis=(1, 2)))
    df = (int(seen.sum()) - 1) * (m - 1)
    if in_head <= in_base or in_base <= 0 or df <= 0:
        return 1.0
    noise = 2.0 / df * (1.0 + 1.0 / first.shape[1])
    log_ratio = math.log(in_head / in_base)
    return math.exp(log_ratio * max(0.0, 1.0 - noise / log_ratio**2))


def _without_process_shifts(x: np.ndarray) -> np.ndarray:
    """(C, K, m) process locations: each one's deviation from its run's median, less that
    process's median deviation over the configurations."""
    dev = x - np.median(x, axis=2, keepdims=True)
    result: np.ndarray = dev - np.median(dev, axis=0, keepdims=True)
    return result


def _history_process_variance(
    var_e: np.ndarray, df_e: np.ndarray, gap: np.ndarray, n: np.ndarray
) -> np.ndarray:
    """The process variance a baseline run's median of n processes is read with: the
    configuration's history (var_e, from every run's processes, with its df_e degrees of
    freedom) pooled with what the run's own gap between its median and its fastest process
    says, each weighted by the degrees of freedom it carries; never below var_e. One gap
    carries about one degree of freedom, so a configuration whose history holds many more (its
    processes agree run after run) is no longer judged by one baseline run's gap alone. Before,
    the gap's 75% point stood in for the process variance whenever it was larger, for every
    baseline run as for the head: one baseline run whose fastest process drew the other GPU
    state widened a configuration's interval for every head compared with it (docs/statistics.md,
    "Runs", step 1)."""
    k = np.minimum(np.asarray(n, dtype=int), len(_GAP_SQ_MEAN) - 1)
    df_g = _GAP_DF[k]
    from_gap = gap**2 / _GAP_SQ_MEAN[k]
    with np.errstate(invalid="ignore", divide="ignore"):
        pooled = (df_e * var_e + df_g * from_gap) / (df_e + df_g)
    result: np.ndarray = np.maximum(var_e, np.nan_to_num(pooled, nan=0.0, posinf=0.0))
    return result


def _config_shift_variance(
    run_loc: np.ndarray,
    groups: list[ShiftGroup],
    counts: np.ndarray,
    var_e: np.ndarray,
    config_shift_sd: float,
    shape: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each configuration's own run-to-run variance (beyond the runs' common shifts u), its
    degrees of freedom (after pooling; MAX_DF for the prior), and the process part of the run
    locations' variance it was estimated beside (0 for the prior). shape: _median_shape's."""
    present = counts > 0
    k_runs = present.sum(axis=1)
    # Residual run means, less their process noise.
    moved = run_loc.copy()
    for g in groups:
        moved[g.members] -= g.u[None, :]
    level = nanmean(moved, axis=1)
    resid = np.where(present, moved - level[:, None], 0.0)
    # Degrees of freedom: k - 1 runs, less the share of the runs' shifts each configuration of
    # a group of m helped estimate (a table of runs by configurations has (k - 1)(m - 1) once
    # its row and column levels are out). Counted as k - 1, var_v came out (m - 1) / m low and
    # 90% intervals covered 0.86 at 10 runs (benchmarks/quality/interval_coverage.py).
    share = np.ones(len(run_loc))
    for g in groups:
        m = int(g.members.sum())
        share[g.members] = (m - 1) / m
    df_b = np.maximum(k_runs - 1, 0) * share
    # The variance of a run's median of P processes, in units of one process's variance.
    inv_p = np.where(present, _median_var(counts, shape), 0.0).sum(axis=1) / k_runs
    if not (df_b > 0).any():  # one baseline run: the prior is all there is (taken as known)
        none = np.zeros(len(df_b))
        return np.full(len(df_b), config_shift_sd**2), np.full(len(df_b), MAX_DF), none
    # How far a configuration's run locations stray (process noise included, so never zero),
    # its log pulled toward the run's other configurations' by empirical Bayes: a long GPU
    # kernel whose runs agree to 0.1% keeps its 0.1%, where a fixed prior would lend it a
    # launch-bound kernel's 1% for as long as the history is short.
    total, df_v = _pooled_log_variances((resid**2).sum(axis=1), df_b)
    # Not held at zero: where process noise is most of a run location's variance, a difference
    # held at zero is high on average (sigma_v^2 1.1-10 times its truth on model draws,
    # interval_coverage --parts), and the intervals over-covered (0.93 at 2 runs of 9 processes
    # spread 5%). fit keeps the sum of the parts from going below the head's process part.
    var_v = total - var_e * inv_p
    return (
        np.where(df_b > 0, var_v, config_shift_sd**2),
        np.where(df_b > 0, df_v, MAX_DF),
        np.where(df_b > 0, var_e * inv_p, 0.0),
    )


def _pooled_log_variances(ss: np.ndarray, df: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """_shrunk_variances for few degrees of freedom (a variance from under one, with 2 baseline
    runs). Each log is pulled toward the log of the configurations' pooled variance (their
    squares summed over their degrees of freedom), which is right on average and has the
    degrees of freedom of them all, as a chi-square. The mean of their logs, each corrected
    for its bias, was 1.4 times the truth on average once exponentiated (8 configurations of 0.875
    degrees of freedom), and said 2.4 degrees of freedom where the sum holds 7. Each one's own
    log is corrected for its bias at its weight: the log of a variance from df degrees of freedom
    is low by -(digamma(df / 2) + log(2 / df)) on average (1.27 with one), and its exponential
    at weight a high by E[(chi-square_df / df)^a]. Where df is 0 the pooled value stands in.
    Returns the variances and their degrees of freedom."""
    ok = df > 0
    d = np.where(ok, df, 1.0)
    bias = np.where(ok, digamma(d / 2) + np.log(2 / d), 0.0)
    pooled_df = float(df[ok].sum())
    centre = math.log(max(float(ss[ok].sum()) / pooled_df, 1e-300)) if pooled_df > 0 else None
    variances, dof, own = _shrunk_variances(
        np.where(ok, ss * np.exp(-bias), 0.0), df, centre=centre, centre_df=pooled_df
    )
    # log E[(chi-square_d / d)^a] - a bias, a = own: (2 / d)^a Gamma(d / 2 + a) / Gamma(d / 2).
    half = d / 2
    own_high = own * (np.log(2 / d) - bias) + gammaln(half + own) - gammaln(half)
    return variances / np.exp(np.where(ok, own_high, 0.0)), dof


def _process_variance(
    ss_w: np.ndarray, df_w: np.ndarray, fallback: np.ndarray | None, c_n: int
) -> tuple[np.ndarray, np.ndarray]:
    """Each configuration's process-to-process variance and its degrees of freedom: shrunk
    toward the others' where processes were seen, else the fallback (a process location's
    variance from its own samples), else none."""
    if df_w.sum() > 0:
        variances, dof, _ = _shrunk_variances(ss_w, df_w)
        return variances, dof
    if fallback is not None:
        return np.asarray(fallback, dtype=float), np.full(c_n, MAX_DF)
    return np.zeros(c_n), np.full(c_n, MAX_DF)


@dataclass(frozen=True)
class ShiftGroup:
    """Configurations that move together from run to run (and process to process), and the
    baseline runs' shifts they share."""

    members: np.ndarray  # (C,) bool
    u: np.ndarray  # (K,) each baseline run's shift, log scale
    var_u: float  # the variance of a run's shift, pulled toward the prior


def _shift_groups(run_loc: np.ndarray, counts: np.ndarray, run_shift_sd: float) -> list[ShiftGroup]:
    """The groups of configurations that share their runs' shifts: first the one most of the
    run moves with, then, among those set apart from it, the next, while at least
    MIN_GROUP_CONFIGS clearly move together. On a GPU runner the launch-bound kernels of a
    process share a state the long kernels do not have (experiments/gpu_placement_noise.py: two
    states 3.6% apart, one per process), so each kind has its own shifts. A configuration in
    no group keeps its own run-to-run variation."""
    groups: list[ShiftGroup] = []
    left = np.ones(len(run_loc), dtype=bool)
    while left.any():
        u, var_u, together = _common_shifts(run_loc[left], counts[left], run_shift_sd)
        if groups:  # a later group must show that its configurations share a shift
            together &= _moves_with(run_loc[left], u, counts[left])
            if together.sum() < MIN_GROUP_CONFIGS:
                break
        if not together.any():
            break
        members = np.zeros_like(left)
        members[np.flatnonzero(left)[together]] = True
        groups.append(ShiftGroup(members, u, var_u))
        left &= ~members
    return groups


def _moves_with(run_loc: np.ndarray, u: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Configurations whose run locations agree clearly better with the shifts u taken out
    than left alone (the mirror of _moves_apart)."""
    alone, shifted = _run_spreads(run_loc, u, counts)
    return _clearly_below(shifted, alone, counts)


def _common_shifts(
    run_loc: np.ndarray, counts: np.ndarray, run_shift_sd: float
) -> tuple[np.ndarray, float, np.ndarray]:
    """The baseline runs' common shifts and their variance (_run_shifts), from the
    configurations that move with them, and which those are (a (C,) bool)."""
    u, var_u = _run_shifts(run_loc, run_shift_sd)
    apart = _moves_apart(run_loc, u, counts)
    if apart.any() and not apart.all():
        u, var_u = _run_shifts(run_loc[~apart], run_shift_sd)
        apart = _moves_apart(run_loc, u, counts)
    return u, var_u, ~apart


def _moves_apart(run_loc: np.ndarray, u: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Configurations whose run locations agree clearly better left alone than with the runs'
    common shift taken out: on a GPU runner the host's load moves the launch-bound kernels of a
    run and leaves a long kernel alone, and taking the launch-bound kernels' shift out of the
    long kernel would lend it their noise (a 0.1% kernel measured as a 0.9% one)."""
    alone, shifted = _run_spreads(run_loc, u, counts)
    return _clearly_below(alone, shifted, counts)


def _clearly_below(smaller: np.ndarray, larger: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Per configuration: one sum of squared run deviations below the other by more than
    chance gives in SET_APART_LEVEL of baselines, over at least MIN_RUNS_TO_SET_APART runs."""
    k = (counts > 0).sum(axis=1)
    df = np.maximum(k - 1, 1).astype(float)
    with np.errstate(invalid="ignore"):
        result: np.ndarray = (k >= MIN_RUNS_TO_SET_APART) & (
            smaller < larger * fdtri(df, df, SET_APART_LEVEL)
        )
    return result


def _run_spreads(
    run_loc: np.ndarray, u: np.ndarray, counts: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Each configuration's squared deviations of its run locations from their level, left
    alone and with the runs' shifts u taken out."""
    present = counts > 0
    # Every run seen in every configuration (the usual case): nothing to mask.
    full = bool(present.all())

    def spread(x: np.ndarray) -> np.ndarray:
        if full:
            return ((x - nanmean(x, axis=1)[:, None]) ** 2).sum(axis=1)
        level = nanmean(np.where(present, x, np.nan), axis=1)
        return np.where(present, (x - level[:, None]) ** 2, 0.0).sum(axis=1)

    with np.errstate(invalid="ignore"):
        return spread(run_loc), spread(run_loc - u[None, :])


def _run_shifts(run_loc: np.ndarray, run_shift_sd: float) -> tuple[np.ndarray, float]:
    """The baseline runs' common shifts (the median over configurations, twice refined) and
    the variance of a run's common shift, pulled toward the prior while there are few runs."""
    k_all = run_loc.shape[1]
    u = np.zeros(k_all)
    # Every run location finite (the usual case): then so is all below, and the median needs
    # no NaN check (checked for once here).
    finite = bool(np.isfinite(run_loc).all())
    for _ in range(2):
        shifted = run_loc - u[None, :]
        level = nanmean(shifted, axis=1)
        centred = run_loc - level[:, None]
        if k_all == 1:
            u = np.zeros(1)
        else:
            u = column_medians(centred, finite=True) if finite else nanmedian(centred, axis=0)
        u -= np.add.reduce(u) / k_all
    var_u = (PRIOR_RUNS_COMMON * run_shift_sd**2 + float(np.add.reduce(u**2))) / (
        PRIOR_RUNS_COMMON + k_all - 1
    )
    return u, var_u


def _median_var(n: np.ndarray, shape: float = 1.0) -> np.ndarray:
    """Var(median of n processes) / var(one process), for each n (0 where n is 0): normal
    processes' times shape (_median_shape) from 3 processes on (a median of 1 or 2 is their
    mean, whose variance is the same whatever the distribution)."""
    n = np.asarray(n, dtype=float)
    factor = _INEFFICIENCY_BY_N[np.minimum(n.astype(int), len(_INEFFICIENCY_BY_N) - 1)]
    factor = np.where(n >= 3, factor * shape, factor)
    # Counts are never negative; where one is 0 it is divided by 1 and the result dropped.
    present = n > 0
    result: np.ndarray = np.where(present, factor / np.where(present, n, 1.0), 0.0)
    return result


def _spread(
    yb: np.ndarray,
    yh: np.ndarray,
    run_loc: np.ndarray,
    head_loc: np.ndarray,
    cell: np.ndarray,
    cb: np.ndarray,
    ch: np.ndarray,
    c_n: int,
) -> np.ndarray:
    """Sum of squared deviations from the run's median, per configuration; a deviation beyond 3
    robust sd (1.4826 MAD) of its configuration counts as 3 sd, so one process beside a noisy
    neighbour does not widen every run's interval (the median hardly moves for it either)."""
    dev = np.concatenate([yb - run_loc.ravel()[cell], yh - head_loc[ch]])
    cfg = np.concatenate([cb, ch])
    moved = dev != 0
    mad = cell_medians(np.abs(dev[moved]), cfg[moved], c_n)
    cap = np.where(np.isfinite(mad) & (mad > 0), DEVIATION_CAP_SD * 1.4826 * mad, np.inf)[cfg]
    result: np.ndarray = np.bincount(cfg, np.minimum(dev * dev, cap * cap), minlength=c_n)
    return result


def _shrunk_variances(
    ss: np.ndarray, df: np.ndarray, centre: float | None = None, centre_df: float | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each configuration's variance, its log pulled toward the others' (empirical Bayes on
    log-variances, whose sampling variance is about 2 / df): a little where the configurations
    agree, hardly at all where they differ. `centre`: the log the others' stand for, with
    `centre_df` degrees of freedom (default: the mean of the logs). Returns the variances, their
    degrees of freedom, and the weight of each one's own log in it."""
    ok = df > 0
    every = bool(ok.all())  # the usual case: then nothing needs masking

    def where_ok(x: np.ndarray, other: float) -> np.ndarray:
        return x if every else np.where(ok, x, other)

    d = np.where(df > 0, df, 1.0)
    raw = where_ok(ss / d, np.nan)
    top = nanmax(raw)
    floor = top * 1e-8 if np.isfinite(top) else 1e-12
    logs = np.log(np.maximum(raw, max(floor, 1e-16)))
    noise = where_ok(polygamma(1, d / 2), np.inf)
    kept = where_ok(logs, np.nan)
    mean = float(nanmean(kept, axis=None)) if centre is None else centre
    # How far the configurations' variances differ beyond their sampling noise: only as far as
    # the logs' spread exceeds what noise alone gives in POOL_EVIDENCE of cases (the sample
    # variance of n noisy logs is noise * chi2(n - 1) / (n - 1)). From a plain difference, one
    # baseline set in five with 3 runs and 8 configurations hardly pooled at all by chance, and
    # a configuration whose few runs happened to agree got an interval a third as wide as its
    # error: 90% intervals covered 0.86 (benchmarks/quality/interval_coverage.py).
    n = int(ok.sum())
    chance = chdtri(max(n - 1, 1), 1 - POOL_EVIDENCE) / max(n - 1, 1)
    noise_mean = float(noise.mean() if every else np.mean(noise[ok]))
    spread = float(nanvar(kept)) - noise_mean * chance
    tau2 = max(spread, POOL_FLOOR)
    precision = where_ok(1.0 / noise, 0.0) + 1.0 / tau2
    shrunk = (where_ok(logs / noise, 0.0) + mean / tau2) / precision
    # Degrees of freedom: no more than the centre holds (the mean of the logs: what all the
    # configurations' logs hold together; a log-variance from d degrees of freedom holds
    # 2 / trigamma(d / 2) of them: 1.2 of 2 at d = 2).
    held = where_ok(2.0 / noise, 0.0).sum() if centre_df is None else centre_df
    own = where_ok(1.0 / noise, 0.0) / precision
    return np.exp(shrunk), np.minimum(2.0 * precision, held), own


def _base_without_process_shifts(
    yb: np.ndarray, runs: np.ndarray, c_n: int, groups: list[ShiftGroup]
) -> np.ndarray:
    """Take out each baseline process's shift in each group (a worker beside a noisy neighbour
    is slow in every configuration; on a GPU each process draws one of two states for its
    launch-bound kernels), centred on its run's median process so a run's median does not move
    (one process beside a noisy neighbour stays out of it, where centring on the mean would
    spread a third of its shift over the run): what the processes share belongs to the run's
    shift, which the model takes out already, and what a process shares across configurations
    is not noise of any one of them. Left in, it counts as process-to-process noise of every
    configuration. runs: the run of each process (the same in every configuration)."""
    base = yb.reshape(c_n, -1).copy()
    labels, run_of = np.unique(runs, return_inverse=True)
    per_run = np.bincount(run_of)
    # With as many processes in every run, the runs' processes side by side as (process,
    # configuration, run) blocks, so each run's means and medians come from a few whole-array
    # steps rather than a few per run.
    blocks = np.argsort(run_of, kind="stable") if per_run.min() == per_run.max() else None
    for g in groups:
        m = g.members
        members = base[m]
        if blocks is not None and len(members) > 1:
            w = column_medians(members - run_means(members, blocks, run_of, len(labels)))
            by_run = w[blocks].reshape(len(labels), -1)
            w -= row_medians(by_run)[run_of]
        else:
            means = np.zeros_like(members)
            for r in labels:
                cols = runs == r
                means[:, cols] = members[:, cols].mean(axis=1, keepdims=True)
            w = column_medians(members - means)
            for r in labels:
                cols = runs == r
                w[cols] -= median_of_all(w[cols])
        base[m] -= w[None, :]
    return base.ravel()


def _head_without_process_shifts(
    yh: np.ndarray, c_n: int, groups: list[ShiftGroup]
) -> tuple[np.ndarray, np.ndarray]:
    """The same for the head run's processes (one run, centred on its median process). Also
    returns, per configuration, how far its group's fastest process lies below the median one
    (0 outside every group): what the head's level, now the median process's, is in doubt by."""
    head = yh.reshape(c_n, -1).copy()
    gaps = np.zeros(c_n)
    for g in groups:
        m = g.members
        wh = column_medians(head[m] - head[m].mean(axis=1, keepdims=True))
        wh -= median_of_all(wh)
        head[m] -= wh[None, :]
        gaps[m] = max(0.0, -float(wh.min()))
    return head.ravel(), gaps


def _shift_draws(
    diff: np.ndarray,
    sd: np.ndarray,
    tau: float,
    resamples: int,
    rng: np.random.Generator,
) -> np.ndarray:
    """(C, R) draws of the head run's common shift, for each configuration from the others
    that move with it (`shares`); 0 for a configuration that does not.

    Leaving the configuration out keeps a slowed configuration from explaining itself away as
    the runner's shift; with one configuration the shift is the prior's alone. One uniform per
    draw serves every configuration (common random numbers), so the draws move together."""
    tau = max(tau, 1e-6)
    grid = np.linspace(-GRID_WIDTH * tau, GRID_WIDTH * tau, GRID_POINTS)
    resid = diff[:, None] - grid[None, :]
    mix = np.logaddexp(*_mixture_parts(resid, sd[:, None]))
    log_post = mix.sum(axis=0)[None, :] - mix - 0.5 * (grid / tau) ** 2
    post = np.exp(log_post - log_post.max(axis=1, keepdims=True))
    cdf = np.cumsum(post, axis=1)
    cdf /= cdf[:, -1:]
    step = grid[1] - grid[0]
    u = rng.random(resamples)
    jitter = (rng.random(resamples) - 0.5) * step
    picks = rows_searchsorted(cdf, u)
    result: np.ndarray = grid[np.minimum(picks, GRID_POINTS - 1)] + jitter[None, :]
    return result
