"""Work and speed of light through the whole harness (worker processes, on the CPU: peaks
measured), and in `rnx bench`'s table."""

from __future__ import annotations

import statistics

import pytest

from bench_runner import run_benchmark
from bench_runner.table import format_table
from rnx.config import Benchmark, HarnessSettings
from rnx.schema import parse_results
from tests.bench_runner.harness_helpers import EXAMPLES, WORKLOADS

FAST = HarnessSettings(samples=8, processes=1, warmup=1, **{"time-budget": 5.0})


def _bench(path, **kw) -> Benchmark:
    data = {"workload": str(path), "runtimes": ["pytorch_eager"], "dtypes": ["float32"]}
    data.update(kw)
    return Benchmark.model_validate(data)


@pytest.mark.slow
def test_counted_work_and_its_score_are_in_the_document_and_the_table():
    bench = _bench(EXAMPLES / "gelu_linear.py", **{"batch-sizes": [4]})
    doc = run_benchmark(bench, FAST, progress=None, device="cpu")
    (c,) = doc.configurations
    assert c.status == "ok" and c.work is not None and c.samples is not None
    # gelu_linear: Linear(256 -> 512) then GELU; the GELU's FLOPs are not counted.
    assert c.work.flops == 2 * 4 * 256 * 512 and c.work.flops_source == "counted"
    weights = 512 * 256 + 512
    assert c.work.bytes == 4 * (4 * 256 + weights + 4 * 512)
    sol = c.speed_of_light
    assert sol is not None and sol.peak_source == "measured" and sol.peak_part == "measured: cpu"
    # The score is the arithmetic of the figures it stores.
    assert sol.measured_s == pytest.approx(statistics.median(c.samples.ns) / 1e9)
    bounds = {"compute": c.work.flops / (sol.peak_flops or 1)}
    bounds["memory"] = c.work.bytes / (sol.peak_bandwidth or float("inf"))
    assert sol.roofline_s == pytest.approx(max(bounds.values()))
    assert sol.bound == max(bounds, key=bounds.__getitem__)
    assert sol.score == pytest.approx(sol.roofline_s / sol.measured_s)
    assert parse_results(doc.to_json()).configurations == doc.configurations
    table = format_table(doc)
    assert f"{sol.score:.2f} {sol.bound}" in table.splitlines()[1]
    assert "SOL" in table.splitlines()[0]
    assert "peaks measured in the run" in table


@pytest.mark.slow
def test_declared_work_overrides_and_a_score_beyond_the_roofline_is_a_problem():
    bench = _bench(WORKLOADS / "declared_work.py", **{"batch-sizes": [2]})
    doc = run_benchmark(bench, FAST, progress=None, device="cpu")
    (c,) = doc.configurations
    assert c.status == "ok" and c.work is not None
    assert (c.work.flops, c.work.flops_source) == (2 * 10**18, "declared")
    assert (c.work.bytes, c.work.bytes_source) == (2 * 2 * 4096 * 4, "declared")
    assert c.speed_of_light is not None and c.speed_of_light.bound == "compute"
    assert c.speed_of_light.beyond_roofline and c.speed_of_light.score > 1e3
    table = format_table(doc)
    assert "compute!" in table
    assert "beyond the roofline, check the count and the timing: pytorch_eager/float32/bs2" in (
        table
    )


@pytest.mark.slow
def test_a_failing_get_flops_costs_the_score_not_the_configuration():
    bench = _bench(WORKLOADS / "broken_get_flops.py", **{"batch-sizes": [2]})
    doc = run_benchmark(bench, FAST, progress=None, device="cpu")
    (c,) = doc.configurations
    assert c.status == "ok" and c.samples is not None and len(c.samples.ns) == 8
    assert c.work is None and c.speed_of_light is None
    assert "flops unknown on purpose" in c.details["work_error"]
    table = format_table(doc)
    assert "SOL" in table  # the column is there, with a dash, and the note says why
    assert "no SOL: counting its work failed: RuntimeError: flops unknown on purpose" in table
