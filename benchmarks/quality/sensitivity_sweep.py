"""How each heuristic decision constant of the verdict model moves the per-run figures.

Run `python -m benchmarks.quality.sensitivity_sweep` (every constant below at its default and
at a lower and a higher value; about a minute a value on 2 idle cores) or `--only NAME` for
some. Each value is set for the whole measurement (the module's constant, or the keyword the
product passes), then put back. Per value, on a recorded corpus of `rnx bench` runs
(--runs-dir, default benchmarks/data/gpu-aa-h200-bs16-128: 12 H200 runs of 3 processes) replayed
as benchmarks/quality/verdict_model.py does (the product's defaults, --history baseline runs):

- unchanged: PASS share and BLOCKs in --unchanged replays;
- 5% slower, one configuration at a time: the share flagged (WARN or BLOCK), weakest
  configuration and mean over configurations, --per-config replays each;
- 40% slower: the share that BLOCKs, weakest configuration;
- coverage of the 90% intervals on data drawn from the model
  (benchmarks/quality/interval_coverage.py): the lowest and the mean over a few settings of
  2-10 runs, 3-9 processes, process spreads 0.5-5% (--sims draws each).

No verdict quality may hinge on a constant nobody swept: docs/statistics.md's table of decision
constants names, per constant, the figure that justifies its value.
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

DATA = Path(__file__).resolve().parents[1] / "data"


def _set_module(module: str, name: str) -> Callable[[float], Any]:
    """A setter of module.name that returns a restorer."""

    def setter(value: float) -> Any:
        import importlib

        mod = importlib.import_module(module)
        old = getattr(mod, name)
        setattr(mod, name, type(old)(value))
        if module == "stats.runlevel" and name == "WIDEN_AT":  # its normal point goes with it
            from scipy.special import stdtrit

            old_normal = mod._NORMAL_AT
            mod._NORMAL_AT = stdtrit(np.inf, value)

            def restore_both() -> None:
                setattr(mod, name, old)
                mod._NORMAL_AT = old_normal

            return restore_both
        return lambda: setattr(mod, name, old)

    return setter


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
    from benchmarks.quality.verdict_model import run_figures

    got = run_figures(
        docs,
        history=args.history,
        unchanged=args.unchanged,
        per_config=args.per_config,
        seed=args.seed,
    )
    cov = _coverage(args.sims, args.seed) if args.sims else []
    flagged = got["flagged_5"]
    return {
        "pass": got["pass"],
        "block": got["block"],
        "flag_min": min(flagged.values()),
        "flag_weakest": min(flagged, key=lambda k: flagged[k]),
        "flag_mean": float(np.mean(list(flagged.values()))),
        "block40_min": min(got["blocked_40"].values()),
        "cov_min": min(cov) if cov else float("nan"),
        "cov_mean": float(np.mean(cov)) if cov else float("nan"),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs-dir", type=Path, default=DATA / "gpu-aa-h200-bs16-128")
    p.add_argument("--only", action="append", help="a constant to sweep (default: all)")
    p.add_argument("--history", type=int, default=6, help="baseline runs a replay (6)")
    p.add_argument("--unchanged", type=int, default=200, help="unchanged replays a value (200)")
    p.add_argument("--per-config", type=int, default=15, help="replays per configuration (15)")
    p.add_argument("--sims", type=int, default=40, help="coverage draws per setting (40)")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    from benchmarks.quality.verdict_model import load_runs

    names = args.only or list(CONSTANTS)
    unknown = sorted(set(names) - set(CONSTANTS))
    if unknown:
        p.error(f"unknown constants {unknown}; known: {', '.join(CONSTANTS)}")
    docs = load_runs(args.runs_dir)
    print(
        f"{args.runs_dir.name}: {len(docs)} runs, {args.history} baseline runs a replay; "
        f"{args.unchanged} unchanged replays, {args.per_config} per configuration at 5% and 40%, "
        f"coverage {args.sims} draws x 4 settings; load average {os.getloadavg()[0]:.1f}",
        file=sys.stderr,
    )
    header = (
        f"{'constant':<31} {'value':>7}  {'PASS':>6} {'BLOCK':>5}  {'5% weakest':>10} "
        f"{'5% mean':>7}  {'40% BLOCK':>9}  {'cov min':>7} {'cov mean':>8}"
    )
    print(header)
    default_row = measure(docs, args)
    _row("(all defaults)", "", default_row)
    for name in names:
        _, default, tried = CONSTANTS[name]
        for value in sorted(itertools.chain(tried)):
            with _set(name, value):
                _row(name, f"{value:g}", measure(docs, args))
        print(f"{'':<31} {default:>7g}  (default: the first row)", flush=True)
    return 0


def _row(name: str, value: str, m: dict[str, Any]) -> None:
    print(
        f"{name:<31} {value:>7}  {m['pass']:>6.1%} {m['block']:>5}  {m['flag_min']:>10.0%} "
        f"{m['flag_mean']:>7.0%}  {m['block40_min']:>9.0%}  {m['cov_min']:>7.3f} "
        f"{m['cov_mean']:>8.3f}   weakest {m['flag_weakest']}",
        flush=True,
    )


if __name__ == "__main__":
    raise SystemExit(main())
