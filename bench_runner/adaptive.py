"""Adaptive sampling: after its fixed processes, a run adds fresh worker processes (the
variation between processes dominates) for the configurations the data cannot decide yet and
that may be slower, and for those about to BLOCK (confirmed by processes that did not
produce the verdict), until each is decided or the budget is spent. The stopping rule is
bench_runner/adaptive_rule.py's; the verdict is rnx.verdict.evaluate's, the one the gate server
computes again from all the samples.

Against a baseline of runs, an added process measures every configuration, not only the open
ones: then it is the same worker in all of them, as the fixed processes are, and the run-level
model takes its shift out of every configuration as it does theirs (stats/runlevel.py). An
added process that measured only the open configurations made the run's processes unequal in
number, the model lost every process's shift correction, and on a runner whose processes
shift the processes added to decide a slowdown widened its interval instead
(docs/results.md). In paired mode each process's base and head share its shift, so an added
process measures the open configurations only.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from bench_runner.adaptive_rule import (
    CONFIRM_PROCESSES,
    MAX_ADDED_PROCESSES,
    Open,
    Row,
    out_of_reach,
    plausibly_slower,
    rows_of,
    still_open,
    verdicts,
)
from rnx.config import GateSettings
from rnx.schema import MAX_PROCESSES, GateReport, ResultsDocument

if TYPE_CHECKING:
    from bench_runner.orchestrator import Orchestrator


@dataclass(frozen=True)
class Baseline:
    """What the gate server will compare the run with: its baseline documents (none yet: an
    empty list) and its thresholds (None: the run's own kernalin.yml's)."""

    documents: Sequence[ResultsDocument]
    gate: GateSettings | None = None


# Environment key -> the baseline, or why there is none to sample against.
BaselineSource = Callable[[str], Baseline | str]


@dataclass(frozen=True)
class AdaptiveSampling:
    gate: GateSettings
    budget_s: float  # the most wall time for one workload's measuring, from the harness's start
    baselines: BaselineSource | None = None  # None: paired mode, base is measured here


@dataclass(frozen=True)
class Decider:
    """The loop's view of the run: its interim verdict, and the time it may take."""

    judge: Callable[[], GateReport]
    budget_s: float
    started: float  # time.monotonic() when the harness started
    # The verdict were the head's processes doubled
    # (bench_runner.adaptive_rule.with_processes_doubled):
    # which undecided configurations more processes could decide at all.
    project: Callable[[], GateReport] | None = None


def _left(rows: Sequence[Row], projected: dict[str, str] | None) -> str:
    """What stays undecided, and why it is not measured more."""
    unlikely = sum(r.verdict == "undecided" and not plausibly_slower(r) for r in rows)
    beyond = sum(plausibly_slower(r) and out_of_reach(r, projected) for r in rows)
    if not unlikely and not beyond:
        return "every configuration decided"
    return (
        f"{unlikely} undecided where a slowdown is less likely than not (more processes could "
        f"at most show them equivalent), {beyond} out of reach"
    )


def _listing(found: list[Open], limit: int = 4) -> str:
    shown = "; ".join(f"{o.id} ({o.why})" for o in found[:limit])
    return shown + (f"; and {len(found) - limit} more" if len(found) > limit else "")


def sample_until_decided(orch: Orchestrator, decider: Decider) -> dict[str, list[str]]:
    """Add processes while configurations are open and the budget allows; returns, per
    configuration that got more processes, why each was added (for details.adaptive)."""
    harness = orch.plan.harness
    rounds = max(1, harness.samples // harness.processes)
    progress = orch.progress
    owed: dict[str, int] = {}  # about to BLOCK: fresh processes its confirmation still needs
    confirmed: set[str] = set()
    why_added: dict[str, list[str]] = {}
    noted: list[str] = []
    fixed = orch.plan.processes
    # What an added process measures: every configuration against a baseline of runs, the open
    # ones in paired mode (the module's docstring says why).
    every = None if len(orch.plan.sides) > 1 else [c.id for c in orch.plan.configs]
    per_process_s = (time.monotonic() - decider.started) / max(fixed, 1)
    while True:
        report = decider.judge()
        rows = rows_of(report)
        projected = None
        maybe_slower = any(r.verdict == "undecided" and plausibly_slower(r) for r in rows)
        if decider.project is not None and maybe_slower:
            projected = verdicts(decider.project())
            beyond = [r.id for r in rows if plausibly_slower(r) and out_of_reach(r, projected)]
            if beyond and beyond != noted:
                progress.note(
                    f"adaptive sampling: {len(beyond)} undecided configuration"
                    f"{'s' if len(beyond) != 1 else ''} out of reach of more processes here "
                    f"(twice as many would not decide them; more baseline runs or paired mode "
                    f"would): {', '.join(beyond[:6])}{' ...' if len(beyond) > 6 else ''}"
                )
                noted = beyond
        found = still_open(report.tier, rows, confirmed, projected)
        if not found:
            left = _left(rows, projected)
            progress.note(f"adaptive sampling: nothing more to measure ({report.tier}): {left}")
            return why_added
        spent = time.monotonic() - decider.started
        added = orch.plan.processes - fixed
        if added >= MAX_ADDED_PROCESSES or orch.plan.processes >= MAX_PROCESSES:
            progress.note(
                f"adaptive sampling: {added} processes added, the most a run adds; "
                f"still open: {_listing(found)}"
            )
            return why_added
        if spent + per_process_s > decider.budget_s:
            progress.note(
                f"adaptive sampling: budget spent ({spent:.0f}s of {decider.budget_s:.0f}s); "
                f"still open: {_listing(found)}"
            )
            return why_added
        for o in found:
            if o.confirming and o.id not in owed:
                owed[o.id] = CONFIRM_PROCESSES
        progress.note(
            f"adaptive sampling: process {orch.plan.processes + 1} for {len(found)} "
            f"configuration{'s' if len(found) != 1 else ''}: {_listing(found)}"
        )
        t0 = time.monotonic()
        orch.add_process(every or [o.id for o in found], rounds)
        per_process_s = time.monotonic() - t0
        for o in found:
            why_added.setdefault(o.id, []).append(o.why)
        for cid in [o.id for o in found if o.id in owed]:
            owed[cid] -= 1
            if owed[cid] <= 0:
                del owed[cid]
                confirmed.add(cid)
