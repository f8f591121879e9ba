"""Do the gate's 90% intervals cover the true ratio 90% of the time? Data drawn from the model.

Run `python -m benchmarks.quality.interval_coverage [--sims 400] [--set POOL_FLOOR=1]` (--set: a
stats.runlevel constant set otherwise, benchmarks/quality/model_constants.py). Each simulated
pull request is one head run against R baseline runs of the run-level model
(stats/runlevel.py), K configurations:

    y[c, r, p, i] = mu[c] + delta[c] * (r is the head) + u[r] + v[c, r] + e[c, r, p] + noise

u ~ N(0, sd_u) per run, v ~ N(0, sd_v) per configuration and run, e ~ N(0, sd_e) per process,
and per sample a log-normal noise (sd_sample) plus, with probability --outliers, an interference
that only adds time (an exponential of mean 3 sd_sample): what the band mean (bootstrap.LOW)
is built to ignore. One configuration has a true shift delta (--shift), the others none. Each
draw is compared with stats.compare_many exactly as the server compares (base_runs given,
product defaults), and the 90% interval of every configuration is checked against its true
ratio exp(delta[c]). Prints coverage per setting: the changed configuration, the unchanged ones,
and the worst single configuration index.

`--parts` also sets the model's estimates against the truth the data were drawn with, per setting
(means over the pull requests): sigma_e^2 over the process location's true variance (sd_e^2 plus
the band mean's own noise, measured here), sigma_v^2 over sd_v^2, and, for the changed and the
unchanged configurations, the model's variance with the shift known (stats.runlevel.RunFit.sd^2)
and the draws' variance, each over the mean squared error of the draws' median, and the head's
scale phi (its mean; 1 below 12 configurations). So a coverage off its 90% can be traced to the
part that is off.
"""

from __future__ import annotations

import argparse
import itertools
import time
from typing import Any

import numpy as np

import stats
from benchmarks.quality.model_constants import add_set_flag, apply_settings
from stats import bootstrap, runlevel

SD_U = 0.02  # the product's prior for a run's common shift (stats.compare.RUN_SHIFT_SD)
SD_V = 0.01  # and for one configuration's own shift (CONFIG_SHIFT_SD)


def draw_run(
    rng: np.random.Generator,
    mu: np.ndarray,
    shift: np.ndarray,
    processes: int,
    samples: int,
    sd_e: float,
    sd_sample: float,
    outliers: float,
    sd_u: float,
    sd_v: float,
) -> list[list[np.ndarray]]:
    """One run: per configuration, one array of times per process."""
    u = rng.normal(0.0, sd_u)
    out = []
    for c in range(mu.size):
        v = rng.normal(0.0, sd_v)
        groups = []
        for _ in range(processes):
            e = rng.normal(0.0, sd_e)
            log_t = mu[c] + shift[c] + u + v + e + rng.normal(0.0, sd_sample, samples)
            hit = rng.random(samples) < outliers
            log_t = log_t + hit * rng.exponential(3 * sd_sample, samples)
            groups.append(np.exp(log_t))
        out.append(groups)
    return out


def coverage(
    *,
    runs: int,
    processes: int,
    sd_e: float,
    sims: int,
    configs: int,
    shift: float,
    samples: int,
    sd_sample: float,
    outliers: float,
    seed: int,
    sd_u: float = SD_U,
    sd_v: float = SD_V,
    parts: bool = False,
) -> dict[str, float]:
    rng = np.random.default_rng(seed)
    mu = np.log(rng.uniform(1e4, 1e6, configs))
    delta = np.zeros(configs)
    delta[0] = np.log1p(shift)
    covered = np.zeros(configs)
    # With --parts, each pull request's fit is kept as the comparison made it (the draws the
    # server's would be), without changing which numbers are drawn.
    fits: list[runlevel.RunFit] = []
    fit = runlevel.fit

    def kept_fit(*args: Any, **kwargs: Any) -> runlevel.RunFit:
        fits.append(fit(*args, **kwargs))
        return fits[-1]

    if parts:
        runlevel.fit = kept_fit
    try:
        for _ in range(sims):
            args = (processes, samples, sd_e, sd_sample, outliers, sd_u, sd_v)
            covered += _one(rng, mu, delta, runs, args)
    finally:
        runlevel.fit = fit
    share = covered / sims
    got = {"changed": share[0], "unchanged": share[1:].mean(), "worst": share.min()}
    if parts:
        got.update(_parts(fits, delta, sd_e, sd_v, sd_sample, samples, outliers, rng))
    return got


def _one(
    rng: np.random.Generator, mu: np.ndarray, delta: np.ndarray, runs: int, args: tuple
) -> np.ndarray:
    """One pull request: which configurations' 90% intervals hold their true ratio. args:
    draw_run's, after mu and the shift."""
    configs = len(mu)
    processes = args[0]
    base_runs = [draw_run(rng, mu, np.zeros(configs), *args) for _ in range(runs)]
    head = draw_run(rng, mu, delta, *args)
    pairs = []
    labels = []
    for c in range(configs):
        base = [g for run in base_runs for g in run[c]]
        pairs.append((base, head[c]))
        labels.append([r for r in range(runs) for _ in range(processes)])
    found = stats.compare_many(
        pairs, base_runs=labels, seed=int(rng.integers(1 << 31)), resamples=2000
    )
    truth = np.exp(delta)
    return np.array([f.low <= t <= f.high for f, t in zip(found, truth, strict=True)])


def _parts(
    fits: list[runlevel.RunFit],
    delta: np.ndarray,
    sd_e: float,
    sd_v: float,
    sd_sample: float,
    samples: int,
    outliers: float,
    rng: np.random.Generator,
) -> dict[str, float]:
    """The model's estimates over the truth (see the module's docstring)."""
    # A process location's own noise: the band mean of its samples, drawn as draw_run draws them.
    log_t = rng.normal(0.0, sd_sample, (4000, samples))
    log_t += (rng.random(log_t.shape) < outliers) * rng.exponential(3 * sd_sample, log_t.shape)
    band = float(np.var(bootstrap.group_locations(list(np.exp(log_t)), bootstrap.LOW, log=True)))
    err2 = np.array([(np.median(f.draws, axis=1) - delta) ** 2 for f in fits])
    model = np.array([f.sd**2 for f in fits])
    draws = np.array([f.draws.var(axis=1) for f in fits])
    got = {
        "sigma_e": float(np.mean([f.process_var.mean() for f in fits])) / (sd_e**2 + band),
        "sigma_v": float(np.mean([f.config_shift_var.mean() for f in fits])) / sd_v**2,
        "phi": float(np.mean([f.scale.mean() for f in fits])),
    }
    for name, rows in (("changed", slice(0, 1)), ("unchanged", slice(1, None))):
        got[f"model_{name}"] = float(model[:, rows].mean() / err2[:, rows].mean())
        got[f"draws_{name}"] = float(draws[:, rows].mean() / err2[:, rows].mean())
    return got


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sims", type=int, default=400)
    p.add_argument("--configs", type=int, default=8)
    p.add_argument("--shift", type=float, default=0.05, help="the changed configuration's")
    p.add_argument("--samples", type=int, default=20, help="samples per process")
    p.add_argument("--sd-sample", type=float, default=0.03)
    p.add_argument("--outliers", type=float, default=0.05)
    p.add_argument("--runs", default="2,3,6,10")
    p.add_argument("--processes", default="3,6,9")
    p.add_argument("--sd-e", default="0.005,0.02,0.05", help="process-to-process spreads")
    p.add_argument("--sd-u", type=float, default=SD_U, help="the true run-to-run common spread")
    p.add_argument("--sd-v", type=float, default=SD_V, help="the true per-configuration spread")
    p.add_argument("--parts", action="store_true", help="estimates against the truth as well")
    p.add_argument(
        "--seed", type=int, default=0, help="the first setting's seed (each next one adds 1)"
    )
    add_set_flag(p)
    args = p.parse_args(argv)
    apply_settings(p, args.set)
    print(
        f"{args.sims} pull requests per setting, {args.configs} configurations, one "
        f"{args.shift:.0%}"
        f" slower; sd_u {args.sd_u}, sd_v {args.sd_v}, sample sd {args.sd_sample}, outliers "
        f"{args.outliers:.0%}; coverage of the 90% interval (target 0.88-0.92)"
    )
    head = f"{'runs':>4} {'procs':>5} {'sd_e':>6}  changed  unchanged  worst  seconds"
    if args.parts:
        # Each an estimate's mean over its truth's: sigma_e^2, sigma_v^2; then the model's
        # variance and the draws', over the squared error, for the changed and unchanged ones.
        head += "  sigma_e^2 sigma_v^2  sd^2:changed draws:changed sd^2:unch draws:unch"
        head += "          phi"
    print(head)
    grid = itertools.product(
        [int(x) for x in args.runs.split(",")],
        [int(x) for x in args.processes.split(",")],
        [float(x) for x in args.sd_e.split(",")],
    )
    for seed, (runs, processes, sd_e) in enumerate(grid, start=args.seed):
        t0 = time.perf_counter()
        got = coverage(
            runs=runs,
            processes=processes,
            sd_e=sd_e,
            sims=args.sims,
            configs=args.configs,
            shift=args.shift,
            samples=args.samples,
            sd_sample=args.sd_sample,
            outliers=args.outliers,
            seed=seed,
            sd_u=args.sd_u,
            sd_v=args.sd_v,
            parts=args.parts,
        )
        line = (
            f"{runs:>4} {processes:>5} {sd_e:>6}  {got['changed']:.3f}    {got['unchanged']:.3f}"
            f"      {got['worst']:.3f}  {time.perf_counter() - t0:.1f}"
        )
        if args.parts:
            parts = ("model_changed", "draws_changed", "model_unchanged", "draws_unchanged", "phi")
            line += f"  {got['sigma_e']:9.2f} {got['sigma_v']:9.2f}"
            line += "".join(f"  {got[k]:11.2f}" for k in parts)
        print(line, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
