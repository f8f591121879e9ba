"""How each heuristic decision constant of the verdict model moves the per-run figures.

Run `python -m benchmarks.quality.sensitivity_sweep` (every constant below at its default and
at a lower and a higher value; a few minutes a value on one core) or `--only NAME` for some;
`--jobs N` measures N values at once, each in a process of its own. Each value is set for the
whole measurement (the module's constant, or the keyword the product passes). Per value:

- on a recorded H200 corpus of `rnx bench` runs (--runs-dir, default
  benchmarks/data/gpu-aa-h200-bs1-8-9proc: 12 runs of 9 processes), replayed as
  benchmarks/quality/verdict_model.py does with the product's defaults: --history baseline runs
  of --base-processes processes (kernalin.yml's baseline-processes, 9), the head from 3
  processes with adaptive sampling (bench_runner/adaptive_rule.py) replayed:
  - unchanged: PASS share and BLOCKs in --unchanged replays;
  - 5% slower, one configuration at a time: the share flagged (WARN or BLOCK), weakest
    configuration and mean over configurations, --per-config replays each;
  - 40% slower: the share that BLOCKs, weakest configuration;
- on a busy-CPU corpus (--cpu-corpus, default benchmarks/data/corpus-crossload.npz; baseline
  quiet and head busy, and the reverse; corpus-crossload-9proc.npz replays adaptive sampling):
  unchanged PASS share (--cpu-unchanged replays) and the weakest configuration's share flagged
  at 15% slower and BLOCKed at 40% (--cpu-per-config replays each);
- coverage of the 90% intervals on data drawn from the model
  (benchmarks/quality/interval_coverage.py): the lowest and the mean over a few settings of
  2-10 runs, 3-9 processes, process spreads 0.5-5% (--sims draws each), 8 configurations;
- coverage of the 90% intervals on the recorded runs, pooled over each corpus's configurations
  (`runs cov`: the H200 corpus, `busy cov`: the busy-CPU one).

No verdict quality may hinge on a constant nobody swept: docs/statistics.md's table of decision
constants names, per constant, the figure that justifies its value.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.quality.model_constants import set_runlevel

DATA = Path(__file__).resolve().parents[1] / "data"


def _set_module(module: str, name: str) -> Callable[[float], Any]:
    """A setter of module.name that returns a restorer."""

    def setter(value: float) -> Any:
        import importlib

        if module == "stats.runlevel":
            return set_runlevel(name, value)  # with the constants worked out from it
        mod = importlib.import_module(module)
        old = getattr(mod, name)
        setattr(mod, name, type(old)(value))
        return lambda: setattr(mod, name, old)

    return setter


def _set_gap_level(value: float) -> Callable[[], None]:
    """GAP_LEVEL with the table of its points, _GAP_SQ_POINT, worked out again for it (the
    value's quantile of (median - minimum)^2 of n standard normals, as
    tests/stats/test_calibration.py checks the default's)."""
    from stats import runlevel

    old_level, old_points = runlevel.GAP_LEVEL, runlevel._GAP_SQ_POINT
    points = old_points.copy()
    rng = np.random.default_rng(0)
    for n in range(2, len(points)):
        x = rng.standard_normal((200_000, n))
        points[n] = np.quantile((np.median(x, axis=1) - x.min(axis=1)) ** 2, value)
    runlevel.GAP_LEVEL, runlevel._GAP_SQ_POINT = value, points

    def restore() -> None:
        runlevel.GAP_LEVEL, runlevel._GAP_SQ_POINT = old_level, old_points

    return restore


def _set_keyword(keyword: str) -> Callable[[float], Any]:
    """A setter of one of compare_many's priors as every caller through `stats` passes it."""

    def setter(value: float) -> Any:
        import stats

        original = stats.compare_many

        def with_it(*args: Any, **kwargs: Any) -> Any:
            kwargs.setdefault(keyword, value)
            return original(*args, **kwargs)

        stats.compare_many = with_it  # type: ignore[assignment]
        return lambda: setattr(stats, "compare_many", original)

    return setter


# name -> (setter, default, values tried beside it). Numerical settings (the shift's grid) and
# bounds on memory are not decisions and are left out.
CONSTANTS: dict[str, tuple[Callable[[float], Any], float, tuple[float, ...]]] = {
    "RUN_SHIFT_SD": (_set_keyword("run_shift_sd"), 0.02, (0.01, 0.04)),
    "CONFIG_SHIFT_SD": (_set_keyword("config_shift_sd"), 0.01, (0.005, 0.02)),
    "PRIOR_RUNS_COMMON": (_set_module("stats.runlevel", "PRIOR_RUNS_COMMON"), 2.0, (1.0, 4.0)),
    "UNCHANGED_SHARE": (_set_module("stats.runlevel", "UNCHANGED_SHARE"), 0.9, (0.7, 0.97)),
    "SLAB_SD": (_set_module("stats.runlevel", "SLAB_SD"), 0.5, (0.2, 1.0)),
    "SET_APART_LEVEL": (_set_module("stats.runlevel", "SET_APART_LEVEL"), 0.01, (0.001, 0.05)),
    "POOL_EVIDENCE": (_set_module("stats.runlevel", "POOL_EVIDENCE"), 0.9, (0.5, 0.99)),
    "POOL_FLOOR": (_set_module("stats.runlevel", "POOL_FLOOR"), 0.05, (0.01, 0.2)),
    "MIN_RUNS_TO_SET_APART": (_set_module("stats.runlevel", "MIN_RUNS_TO_SET_APART"), 3, (2, 5)),
    "MIN_GROUP_CONFIGS": (_set_module("stats.runlevel", "MIN_GROUP_CONFIGS"), 4, (2, 8)),
    "MIN_CONFIGS_FOR_PROCESS_SHIFTS": (
        _set_module("stats.runlevel", "MIN_CONFIGS_FOR_PROCESS_SHIFTS"),
        4,
        (2, 8),
    ),
    "DEVIATION_CAP_SD": (_set_module("stats.runlevel", "DEVIATION_CAP_SD"), 3.0, (2.0, 5.0)),
    "WIDEN_AT": (_set_module("stats.runlevel", "WIDEN_AT"), 0.95, (0.9, 0.975)),
    "MIN_DF": (_set_module("stats.runlevel", "MIN_DF"), 2.0, (1.0, 4.0)),
    "MAX_DF": (_set_module("stats.runlevel", "MAX_DF"), 60.0, (20.0, 200.0)),
    "GAP_LEVEL": (_set_gap_level, 0.9, (0.75, 0.97)),
    "SHAPE_PRIOR_DF": (_set_module("stats.runlevel", "SHAPE_PRIOR_DF"), 10.0, (2.0, 50.0)),
    "SCALE_CAP_SD": (_set_module("stats.runlevel", "SCALE_CAP_SD"), 3.0, (2.0, 5.0)),
    "MIN_CONFIGS_FOR_SCALE": (
        _set_module("stats.runlevel", "MIN_CONFIGS_FOR_SCALE"),
        12,
        (8, 24),
    ),
    "MAX_SCALE": (_set_module("stats.runlevel", "MAX_SCALE"), 4.0, (2.0, 8.0)),
    "TAIL_DF": (_set_module("stats.runlevel", "TAIL_DF"), 12.0, (5.0, 25.0)),
    # Adaptive sampling's rule (replayed on the recorded corpus's extra processes).
    "PLAUSIBLY_SLOWER_P": (
        _set_module("bench_runner.adaptive_rule", "PLAUSIBLY_SLOWER_P"),
        0.5,
        (0.3, 0.7),
    ),
    "ABOUT_TO_BLOCK_P": (
        _set_module("bench_runner.adaptive_rule", "ABOUT_TO_BLOCK_P"),
        0.5,
        (0.3, 0.7),
    ),
    "HIDDEN_SLOWER_P": (
        _set_module("bench_runner.adaptive_rule", "HIDDEN_SLOWER_P"),
        0.99,
        (0.95, 0.999),
    ),
    "MAX_ADDED_PROCESSES": (
        _set_module("bench_runner.adaptive_rule", "MAX_ADDED_PROCESSES"),
        6,
        (3, 9),
    ),
}


@contextmanager
def _set(name: str, value: float) -> Iterator[None]:
    restore = CONSTANTS[name][0](value)
    try:
        yield
    finally:
        restore()


def _coverage(sims: int, seed: int) -> list[float]:
    from benchmarks.quality.verdict_model import coverage_figures

    grid = [(2, 3, 0.005), (3, 9, 0.02), (6, 3, 0.05), (10, 9, 0.005)]
    got = coverage_figures(sims, seed, grid)
    return [share for g in got for share in (g["changed"], g["unchanged"])]


def measure(docs: list[Any], args: argparse.Namespace) -> dict[str, Any]:
    from benchmarks.quality.verdict_model import busy_cpu_figures, pooled_coverage, run_figures

    got = run_figures(
        docs,
        history=args.history,
        unchanged=args.unchanged,
        per_config=args.per_config,
        seed=args.seed,
        base_processes=args.base_processes,
    )
    busy = busy_cpu_figures(
        args.cpu_corpus,
        history=args.history,
        unchanged=args.cpu_unchanged,
        per_config=args.cpu_per_config,
        seed=args.seed,
    )
    cov = _coverage(args.sims, args.seed) if args.sims else []
    flagged = got["flagged_5"]
    busy_flagged = busy["flagged_15"] or {"": float("nan")}
    busy_blocked = busy["blocked_40"] or {"": float("nan")}
    return {
        "busy_pass": busy["pass"],
        "busy_flag_min": min(busy_flagged.values()),
        "busy_block40_min": min(busy_blocked.values()),
        "pass": got["pass"],
        "block": got["block"],
        "flag_min": min(flagged.values()),
        "flag_weakest": min(flagged, key=lambda k: flagged[k]),
        "flag_mean": float(np.mean(list(flagged.values()))),
        "block40_min": min(got["blocked_40"].values()),
        "cov_min": min(cov) if cov else float("nan"),
        "cov_mean": float(np.mean(cov)) if cov else float("nan"),
        "runs_cov": pooled_coverage(got["coverage"]),
        "busy_cov": pooled_coverage(busy["coverage"]),
    }


def _measured(job: tuple[str, float | None, argparse.Namespace]) -> tuple[str, str, dict]:
    """One row: the figures with constant `name` set to `value` (None: every default), in this
    process (each job of --jobs runs in a process of its own, so a value set stays there)."""
    from benchmarks.quality.verdict_model import load_runs

    name, value, args = job
    docs = load_runs(args.runs_dir)
    if value is None:
        return "(all defaults)", "", measure(docs, args)
    with _set(name, value):
        return name, f"{value:g}", measure(docs, args)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs-dir", type=Path, default=DATA / "gpu-aa-h200-bs1-8-9proc")
    p.add_argument("--only", action="append", help="a constant to sweep (default: all)")
    p.add_argument("--history", type=int, default=6, help="baseline runs a replay (6)")
    p.add_argument("--base-processes", type=int, default=9, help="a baseline run's processes (9)")
    p.add_argument("--unchanged", type=int, default=200, help="unchanged replays a value (200)")
    p.add_argument("--per-config", type=int, default=15, help="replays per configuration (15)")
    p.add_argument("--cpu-corpus", type=Path, default=DATA / "corpus-crossload.npz")
    p.add_argument("--cpu-unchanged", type=int, default=200, help="busy CPU: unchanged (200)")
    p.add_argument("--cpu-per-config", type=int, default=10, help="busy CPU: 15%% and 40%% (10)")
    p.add_argument("--sims", type=int, default=40, help="coverage draws per setting (40)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--jobs", type=int, default=1, help="values measured at once (1)")
    args = p.parse_args(argv)
    names = args.only or list(CONSTANTS)
    unknown = sorted(set(names) - set(CONSTANTS))
    if unknown:
        p.error(f"unknown constants {unknown}; known: {', '.join(CONSTANTS)}")
    print(
        f"{args.runs_dir.name}: {args.history} baseline runs of {args.base_processes} processes "
        f"a replay; {args.unchanged} unchanged replays, {args.per_config} per configuration at "
        f"5% and 40%; {args.cpu_corpus.name}: {args.cpu_unchanged} unchanged, "
        f"{args.cpu_per_config} per configuration at 15% and 40%; coverage {args.sims} draws x 4 "
        f"settings; load average {os.getloadavg()[0]:.1f}",
        file=sys.stderr,
    )
    header = (
        f"{'constant':<31} {'value':>7}  {'PASS':>6} {'BLOCK':>5}  {'5% weakest':>10} "
        f"{'5% mean':>7}  {'40% BLOCK':>9}  {'busy PASS':>9} {'busy 15%':>8} {'busy 40%':>8}  "
        f"{'cov min':>7} {'cov mean':>8}  {'runs cov':>8} {'busy cov':>8}"
    )
    print(header)
    jobs: list[tuple[str, float | None, argparse.Namespace]] = [("", None, args)]
    jobs += [(n, v, args) for n in names for v in sorted(CONSTANTS[n][2])]
    if args.jobs > 1:
        with ProcessPoolExecutor(args.jobs, mp_context=get_context("fork")) as pool:
            rows = list(pool.map(_measured, jobs))
    else:
        rows = [_measured(job) for job in jobs]
    last = None
    for name, value, figures in rows:
        if last not in (None, name) and last in CONSTANTS:
            print(f"{'':<31} {CONSTANTS[last][1]:>7g}  (default: the first row)")
        _row(name, value, figures)
        last = name
    if last in CONSTANTS:
        print(f"{'':<31} {CONSTANTS[last][1]:>7g}  (default: the first row)")
    return 0


def _row(name: str, value: str, m: dict[str, Any]) -> None:
    print(
        f"{name:<31} {value:>7}  {m['pass']:>6.1%} {m['block']:>5}  {m['flag_min']:>10.0%} "
        f"{m['flag_mean']:>7.0%}  {m['block40_min']:>9.0%}  {m['busy_pass']:>9.1%} "
        f"{m['busy_flag_min']:>8.0%} {m['busy_block40_min']:>8.0%}  {m['cov_min']:>7.3f} "
        f"{m['cov_mean']:>8.3f}  {m['runs_cov']:>8.3f} {m['busy_cov']:>8.3f}   "
        f"weakest {m['flag_weakest']}",
        flush=True,
    )


if __name__ == "__main__":
    raise SystemExit(main())
