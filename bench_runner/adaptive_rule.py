"""Adaptive sampling's stopping rule: which configurations of a run are measured more, and why.

The contract with the statistics: a comparison whose verdict is "undecided" is one the data
cannot tell yet; every other verdict is decided. A run measures more, in fresh processes,
only for (1) configurations still undecided that may be slower (PLAUSIBLY_SLOWER_P), (2)
configurations about to BLOCK, once each, so a BLOCK is confirmed by processes that did not
produce it, and (3) credible slowdowns more likely than not beyond the block threshold in a run
that does not BLOCK: the tier itself is undecided between WARN and BLOCK there, and (4) in a
PASS run, configurations slower on their own (HIDDEN_SLOWER_P) that the gate's control over the
run's configurations leaves a note: more processes can make a real slowdown credible. The harness
(bench_runner/adaptive.py) and benchmarks/quality/adaptive_quality.py both decide with this rule.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from rnx.schema import GateReport, ResultsDocument, Samples

# A credible slowdown more likely than not beyond the block threshold: in a run that BLOCKs, the
# gate's multiplicity control may leave it unblocked, but re-measuring a suspect costs little; in
# a run that does not, it is a WARN that more processes may show is a BLOCK (docs/results.md, "A
# busy CPU recorded again, with 9 processes a run").
ABOUT_TO_BLOCK_P = 0.5
# Fresh processes a configuration about to BLOCK gets before its verdict is final.
CONFIRM_PROCESSES = 2
# The most processes a run adds, whatever its budget: the head's processes narrow only the
# head's side, so past a few more the baseline's own spread keeps a configuration undecided.
MAX_ADDED_PROCESSES = 6
# An undecided configuration gets more processes only where a slowdown beyond the rope is at
# least this likely: there they can make it a WARN or a BLOCK; elsewhere they could at most show
# it equivalent, which changes no tier. Measuring every undecided configuration cost unchanged
# runs of the corpora 2.9 processes (1.24x the time) and found no more slowdowns
# (benchmarks/quality/time_to_decision.py; docs/results.md, "Time to a decision").
PLAUSIBLY_SLOWER_P = 0.5
# A PASS run's configuration slower on its own at least this surely, that the gate's control over
# the run's configurations leaves a note, gets more processes: they narrow the head's side, so a
# real slowdown becomes credible over the run. On corpus-crossload-9proc-b (baseline runs of 9
# processes) it raised 15% slowdowns flagged from 91.5% to 98.3% pooled, and unchanged runs
# PASSed 96.5% (98.0% without it); at 0.95 (every such configuration) they PASSed 95.8%, at 0.999
# the 15% slowdowns were flagged 93.7% (docs/results.md, "Slowdowns hidden by the family").
HIDDEN_SLOWER_P = 0.99


@dataclass(frozen=True)
class Row:
    """What the rule needs of one configuration's comparison."""

    id: str
    verdict: str  # faster | slower | equivalent | undecided | broken | skipped | no-baseline
    p_block: float | None  # P(ratio > 1 + block threshold)
    reason: str | None = None
    p_slower: float | None = None  # P(ratio > 1 + rope); None: unknown, treated as plausible


@dataclass(frozen=True)
class Open:
    """A configuration that gets more processes, and why (shown on the progress line)."""

    id: str
    why: str
    confirming: bool  # about to BLOCK: re-measured once before the verdict is final


def likely_beyond_block(row: Row) -> bool:
    return row.verdict == "slower" and (row.p_block or 0.0) >= ABOUT_TO_BLOCK_P


def about_to_block(tier: str, row: Row) -> bool:
    return tier == "BLOCK" and likely_beyond_block(row)


def hidden_by_family(tier: str, row: Row) -> bool:
    """A PASS run with a configuration slower on its own: the gate's control over the run's
    configurations keeps it a note, and more processes narrow the head's side."""
    return tier == "PASS" and row.verdict == "slower" and (row.p_slower or 0.0) >= HIDDEN_SLOWER_P


def may_block(tier: str, row: Row) -> bool:
    """A WARN (or PASS) run with a slowdown more likely than not beyond the block threshold:
    more processes decide between WARN and BLOCK."""
    return tier != "BLOCK" and likely_beyond_block(row)


def still_open(
    tier: str,
    rows: Sequence[Row],
    confirmed: Collection[str],
    projected: Mapping[str, str] | None = None,
) -> list[Open]:
    """The configurations to measure more: undecided ones that may be slower and that more
    processes can decide, ones about to BLOCK that have not been confirmed yet
    (`confirmed`: ids already re-measured for a BLOCK), in a run that does not BLOCK,
    slowdowns more likely than not beyond the block threshold, and in a PASS run, those slower
    on their own that the run's configurations hide (hidden_by_family). `projected`: each
    configuration's verdict were its head processes doubled (`with_processes_doubled`); one
    still undecided then is out of reach of more processes here (the baseline's own spread, or
    run-to-run variation, keeps it undecided) and is left alone. None: every undecided
    configuration that may be slower is open."""
    found = []
    for row in rows:
        if row.verdict == "undecided" and (
            out_of_reach(row, projected) or not plausibly_slower(row)
        ):
            continue
        if row.verdict == "undecided":
            found.append(Open(row.id, f"undecided: {_short(row.reason)}", confirming=False))
        elif may_block(tier, row):
            found.append(
                Open(
                    row.id,
                    f"may BLOCK (P(beyond the threshold) = {row.p_block:.2f}): measuring more",
                    confirming=False,
                )
            )
        elif hidden_by_family(tier, row):
            found.append(
                Open(
                    row.id,
                    "slower on its own, not yet credible over the run's configurations: "
                    "measuring more",
                    confirming=False,
                )
            )
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


def plausibly_slower(row: Row) -> bool:
    return row.p_slower is None or row.p_slower >= PLAUSIBLY_SLOWER_P


def out_of_reach(row: Row, projected: Mapping[str, str] | None) -> bool:
    """Undecided, and still undecided with twice the head's processes."""
    return (
        row.verdict == "undecided"
        and projected is not None
        and projected.get(row.id, "undecided") == "undecided"
    )


def with_processes_doubled(doc: ResultsDocument) -> ResultsDocument:
    """The document as if each of its processes had been measured twice: the same samples again
    under new process and round numbers (base samples alike, so paired rounds stay paired).
    A verdict on it says what more processes like these could decide, not what they will."""
    configurations = []
    for cfg in doc.configurations:
        sides = [s for s in (cfg.samples, cfg.base_samples) if s is not None and s.ns]
        if not sides:
            configurations.append(cfg)
            continue
        p_shift = 1 + max(max(s.process) for s in sides)
        r_shift = 1 + max(max(s.round) for s in sides)

        configurations.append(
            cfg.model_copy(
                update={
                    "samples": _twice(cfg.samples, p_shift, r_shift),
                    "base_samples": _twice(cfg.base_samples, p_shift, r_shift),
                }
            )
        )
    return doc.model_copy(update={"configurations": configurations})


def _twice(s: Samples | None, p_shift: int, r_shift: int) -> Samples | None:
    if s is None or not s.ns:
        return s
    return Samples(
        ns=s.ns + s.ns,
        round=s.round + [r + r_shift for r in s.round],
        process=s.process + [p + p_shift for p in s.process],
    )


def verdicts(report: GateReport) -> dict[str, str]:
    return {c.id: c.verdict for c in report.comparisons}


def rows_of(report: GateReport) -> list[Row]:
    """The rule's view of a gate report (configurations that were not measured are left out:
    more processes cannot change a broken, skipped or baseline-less configuration)."""
    return [
        Row(c.id, c.verdict, c.p_block, c.reason, c.p_slower)
        for c in report.comparisons
        if c.status == "ok"
    ]


def _short(reason: str | None) -> str:
    if not reason:
        return "the data cannot tell yet"
    return reason.split("; more samples")[0][:160]
