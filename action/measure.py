"""Measuring for the gate: the harness on each workload (paired: with the PR's base checked out
next to it), or results documents measured elsewhere, each with the verdict this job can reach
on its own."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from action.context import RunContext
from action.paired import base_worktree
from bench_runner.adaptive import AdaptiveSampling
from rnx.config import Benchmark, HarnessSettings, KernalinConfig
from rnx.errors import UserError
from rnx.schema import GateReport, ResultsDocument, load_results
from rnx_github.comment import ConfigNote


@dataclass(frozen=True)
class Measured:
    benchmark: Benchmark
    document: ResultsDocument
    local: GateReport


def local_report(document: ResultsDocument, config: KernalinConfig) -> GateReport:
    """What this job can decide without the server: a paired verdict, and broken runtimes."""
    from rnx.verdict import evaluate

    return evaluate(document, [], config.gate)


@contextmanager
def maybe_base_checkout(
    root: Path, config: KernalinConfig, ctx: RunContext, base_sha: str | None
) -> Iterator[Path | None]:
    # A push has no base to pair with: it is measured alone and, uploaded, becomes a baseline.
    if config.gate.compare != "paired" or not ctx.git.is_pull_request:
        yield None
        return
    sha = base_sha or ctx.git.base_sha
    if not sha:
        raise UserError(
            "compare: paired needs the pull request's base commit; GitHub's pull_request "
            "event has it; elsewhere pass --base-sha SHA (or use compare: baseline)"
        )
    with base_worktree(root, sha) as path:
        yield path


def measure(
    bench: Benchmark,
    config: KernalinConfig,
    ctx: RunContext,
    *,
    base_root: Path | None,
    environment: str | None,
    progress: TextIO,
    adaptive: AdaptiveSampling | None = None,
) -> Measured:
    from bench_runner import run_benchmark

    base_workload = None
    if base_root is not None and (base_root / bench.workload).is_file():
        base_workload = str(base_root / bench.workload)
    document = run_benchmark(
        bench,
        harness_for(config, ctx),
        repository=ctx.repository,
        git=ctx.git,
        base_workload=base_workload,
        environment_name=environment,
        progress=progress,
        adaptive=adaptive,
    )
    return Measured(bench, document, local_report(document, config))


def harness_for(config: KernalinConfig, ctx: RunContext) -> HarnessSettings:
    """The harness settings for this run: a push compared by stored baseline (a baseline
    candidate) gets harness.baseline-processes where that is more than harness.processes."""
    harness = config.harness
    more = harness.baseline_processes
    pushed = config.gate.compare == "baseline" and not ctx.git.is_pull_request
    if pushed and more is not None and more > harness.processes:
        return harness.model_copy(update={"processes": more})
    return harness


def measurement_notes(document: ResultsDocument) -> list[ConfigNote]:
    """One note per configuration the harness measured on a GPU shared with other work
    (details.contention, bench_runner/state.py): the numbers are noisier for it, never wrong,
    and the reader of the comment should know. Anything malformed is left out."""
    notes = []
    for cfg in document.configurations:
        contention = cfg.details.get("contention")
        if not isinstance(contention, dict) or not isinstance(contention.get("note"), str):
            continue
        text = contention["note"]
        seen = contention.get("processes_seen")
        if isinstance(seen, int) and not isinstance(seen, bool):
            text += f" (seen by {seen} of {document.settings.processes} worker processes)"
        notes.append(ConfigNote(id=cfg.id, text=text))
    return notes


def measured_elsewhere(path: str, ctx: RunContext, config: KernalinConfig) -> Measured:
    """A document from an untrusted job (a fork's PR): its numbers are gated, but who it is
    for (repository, commit, PR) comes from this trusted run, never from the file."""
    document = load_results(path)
    document = document.model_copy(update={"repository": ctx.repository, "git": ctx.git})
    bench = Benchmark(workload=document.workload.path)
    return Measured(bench, document, local_report(document, config))
