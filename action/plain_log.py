"""`rnx gate`'s report as plain text, for the job log of a CI that is not GitHub Actions.

On GitHub the verdict's reasons, its table and the run's link go to the job summary and the
PR comment; a GitLab or Jenkins job has only its log, so there the same content is written
into it: per part, the tier, its reasons, the table and the run page.
"""

from __future__ import annotations

from rnx.plain_table import comparison_table, explanation_lines
from rnx.schema import Tier
from rnx_github.comment import PartResult

# What each tier does to the CI job, by mode: the line a newcomer needs to read the log.
_EFFECT = {
    "BLOCK": "the job fails (exit code 1)",
    "WARN": "the job passes; read the reasons",
    "PASS": "the job passes",
}


def effect(tier: Tier, mode: str) -> str:
    if tier == "BLOCK" and mode != "enforce":
        return f"the job passes ({mode}: a BLOCK is reported, not enforced)"
    return _EFFECT[tier]


def render(parts: list[PartResult], tier: Tier, mode: str) -> list[str]:
    lines = []
    for p in parts:
        lines += ["", f"== {p.workload} on {p.environment}: {p.tier}"]
        lines += [f"  - {reason}" for reason in p.reasons]
        if p.comparisons:
            lines += ["", *("  " + row for row in comparison_table(p.comparisons))]
            explained = explanation_lines(p.comparisons)
            lines += ["", *("  " + row for row in explained)] if explained else []
        if p.url:
            lines += ["", f"  run: {p.url}"]
    lines += ["", f"rnx-benchmark: {tier} ({mode}): {effect(tier, mode)}"]
    return lines
