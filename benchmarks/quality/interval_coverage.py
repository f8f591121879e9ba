"""Do the gate's 90% intervals cover the true ratio 90% of the time? Data drawn from the model.

Run `python -m benchmarks.quality.interval_coverage [--sims 400]`. Each simulated pull request is
one
head run against R baseline runs of the run-level model (stats/runlevel.py), K configurations:

    y[c, r, p, i] = mu[c] + delta[c] * (r is the head) + u[r] + v[c, r] + e[c, r, p] + noise

u ~ N(0, sd_u) per run, v ~ N(0, sd_v) per configuration and run, e ~ N(0, sd_e) per process,
and per sample a log-normal noise (sd_sample) plus, with probability --outliers, an interference
that only adds time (an exponential of mean 3 sd_sample): what the band mean (bootstrap.LOW)
is built to ignore. One configuration has a true shift delta (--shift), the others none. Each
draw is compared with stats.compare_many exactly as the server compares (base_runs given,
product defaults), and the 90% interval of every configuration is checked against its true
ratio exp(delta[c]). Prints coverage per setting: the changed configuration, the unchanged ones,
and the worst single configuration index.
"""

from __future__ import annotations

import argparse
import itertools
import time

import numpy as np

import stats

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
) -> dict[str, float]:
    rng = np.random.default_rng(seed)
    mu = np.log(rng.uniform(1e4, 1e6, configs))
    delta = np.zeros(configs)
    delta[0] = np.log1p(shift)
    covered = np.zeros(configs)
    for _ in range(sims):
        args = (processes, samples, sd_e, sd_sample, outliers, sd_u, sd_v)
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
        covered += [f.low <= t <= f.high for f, t in zip(found, truth, strict=True)]
    share = covered / sims
    return {"changed": share[0], "unchanged": share[1:].mean(), "worst": share.min()}


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
    args = p.parse_args(argv)
    print(
        f"{args.sims} pull requests per setting, {args.configs} configurations, one "
        f"{args.shift:.0%}"
        f" slower; sd_u {args.sd_u}, sd_v {args.sd_v}, sample sd {args.sd_sample}, outliers "
        f"{args.outliers:.0%}; coverage of the 90% interval (target 0.88-0.92)"
    )
    print(f"{'runs':>4} {'procs':>5} {'sd_e':>6}  changed  unchanged  worst  seconds")
    grid = itertools.product(
        [int(x) for x in args.runs.split(",")],
        [int(x) for x in args.processes.split(",")],
        [float(x) for x in args.sd_e.split(",")],
    )
    for seed, (runs, processes, sd_e) in enumerate(grid):
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
        )
        print(
            f"{runs:>4} {processes:>5} {sd_e:>6}  {got['changed']:.3f}    {got['unchanged']:.3f}"
            f"      {got['worst']:.3f}  {time.perf_counter() - t0:.1f}",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
