"""`rnx compare BASE.json HEAD.json`: the offline verdict between two results files."""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence

from rnx.config import GateSettings, load_config, override
from rnx.formatting import SPEED_OF_LIGHT_NOTE, format_headline, format_peaks, format_ratio
from rnx.plain_table import comparison_table, explanation_lines
from rnx.schema import GateReport, ResultsDocument, load_results
from rnx.verdict import evaluate

# Beyond this the medians' ratio and the ratio read as different numbers (the medians are printed
# to three significant digits, a rounding of up to 0.5% each).
_RATIO_AGREES = 0.01
_PAIRED_RATIO = (
    "in paired mode the ratio is the middle (45th-55th percentile) of each round's head/base "
    "ratio, base and head timed in turn in one process, bootstrapped over the processes; "
    "noise a round shares cancels in its ratio but moves both medians"
)
_SINGLE_RATIO = (
    "the ratio compares each worker process's fast band of times (its 10th-40th percentile: "
    "interference only ever adds time), bootstrapped over processes and baseline runs; the "
    "medians pool every sample of a side, so slow stragglers and one slow process move them"
)


def ratio_notes(report: GateReport, *, paired: bool) -> list[str]:
    """Why a ratio differs from the ratio of the medians printed beside it, where it does."""
    differing = []
    for c in report.comparisons:
        if c.ratio and c.base_median_ns and c.head_median_ns:
            medians = c.head_median_ns / c.base_median_ns
            if abs(math.log(c.ratio / medians)) > math.log1p(_RATIO_AGREES):
                differing.append(
                    f"{c.id} (ratio {format_ratio(c.ratio)}, medians {format_ratio(medians)})"
                )
    if not differing:
        return []
    return [
        f"note: the ratio is not head median / base median for {', '.join(differing)}:",
        f"      {_PAIRED_RATIO if paired else _SINGLE_RATIO} (docs/statistics.md)",
    ]


def format_table(report: GateReport, *, paired: bool = False) -> str:
    """The per-configuration table, then the tier and its reasons (and, when the documents
    carry speed-of-light scores, a column of them, base -> head, and the peaks they use)."""
    with_sol = any(c.speed_of_light or c.base_speed_of_light for c in report.comparisons)
    lines = comparison_table(report.comparisons)
    lines.extend(ratio_notes(report, paired=paired))
    lines.append("")
    # A PASS that could not have seen a block-sized slowdown says so, as on every surface.
    blind = None if report.inconclusive is None else report.inconclusive.resolution
    lines.append(f"tier: {format_headline(report.tier, blind)}")
    lines.extend(f"  - {reason}" for reason in report.reasons)
    explained = explanation_lines(report.comparisons)
    if explained:
        lines += ["", *explained]
    if with_sol:
        lines += ["", *_speed_of_light_notes(report)]
    return "\n".join(lines)


def _speed_of_light_notes(report: GateReport) -> list[str]:
    sides = {"base": [c.base_speed_of_light for c in report.comparisons]}
    sides["head"] = [c.speed_of_light for c in report.comparisons]
    lines = [f"note: {SPEED_OF_LIGHT_NOTE}"]
    for side, found in sides.items():
        parts = sorted({format_peaks(s.peak_source, s.peak_part) for s in found if s})
        if parts:
            lines.append(f"note: {side} peaks: {'; '.join(parts)}")
    return lines


def _fraction_arg(text: str) -> float:
    try:
        value = text.strip()
        return float(value[:-1]) / 100 if value.endswith("%") else float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a percentage; write 25% or 0.25"
        ) from None


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="rnx compare",
        description="Offline verdict between two results files; exit 1 on BLOCK, 2 on bad input.",
    )
    p.add_argument("base", help="results file of the baseline (BASE.json)")
    p.add_argument("head", help="results file to judge (HEAD.json)")
    p.add_argument("--json", action="store_true", help="print the gate report as JSON")
    p.add_argument("--config", help="kernalin.yml to read gate settings from")
    p.add_argument("--block-threshold", type=_fraction_arg, help="e.g. 25%% (default from config)")
    p.add_argument("--rope", type=_fraction_arg, help="e.g. 2%% (default from config)")
    p.add_argument("--seed", type=int, default=0, help="random seed of the bootstrap (0)")
    p.add_argument(
        "--explain-all",
        action="store_true",
        help="the profile diff of every configuration, not only those slower or grown",
    )
    return p


def _settings(args: argparse.Namespace) -> GateSettings:
    gate = load_config(args.config).gate if args.config else GateSettings()
    changes = {"block-threshold": args.block_threshold, "rope": args.rope}
    return override(gate, changes, source="command line", key_prefix="--")


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    gate = _settings(args)
    base: ResultsDocument = load_results(args.base)
    head: ResultsDocument = load_results(args.head)
    if head.settings.mode == "single" and base.environment.key != head.environment.key:
        print(
            f"rnx compare: warning: environments differ ({base.environment.key} vs "
            f"{head.environment.key}); timings may not be comparable",
            file=sys.stderr,
        )
    report = evaluate(head, [base], gate, seed=args.seed, explain_all=args.explain_all)
    paired = head.settings.mode == "paired"
    print(report.model_dump_json(indent=2) if args.json else format_table(report, paired=paired))
    return 1 if report.tier == "BLOCK" else 0


__all__ = ["format_table", "main", "ratio_notes"]
