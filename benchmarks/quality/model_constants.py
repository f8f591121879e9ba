"""`--set NAME=VALUE` for the quality scripts: one of stats.runlevel's numeric constants set
otherwise for the run, to see what it moves before it is swept or changed (sensitivity_sweep
sets them the same way, with the constants worked out from them)."""

from __future__ import annotations

import argparse


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
        try:
            setattr(runlevel, name, type(old)(float(value)))
        except ValueError:
            parser.error(f"--set {setting}: {value!r} is not a number")
