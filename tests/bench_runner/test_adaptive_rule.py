"""The stopping rule of adaptive sampling (bench_runner/adaptive_rule.py) on real gate reports:
undecided
configurations are measured more only where more processes can decide them, a configuration
about to BLOCK until it is confirmed, a WARN's slowdown likely beyond the block threshold until
the run BLOCKs, nothing else."""

from __future__ import annotations

from bench_runner.adaptive_rule import (
    ABOUT_TO_BLOCK_P,
    HIDDEN_SLOWER_P,
    PLAUSIBLY_SLOWER_P,
    Row,
    rows_of,
    still_open,
    verdicts,
    with_processes_doubled,
)
from rnx.config import GateSettings
from rnx.verdict import evaluate
from testbed.factories import make_results

BS1, BS8 = "pytorch_eager/float32/bs1", "pytorch_eager/float32/bs8"
CONFIGS = [("pytorch_eager", "float32", 1), ("pytorch_eager", "float32", 8)]


def test_about_to_block_is_open_until_confirmed_and_decided_rows_never_are() -> None:
    # Six baseline runs, as the server keeps, and six configurations: the run's common shift is
    # estimated from the configurations of the run, so with one baseline run and one other
    # configuration the unchanged one is honestly undecided (stats' run-level prior).
    configs = [("pytorch_eager", "float32", b) for b in (1, 2, 4, 8, 16, 32)]
    bases = [make_results(configs=configs, seed=s) for s in range(10, 16)]
    head = make_results(
        configs=configs,
        seed=2,
        slowdown={BS1: 2.0},
        event="pull_request",
        pr_number=1,
        base_branch="main",
    )
    report = evaluate(head, bases, GateSettings())
    assert report.tier == "BLOCK"
    undecided = {c.id for c in report.comparisons if c.verdict == "undecided"}
    found = still_open(report.tier, rows_of(report), confirmed=set())
    assert [o.id for o in found if o.confirming] == [BS1]
    assert "about to BLOCK" in next(o.why for o in found if o.confirming)
    # Everything else still open is undecided: a decided configuration never is.
    assert {o.id for o in found if not o.confirming} == undecided
    after = still_open(report.tier, rows_of(report), confirmed={BS1})
    assert {o.id for o in after} == undecided and not any(o.confirming for o in after)


def test_undecided_is_open_only_where_twice_the_processes_could_decide() -> None:
    rows = [Row(BS1, "undecided", 0.0, "P(slower) 0.5"), Row(BS8, "undecided", 0.0, "x")]
    projected = {BS1: "equivalent", BS8: "undecided"}
    found = still_open("PASS", rows, set(), projected)
    assert [o.id for o in found] == [BS1] and found[0].why.startswith("undecided: P(slower) 0.5")
    assert [o.id for o in still_open("PASS", rows, set())] == [BS1, BS8]


def test_doubling_the_processes_narrows_what_the_head_contributes() -> None:
    # A noisy head against a quiet, long baseline: the head's spread is what keeps it open.
    # Five quiet baseline runs, so the spread between runs is known to be small.
    bases = [
        make_results(configs=CONFIGS, seed=30 + i, spread=0.005, n=30, processes=3)
        for i in range(5)
    ]
    head = make_results(configs=CONFIGS, seed=4, spread=0.08, n=12, processes=2, slowdown=1.01)
    doubled = with_processes_doubled(head)
    for before, after in zip(head.configurations, doubled.configurations, strict=True):
        assert before.samples is not None and after.samples is not None
        assert after.samples.ns == before.samples.ns * 2
        assert sorted(set(after.samples.process)) == [0, 1, 2, 3]
        assert len(set(after.samples.round)) == 2 * len(set(before.samples.round))
    now = evaluate(head, bases, GateSettings())
    then = evaluate(doubled, bases, GateSettings())
    width = {c.id: (c.high or 0) - (c.low or 0) for c in now.comparisons}
    for c in then.comparisons:
        assert (c.high or 0) - (c.low or 0) < width[c.id]
    assert set(verdicts(then)) == {BS1, BS8}


def test_undecided_is_open_only_where_a_slowdown_is_at_least_as_likely_as_not() -> None:
    rows = [
        Row("likely", "undecided", 0.0, "x", p_slower=PLAUSIBLY_SLOWER_P),
        Row("unlikely", "undecided", 0.0, "x", p_slower=PLAUSIBLY_SLOWER_P - 0.01),
        Row("unknown", "undecided", 0.0, "x"),
    ]
    assert [o.id for o in still_open("PASS", rows, set())] == ["likely", "unknown"]


def test_a_warn_whose_slowdown_is_likely_beyond_the_threshold_is_measured_until_it_blocks() -> None:
    rows = [
        Row("likely", "slower", ABOUT_TO_BLOCK_P),
        Row("unlikely", "slower", ABOUT_TO_BLOCK_P - 0.01),
        Row("equal", "equivalent", 0.0),
    ]
    found = still_open("WARN", rows, set())
    assert [o.id for o in found] == ["likely"] and not found[0].confirming
    assert found[0].why.startswith("may BLOCK (P(beyond the threshold) = 0.50)")
    # Once the run BLOCKs, the same row is confirmed in fresh processes, then left alone.
    blocking = still_open("BLOCK", rows, set())
    assert [(o.id, o.confirming) for o in blocking] == [("likely", True)]
    assert still_open("BLOCK", rows, {"likely"}) == []


def test_a_pass_runs_slowdown_hidden_by_the_family_is_measured_more_where_sure_on_its_own() -> None:
    rows = [
        Row("sure", "slower", 0.0, p_slower=HIDDEN_SLOWER_P),
        Row("less", "slower", 0.0, p_slower=HIDDEN_SLOWER_P - 0.001),
        Row("equal", "equivalent", 0.0, p_slower=0.0),
    ]
    found = still_open("PASS", rows, set())
    assert [o.id for o in found] == ["sure"] and not found[0].confirming
    assert found[0].why.startswith("slower on its own, not yet credible over the run's")
    # In a WARN run the tier is already what a credible slowdown makes it.
    assert still_open("WARN", rows, set()) == []
