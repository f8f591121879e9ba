"""`rnx compare-hardware RUN.json RUN.json ...`: one workload on 2 to 6 environments."""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence
from pathlib import Path

from rnx.errors import UserError
from rnx.formatting import (
    MISSING,
    format_factor_interval,
    format_money,
    format_rate,
    format_speed_of_light,
)
from rnx.hardware import (
    CURRENCY,
    MAX_ENVIRONMENTS,
    MIN_ENVIRONMENTS,
    Cell,
    HardwareComparison,
    compare_hardware,
    format_latency,
    format_verdict,
    to_csv,
    to_markdown,
)
from rnx.schema import ResultsDocument, load_results


def format_table(comparison: HardwareComparison) -> str:
    """The per-configuration table (one line per environment), then the software side by side."""
    header = (
        "configuration",
        "environment",
        "median [90% interval]",
        "items/s",
        f"cost/1M items ({CURRENCY})",
        "time vs baseline [90%]",
        "verdict",
    )
    rows: list[tuple[str, ...]] = [header]
    cells = [c for row in comparison.rows for c in row.cells]
    for row in comparison.rows:
        for n, cell in enumerate(row.cells):
            rows.append(
                (
                    row.id if n == 0 else "",
                    cell.environment,
                    format_latency(cell),
                    format_rate(cell.items_per_second),
                    format_money(cell.cost_per_million) + (" *" if cell.cheapest else ""),
                    format_factor_interval(cell.ratio, cell.ratio_low, cell.ratio_high)
                    if n
                    else "",
                    format_verdict(cell),
                )
            )
    if any(c.speed_of_light is not None for row in comparison.rows for c in row.cells):
        rows = [(*r, "SOL" if n == 0 else _sol(cells[n - 1])) for n, r in enumerate(rows)]
    lines = [f"workload {comparison.workload}; baseline {comparison.baseline.label}", ""]
    lines += _columns(rows, right=range(2, 6))
    if any(c.cheapest for c in cells):
        lines.append(f"(* the cheapest per million items of its configuration, in {CURRENCY})")
    lines += ["", "software (* where the environments differ)"]
    soft: list[tuple[str, ...]] = [("", *[s.label for s in comparison.sides])]
    for srow in comparison.software:
        mark = "* " if srow.differs else "  "
        soft.append((mark + srow.label, *[v or MISSING for v in srow.values]))
    lines += _columns(soft, right=())
    notes = list(comparison.notes)
    for row in comparison.rows:
        notes += sorted({f"{row.id}: {c.environment}: {c.note}" for c in row.cells if c.note})
    if notes:
        lines += ["", "notes:"] + [f"  - {n}" for n in notes]
    return "\n".join(lines)


def _columns(rows: list[tuple[str, ...]], *, right: Sequence[int]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    out = []
    for n, r in enumerate(rows):
        pairs = enumerate(zip(r, widths, strict=True))
        cells = [c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in pairs]
        out.append("  ".join(cells).rstrip())
        if n == 0:
            out.append("  ".join("-" * w for w in widths))
    return out


def _sol(cell: Cell) -> str:
    return format_speed_of_light(cell.speed_of_light, None)


def parse_price(text: str) -> tuple[str, float]:
    """ENV=3.50 -> ("ENV", 3.5): an hourly price for the environment with that name or key."""
    env, sep, amount = text.rpartition("=")
    try:
        price = float(amount)
    except ValueError:
        price = math.nan
    if not sep or not env or not math.isfinite(price) or price < 0:
        raise UserError(
            f"--price {text!r}: write ENV=PRICE, an environment's name or key and its hourly "
            "price, e.g. --price h200=3.50"
        )
    return env, price


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="rnx compare-hardware",
        description="One workload's results from 2 to 6 environments side by side: median "
        "time, items per second, cost per million items, and which machine is credibly faster. "
        "The first file is the baseline.",
    )
    p.add_argument("runs", nargs="+", metavar="RUN.json", help="results documents (2 to 6)")
    p.add_argument(
        "--price",
        action="append",
        default=[],
        metavar="ENV=PRICE",
        help="hourly price of an environment (its name or key), e.g. h200=3.50; repeatable",
    )
    p.add_argument("--csv", metavar="FILE", help="also write the table as CSV ('-': stdout only)")
    p.add_argument(
        "--markdown",
        metavar="FILE",
        help="also write the table as Markdown, to paste into a pull request or a design doc "
        "('-': stdout only)",
    )
    p.add_argument("--seed", type=int, default=0, help="random seed of the bootstrap (0)")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    if not MIN_ENVIRONMENTS <= len(args.runs) <= MAX_ENVIRONMENTS:
        raise UserError(
            f"give {MIN_ENVIRONMENTS} to {MAX_ENVIRONMENTS} results files, got {len(args.runs)}"
        )
    prices: dict[str, float] = {}
    for text in args.price:
        env, price = parse_price(text)
        if env in prices:
            raise UserError(f"--price names {env!r} twice")
        prices[env] = price
    documents: list[ResultsDocument] = [load_results(path) for path in args.runs]
    for path, doc in zip(args.runs, documents, strict=True):
        if doc.settings.mode != "single":
            raise UserError(
                f"{path} is a paired run (base and head in one job); compare-hardware needs "
                "single runs, one per environment"
            )
    comparison = compare_hardware(documents, prices=prices, seed=args.seed)
    exports = [
        ("--csv", "CSV", args.csv, to_csv),
        ("--markdown", "Markdown", args.markdown, to_markdown),
    ]
    if args.csv == "-" and args.markdown == "-":
        raise UserError("--csv - and --markdown - both ask for stdout: write one to a file")
    for _, _, target, render in exports:
        if target == "-":
            sys.stdout.write(render(comparison))
            return 0
    print(format_table(comparison))
    for flag, kind, target, render in exports:
        if target:
            try:
                Path(target).write_text(render(comparison), encoding="utf-8")
            except OSError as e:
                raise UserError(f"cannot write {flag} {target}: {e.strerror or e}") from None
            print(f"\n{kind} written to {target}", file=sys.stderr)
    return 0


__all__ = ["format_latency", "format_table", "format_verdict", "main", "parse_price"]
