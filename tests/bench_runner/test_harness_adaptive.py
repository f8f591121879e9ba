"""Adaptive sampling in the harness, through real worker processes: fresh processes while
configurations are not yet decided or about to BLOCK (measuring every configuration against a
baseline of runs), within the budget, with the reason on the progress stream and in
details.adaptive; fixed sampling, with a note, when there is no baseline to decide against."""

from __future__ import annotations

import io
import re

import pytest

from bench_runner import run_benchmark
from bench_runner.adaptive import AdaptiveSampling, Baseline
from bench_runner.adaptive_rule import CONFIRM_PROCESSES, MAX_ADDED_PROCESSES
from rnx.config import Benchmark, GateSettings, HarnessSettings
from rnx.schema import ResultsDocument
from tests.bench_runner.harness_helpers import WORKLOADS

FAST = HarnessSettings(samples=8, processes=2, warmup=1, **{"time-budget": 5.0})
BENCH = Benchmark.model_validate(
    {
        "workload": str(WORKLOADS / "tiny.py"),
        "runtimes": ["pytorch_eager"],
        "dtypes": ["float32"],
        "batch-sizes": [1, 2],
    }
)


def _scaled(doc: ResultsDocument, factor: float, only: str | None = None) -> ResultsDocument:
    """The document with its samples times `factor` (only configuration `only`, if given)."""
    configurations = []
    for c in doc.configurations:
        if c.samples is not None and (only is None or c.id == only):
            ns = [max(1, int(t * factor)) for t in c.samples.ns]
            c = c.model_copy(update={"samples": c.samples.model_copy(update={"ns": ns})})
        configurations.append(c)
    return doc.model_copy(update={"configurations": configurations})


@pytest.fixture(scope="module")
def measured() -> ResultsDocument:
    """A fixed run of the workload: the baselines below are made from it."""
    return run_benchmark(BENCH, FAST, progress=None, device="cpu")


@pytest.mark.slow
def test_a_configuration_about_to_block_is_confirmed_in_fresh_processes(
    measured: ResultsDocument,
) -> None:
    # A baseline a hundred times faster for bs1 only: that configuration is about to BLOCK, and
    # stays so through its confirmation even when the load of a shared machine doubles a
    # process's times (at three times faster, one quick fresh process once ended the
    # confirmation early). The server's wide band of equivalence decides bs2 at once (as in
    # the last test below), so bs2 is never open, and the added processes still measure it.
    slow_id = measured.configurations[0].id
    baseline = _scaled(measured, 1 / 100, only=slow_id)
    server = GateSettings(rope=0.9, probability=0.51, block_threshold=10)
    seen: list[str] = []

    def baselines(environment_key: str) -> Baseline:
        seen.append(environment_key)
        return Baseline([baseline], server)

    out = io.StringIO()
    adaptive = AdaptiveSampling(GateSettings(), budget_s=600.0, baselines=baselines)
    doc = run_benchmark(BENCH, FAST, progress=out, device="cpu", adaptive=adaptive)
    log = out.getvalue()
    assert seen == [doc.environment.key]
    assert "adaptive sampling against 1 baseline run" in log
    slow = next(c for c in doc.configurations if c.id == slow_id)
    why = slow.details["adaptive"]["why"]
    assert any("about to BLOCK" in w for w in why), why
    assert slow.samples is not None
    # Its samples come from the fixed processes and then from fresh ones, which measured every
    # configuration: each added process is then the same worker in all of them, as the fixed
    # ones are, and the run-level model can take its shift out.
    assert max(slow.samples.process) >= FAST.processes + CONFIRM_PROCESSES - 1
    added = {p for c in doc.configurations if c.samples for p in c.samples.process}
    for c in doc.configurations:
        assert c.samples is not None and set(c.samples.process) == added, c.id
    decided = next(c for c in doc.configurations if c.id != slow_id)
    assert "adaptive" not in decided.details, decided.details
    assert doc.settings.processes <= FAST.processes + MAX_ADDED_PROCESSES
    assert f"adaptive sampling: process {FAST.processes + 1} for" in log
    assert "confirming in fresh processes" in log
    assert "adaptive sampling: nothing more to measure (BLOCK)" in log, log
    # Added processes add to the totals: no "[configuration 9/6]", no negative eta.
    counts = [tuple(map(int, m)) for m in re.findall(r"\[configuration (\d+)/(\d+)\]", log)]
    assert counts and all(done <= total for done, total in counts), counts
    assert "eta -" not in log, log


@pytest.mark.slow
def test_more_processes_are_not_spent_where_they_cannot_decide(
    measured: ResultsDocument,
) -> None:
    # A baseline whose two processes differ 25-fold: however many processes the head adds, the
    # baseline's own spread keeps every configuration undecided, even when the load of a shared
    # machine makes this run several times slower or faster than `measured` (a threefold spread
    # could leave a loaded head credibly slower than both processes).
    groups = []
    for c in measured.configurations:
        assert c.samples is not None
        ns = [
            int(t * (0.2 if p % 2 else 5.0))
            for t, p in zip(c.samples.ns, c.samples.process, strict=True)
        ]
        groups.append(c.model_copy(update={"samples": c.samples.model_copy(update={"ns": ns})}))
    wild = measured.model_copy(update={"configurations": groups})
    out = io.StringIO()
    adaptive = AdaptiveSampling(
        GateSettings(), budget_s=600.0, baselines=lambda _k: Baseline([wild])
    )
    doc = run_benchmark(BENCH, FAST, progress=out, device="cpu", adaptive=adaptive)
    log = out.getvalue()
    # Each stays undecided out of reach, or where a slowdown is less likely than not: both
    # are left alone, and the closing line counts them.
    end = re.search(r"nothing more to measure \(\w+\): (\d+) undecided where .*?, (\d+) out", log)
    assert end is not None and int(end[1]) + int(end[2]) == 2, log
    assert "adaptive sampling: process" not in log
    assert doc.settings.processes == FAST.processes


@pytest.mark.slow
def test_no_process_is_added_past_the_budget(measured: ResultsDocument) -> None:
    # About to BLOCK, but the budget is already spent. Ten times faster, so that the load of a
    # shared machine (`measured` slowed by it, this run not) cannot leave it undecided: at three
    # times faster, both configurations once ended "undecided, out of reach" under load.
    baseline = _scaled(measured, 1 / 10)
    out = io.StringIO()
    adaptive = AdaptiveSampling(
        GateSettings(), budget_s=0.5, baselines=lambda _k: Baseline([baseline])
    )
    doc = run_benchmark(BENCH, FAST, progress=out, device="cpu", adaptive=adaptive)
    assert "adaptive sampling: budget spent" in out.getvalue(), out.getvalue()
    assert "about to BLOCK" in out.getvalue()
    assert doc.settings.processes == FAST.processes


@pytest.mark.slow
def test_without_a_baseline_the_run_keeps_its_fixed_rounds_and_says_why() -> None:
    for answer, note in (
        ("the gate server at http://127.0.0.1:9 did not answer", "did not answer"),
        (Baseline([]), "no baseline yet for this workload in this environment"),
    ):
        out = io.StringIO()
        adaptive = AdaptiveSampling(
            GateSettings(), budget_s=600.0, baselines=lambda _k, a=answer: a
        )
        doc = run_benchmark(BENCH, FAST, progress=out, device="cpu", adaptive=adaptive)
        assert "[note] fixed sampling: " in out.getvalue() and note in out.getvalue()
        assert doc.settings.processes == FAST.processes
        assert all("adaptive" not in c.details for c in doc.configurations)


@pytest.mark.slow
def test_paired_rounds_adapt_the_same_way() -> None:
    out = io.StringIO()
    adaptive = AdaptiveSampling(GateSettings(), budget_s=25.0)
    doc = run_benchmark(
        BENCH,
        FAST,
        progress=out,
        device="cpu",
        base_workload=BENCH.workload,
        adaptive=adaptive,
    )
    log = out.getvalue()
    from rnx.verdict import evaluate

    report = evaluate(doc, [], GateSettings())
    undecided = [c.id for c in report.comparisons if c.verdict == "undecided"]
    # Either every configuration ended decided, or the budget ran out with some still open.
    assert not undecided or "still open" in log or "out of reach" in log, log
    for c in doc.configurations:
        assert c.samples is not None and c.base_samples is not None
        # Base and head were measured in the same rounds, added processes included.
        assert sorted(c.samples.round) == sorted(c.base_samples.round)
        if "adaptive" in c.details:
            assert max(c.samples.process) >= FAST.processes


@pytest.mark.slow
def test_the_servers_thresholds_judge_the_interim_verdict(measured: ResultsDocument) -> None:
    # The same run's samples as the baseline: with the server's wide band of equivalence every
    # configuration is decided at once, whatever the run's own kernalin.yml says. The server's
    # block threshold (11 times slower) keeps a head that a loaded machine made more than 1.9
    # times slower than `measured` (beyond the band: credibly slower) from being about to BLOCK,
    # which would add processes to confirm it.
    out = io.StringIO()
    server = GateSettings(rope=0.9, probability=0.51, block_threshold=10)
    adaptive = AdaptiveSampling(
        GateSettings(rope=0.001), budget_s=600.0, baselines=lambda _k: Baseline([measured], server)
    )
    doc = run_benchmark(BENCH, FAST, progress=out, device="cpu", adaptive=adaptive)
    assert "adaptive sampling against 1 baseline run" in out.getvalue()
    assert "adaptive sampling: process" not in out.getvalue(), out.getvalue()
    assert doc.settings.processes == FAST.processes
