"""Adaptive sampling's stopping rule: which configurations of a run are measured more, and why.

The contract with the statistics: a comparison whose verdict is "undecided" is one the data
cannot tell yet; every other verdict is decided. A run measures more, in fresh processes,
only for (1) configurations still undecided and (2) configurations about to BLOCK, once each,
so a BLOCK is confirmed by processes that did not produce it. The harness
(bench_runner/adaptive.py) and benchmarks/adaptive_quality.py both decide with this rule.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from rnx.schema import GateReport

# A slowdown more likely than not beyond the block threshold, in a run that BLOCKs: the gate's
# multiplicity control may leave it unblocked, but re-measuring a suspect costs little.
ABOUT_TO_BLOCK_P = 0.5
# Fresh processes a configuration about to BLOCK gets before its verdict is final.
CONFIRM_PROCESSES = 2
# The most processes a run adds, whatever its budget: the head's processes narrow only the
# head's side, so past a few more the baseline's own spread keeps a configuration undecided.
MAX_ADDED_PROCESSES = 6


@dataclass(frozen=True)
class Row:
    """What the rule needs of one configuration's comparison."""

    id: str
    verdict: str  # faster | slower | equivalent | undecided | broken | skipped | no-baseline
    p_block: float | None  # P(ratio > 1 + block threshold)
    reason: str | None = None


@dataclass(frozen=True)
class Open:
    """A configuration that gets more processes, and why (shown on the progress line)."""

    id: str
    why: str
    confirming: bool  # about to BLOCK: re-measured once before the verdict is final


def about_to_block(tier: str, row: Row) -> bool:
    return tier == "BLOCK" and row.verdict == "slower" and (row.p_block or 0.0) >= ABOUT_TO_BLOCK_P


def still_open(tier: str, rows: Sequence[Row], confirmed: Collection[str]) -> list[Open]:
    """The configurations to measure more: undecided ones, and ones about to BLOCK that have
    not been confirmed yet (`confirmed`: ids already re-measured for a BLOCK)."""
    found = []
    for row in rows:
        if row.verdict == "undecided":
            found.append(Open(row.id, f"undecided: {_short(row.reason)}", confirming=False))
        elif about_to_block(tier, row) and row.id not in confirmed:
            found.append(
                Open(
                    row.id,
                    f"about to BLOCK (P(beyond the threshold) = {row.p_block:.2f}): "
                    "confirming in fresh processes",
                    confirming=True,
                )
            )
    return found


def rows_of(report: GateReport) -> list[Row]:
    """The rule's view of a gate report (configurations that were not measured are left out:
    more processes cannot change a broken, skipped or baseline-less configuration)."""
    return [
        Row(c.id, c.verdict, c.p_block, c.reason) for c in report.comparisons if c.status == "ok"
    ]


def _short(reason: str | None) -> str:
    if not reason:
        return "the data cannot tell yet"
    return reason.split("; more samples")[0][:160]
