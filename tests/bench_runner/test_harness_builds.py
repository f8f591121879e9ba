"""The build phase: checks spread over the processes by reference group, builds after a pass."""

from __future__ import annotations

import pytest

from bench_runner import builds, run_benchmark
from bench_runner.builds import check_order, reference_groups
from bench_runner.plan import ConfigSpec
from bench_runner.state import ConfigState
from rnx.config import Benchmark, HarnessSettings
from tests.bench_runner.harness_helpers import WORKLOADS

FAST = HarnessSettings(samples=8, processes=3, warmup=1, **{"time-budget": 5.0})


def _states(*specs: tuple[str, str, int | None]) -> list[ConfigState]:
    return [ConfigState(ConfigSpec(*s)) for s in specs]


def test_configurations_are_grouped_by_dtype_and_batch_size_in_plan_order():
    states = _states(
        ("pytorch_eager", "float32", 8), ("pytorch_eager", "float32", 1024),
        ("pytorch_eager", "float16", 8), ("torch_compile", "float32", 8),
        ("torch_compile", "float32", 1024), ("torch_compile", "float16", 8),
    )  # fmt: skip
    groups = reference_groups(states)
    assert [[st.spec.id for st in g] for g in groups] == [
        ["pytorch_eager/float32/bs8", "torch_compile/float32/bs8"],
        ["pytorch_eager/float32/bs1024", "torch_compile/float32/bs1024"],
        ["pytorch_eager/float16/bs8", "torch_compile/float16/bs8"],
    ]
    # The first group stays first (process 1 starts alone with it); then the largest batches.
    ordered = check_order(groups)
    assert [(g[0].spec.dtype, g[0].spec.batch_size) for g in ordered] == [
        ("float32", 8), ("float32", 1024), ("float16", 8),
    ]  # fmt: skip
    native = check_order(reference_groups(_states(("a", "float32", None), ("a", "float16", None))))
    assert [g[0].spec.dtype for g in native] == ["float32", "float16"]


def _bench(**kw) -> Benchmark:
    data = {"workload": str(WORKLOADS / "tiny.py"), "runtimes": ["pytorch_eager"]}
    data.update(kw)
    return Benchmark.model_validate(data)


@pytest.mark.slow
def test_checks_are_spread_over_the_processes_and_each_config_is_checked_once():
    bench = _bench(dtypes=["float32", "float64"], **{"batch-sizes": [1, 2]})
    doc = run_benchmark(bench, FAST, progress=None, device="cpu")
    assert [c.status for c in doc.configurations] == ["ok"] * 4
    checked_in = {c.id: c.details["checked_in_process"] for c in doc.configurations}
    assert len(set(checked_in.values())) > 1, checked_in  # not all in process 1
    for c in doc.configurations:
        assert c.correctness is not None and c.correctness.passed
        # Built in the two processes that did not check it, and timed in all three.
        assert len(c.details["later_build_wall_ns"]) == 2
        assert c.samples is not None and set(c.samples.process) == {0, 1, 2}


@pytest.mark.slow
def test_without_memory_for_every_process_at_once_process_one_checks_everything(monkeypatch):
    monkeypatch.setattr(builds, "OVERLAP_MEMORY_SHARE", 1e-12)
    bench = _bench(dtypes=["float32", "float64"], **{"batch-sizes": [1, 2]})
    doc = run_benchmark(bench, FAST, progress=None, device="cpu")
    assert [c.status for c in doc.configurations] == ["ok"] * 4
    assert {c.details["checked_in_process"] for c in doc.configurations} == {0}
    # The other processes built them later, just before their own warm-up.
    assert all(len(c.details["later_build_wall_ns"]) == 2 for c in doc.configurations)


@pytest.mark.slow
def test_a_failed_check_in_any_process_reads_as_the_kernels_failure():
    bench = _bench(workload=str(WORKLOADS / "batch_eight_only.py"), **{"batch-sizes": [8, 2, 3]})
    doc = run_benchmark(bench, FAST, progress=None, device="cpu")
    by_size = {c.batch_size: c for c in doc.configurations}
    assert by_size[8].status == "ok"
    for size in (2, 3):
        c = by_size[size]
        assert c.status == "diverged", (size, c.reason)
        assert c.reason and not c.reason.startswith("process")  # no "process N:" prefix
        assert c.samples is None and "later_build_wall_ns" not in c.details
