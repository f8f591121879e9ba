"""Setting one of stats.runlevel's numeric constants otherwise for a run, with the constants
worked out from it: sensitivity_sweep's setters, and `--set NAME=VALUE` for the quality
scripts, to see what a constant moves before it is swept or changed."""

from __future__ import annotations

import argparse
from collections.abc import Callable

import numpy as np


def set_runlevel(name: str, value: float) -> Callable[[], None]:
    """Sets stats.runlevel.name to value in the constant's own type; returns a restorer. The
    normal's point (_NORMAL_AT) and the noise's quantiles (_NOISE) go with WIDEN_AT and
    TAIL_DF."""
    from scipy.special import stdtrit

    from stats import runlevel

    old = getattr(runlevel, name)
    derived = runlevel._NORMAL_AT, runlevel._NOISE
    setattr(runlevel, name, type(old)(value))
    if name in ("WIDEN_AT", "TAIL_DF"):
        runlevel._NORMAL_AT = stdtrit(np.inf, runlevel.WIDEN_AT)
        runlevel._NOISE = runlevel._noise_quantiles(runlevel.TAIL_DF, runlevel.WIDEN_AT)

    def restore() -> None:
        setattr(runlevel, name, old)
        runlevel._NORMAL_AT, runlevel._NOISE = derived

    return restore


def add_set_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a stats.runlevel constant set otherwise (e.g. POOL_FLOOR=1)",
    )


def apply_settings(parser: argparse.ArgumentParser, settings: list[str]) -> None:
    """Sets each NAME=VALUE on stats.runlevel; a clear error for a name it does not have."""
    from stats import runlevel

    for setting in settings:
        name, _, value = setting.partition("=")
        old = getattr(runlevel, name, None)
        if not name.isupper() or isinstance(old, bool) or not isinstance(old, (int, float)):
            parser.error(f"--set {setting}: stats.runlevel has no numeric constant {name!r}")
        if name == "GAP_LEVEL":  # its table of points is worked out by sensitivity_sweep
            parser.error(f"--set {setting}: sweep GAP_LEVEL with sensitivity_sweep --only")
        try:
            number = float(value)
        except ValueError:
            parser.error(f"--set {setting}: {value!r} is not a number")
        set_runlevel(name, number)
