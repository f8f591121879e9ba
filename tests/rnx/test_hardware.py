"""rnx.hardware: one workload's runs from several environments, side by side."""

from __future__ import annotations

import csv
import io
import re

import pytest

from rnx.errors import InvalidData
from rnx.hardware import (
    BASELINE,
    CSV_COLUMNS,
    FASTER,
    NO_DIFFERENCE,
    SLOWER,
    compare_hardware,
    cost_per_million,
    to_csv,
    verdict_of,
)
from rnx.schema import ResultsDocument
from testbed.factories import h200_score, make_results

CONFIGS = (("pytorch_eager", "float32", 1), ("pytorch_eager", "float32", 8))


def run(
    env: str, *, name: str | None = None, software: dict | None = None, **kw
) -> ResultsDocument:
    doc = make_results(environment=env, configs=kw.pop("configs", CONFIGS), **kw)
    environment = doc.environment.model_copy(
        update={"name": name or env, "software": software or {}}
    )
    return doc.model_copy(update={"environment": environment})


def test_verdict_needs_the_ratio_interval_to_exclude_one() -> None:
    assert verdict_of(0.4, 0.99) == FASTER
    assert verdict_of(1.01, 1.3) == SLOWER
    assert verdict_of(0.9, 1.0) == NO_DIFFERENCE
    assert verdict_of(0.98, 1.02) == NO_DIFFERENCE


def test_a_credibly_faster_machine_is_called_faster() -> None:
    c = compare_hardware([run("cpu", seed=1), run("gpu", seed=2, slowdown=0.5)])
    assert [s.label for s in c.sides] == ["cpu", "gpu"]
    for row in c.rows:
        base, other = row.cells
        assert base.verdict == BASELINE and base.ratio is None
        assert other.verdict == FASTER
        assert other.ratio == pytest.approx(0.5, rel=0.03)
        assert other.ratio_high is not None and other.ratio_high < 1
        assert other.speedup == pytest.approx(2, rel=0.03)


def test_the_same_timings_are_no_credible_difference() -> None:
    c = compare_hardware([run("a", seed=3), run("b", seed=3)])
    for row in c.rows:
        cell = row.cells[1]
        assert cell.verdict == NO_DIFFERENCE
        assert cell.ratio_low is not None and cell.ratio_high is not None
        assert cell.ratio_low <= 1 <= cell.ratio_high


def test_a_slower_machine_is_called_slower_against_the_baseline_given_first() -> None:
    c = compare_hardware([run("gpu", seed=2, slowdown=0.5), run("cpu", seed=1)])
    assert {row.cells[1].verdict for row in c.rows} == {SLOWER}


def test_latency_throughput_and_cost() -> None:
    c = compare_hardware([run("a", seed=1), run("b", seed=2, slowdown=2.0)], prices={"b": 3.6})
    row = next(r for r in c.rows if r.batch_size == 8)
    a, b = row.cells
    assert b.low_ns is not None and b.high_ns is not None and b.median_ns is not None
    assert b.low_ns <= b.median_ns <= b.high_ns
    assert b.items_per_second == pytest.approx(8 / (b.median_ns * 1e-9))
    assert b.items_low == pytest.approx(8 / (b.high_ns * 1e-9))
    # 3.6 per hour is 0.001 per second; a million items of median_ns / 8 each.
    assert b.cost_per_million == pytest.approx(0.001 * b.median_ns * 1e-9 / 8 * 1e6)
    assert b.cost_low is not None and b.cost_high is not None
    assert b.cost_low <= b.cost_per_million <= b.cost_high
    assert a.cost_per_million is None and a.items_per_second is not None
    assert any("no hourly price for a" in n for n in c.notes)


def test_cost_per_million_items_by_hand() -> None:
    # 1 ms per call of 4 items at 3.60 an hour: 0.25 ms an item, a million cost 0.25 s * 1000.
    assert cost_per_million(3.6, 1e6, 4) == pytest.approx(0.001 * 250)


def test_native_shapes_have_no_per_item_throughput() -> None:
    def native(env: str, seed: int) -> ResultsDocument:
        doc = run(env, seed=seed, configs=(("pytorch_eager", "float32", 1),))
        config = doc.configurations[0].model_copy(update={"batch_size": None})
        return doc.model_copy(update={"configurations": [config]})

    c = compare_hardware([native("a", 1), native("b", 2)], prices={"a": 1.0, "b": 2.0})
    (row,) = c.rows
    assert row.id == "pytorch_eager/float32/native"
    for cell in row.cells:
        assert cell.median_ns is not None
        assert cell.items_per_second is None and cell.cost_per_million is None
        assert cell.note is not None and "no per-item throughput" in cell.note
    assert row.cells[1].ratio is not None


def test_a_configuration_one_run_lacks_is_shown_missing() -> None:
    more = (*CONFIGS, ("pytorch_eager", "float32", 32))
    c = compare_hardware([run("a", seed=1), run("b", seed=2, configs=more)])
    row = next(r for r in c.rows if r.batch_size == 32)
    assert row.cells[0].status == "missing" and row.cells[1].ratio is None
    assert row.cells[1].median_ns is not None


def test_a_broken_configuration_has_no_timings() -> None:
    c = compare_hardware([run("a", seed=1), run("b", seed=2, broken=["pytorch_eager/float32/bs1"])])
    cell = next(r for r in c.rows if r.batch_size == 1).cells[1]
    assert cell.status == "diverged" and cell.median_ns is None and cell.ratio is None
    assert cell.reason


def test_software_side_by_side_marks_differences() -> None:
    gpu = run(
        "h200", seed=2, software={"torch": "2.11.0", "torch_cuda": "13.0", "python": "3.11.7"}
    )
    hardware = {"gpus": [{"name": "NVIDIA H200"}], "nvidia_smi": ["580.82.07, 1980 MHz"]}
    gpu = gpu.model_copy(
        update={"environment": gpu.environment.model_copy(update={"hardware": hardware})}
    )
    cpu = run("cpu", seed=1, software={"torch": "2.9.1", "torch_cuda": None, "python": "3.11.7"})
    rows = {r.label: r for r in compare_hardware([cpu, gpu]).software}
    assert rows["torch"].values == ["2.9.1", "2.11.0"] and rows["torch"].differs
    assert rows["CUDA (torch built with)"].values == [None, "13.0"]
    assert rows["GPU driver"].values == [None, "580.82.07"] and rows["GPU driver"].differs
    assert rows["python"].values == ["3.11.7", "3.11.7"] and not rows["python"].differs
    assert rows["hardware"].values[1] == "NVIDIA H200"


def test_shared_names_fall_back_to_keys() -> None:
    c = compare_hardware([run("env-a", name="runner", seed=1), run("env-b", name="runner", seed=2)])
    assert [s.label for s in c.sides] == ["env-a", "env-b"]


@pytest.mark.parametrize(
    ("documents", "prices", "message"),
    [
        (lambda: [run("a")], {}, "needs 2 to 6 environments, got 1"),
        (lambda: [run(f"e{i}", seed=i) for i in range(7)], {}, "got 7"),
        (
            lambda: [run("a"), run("b", workload="kernels/other.py")],
            {},
            "different workloads",
        ),
        (lambda: [run("a", seed=1), run("a", seed=2)], {}, "same environment"),
        (lambda: [run("a"), run("b")], {"c": 1.0}, "a price names no environment"),
        (lambda: [run("a"), run("b")], {"a": -1.0}, "must be a number >= 0"),
    ],
)
def test_bad_input_is_one_clear_error(documents, prices, message) -> None:
    with pytest.raises(InvalidData, match=message):
        compare_hardware(documents(), prices=prices)


def test_a_different_workload_file_is_noted() -> None:
    c = compare_hardware([run("a"), run("b", workload_sha256="1" * 64)])
    assert any("sha256 is not the same" in n for n in c.notes)


def test_csv_has_one_line_per_configuration_and_environment() -> None:
    c = compare_hardware(
        [run("cpu", seed=1), run("gpu", seed=2, slowdown=0.5)], prices={"cpu": 0.1, "gpu": 3.5}
    )
    rows = list(csv.DictReader(io.StringIO(to_csv(c))))
    assert tuple(rows[0]) == CSV_COLUMNS
    assert len(rows) == len(CONFIGS) * 2
    gpu = next(r for r in rows if r["environment"] == "gpu" and r["batch_size"] == "8")
    cell = next(r for r in c.rows if r.batch_size == 8).cells[1]
    assert gpu["configuration"] == "pytorch_eager/float32/bs8"
    assert gpu["verdict"] == FASTER
    assert float(gpu["median_ns"]) == pytest.approx(cell.median_ns, rel=1e-5)
    assert float(gpu["ratio_to_baseline"]) == pytest.approx(cell.ratio, rel=1e-5)
    assert float(gpu["price_per_hour"]) == 3.5
    assert float(gpu["cost_per_million_items"]) == pytest.approx(cell.cost_per_million, rel=1e-5)
    base = next(r for r in rows if r["environment"] == "cpu" and r["batch_size"] == "8")
    assert base["verdict"] == BASELINE and base["ratio_to_baseline"] == ""


def test_recorded_cpu_against_recorded_h200() -> None:
    """The real runs of examples/gelu_linear.py (tests/data/hardware, docs/hardware.md): the
    H200 is credibly faster in every configuration, and the software that differs is marked."""
    from pathlib import Path

    from rnx.schema import load_results

    data = Path(__file__).parents[1] / "data" / "hardware"
    cpu = load_results(str(data / "cpu-gelu_linear.json"))
    h200 = load_results(str(data / "h200-gelu_linear.json"))
    c = compare_hardware([cpu, h200], prices={"cpu-2core": 0.10, "h200": 3.50})
    assert [s.label for s in c.sides] == ["cpu-2core", "h200"]
    assert [s.hardware for s in c.sides] == ["AMD EPYC (2 CPUs)", "NVIDIA H200"]
    assert len(c.rows) == 6
    for row in c.rows:
        gpu = row.cells[1]
        assert gpu.verdict == FASTER, row.id
        assert gpu.ratio_high is not None and gpu.ratio_high < 1
        assert gpu.cost_per_million is not None and gpu.price_per_hour == 3.50
    differing = {r.label for r in c.software if r.differs}
    assert {"hardware", "torch", "CUDA (torch built with)", "GPU driver"} <= differing
    assert "float32 matmul precision" not in differing


def test_csv_text_never_starts_a_spreadsheet_formula() -> None:
    evil = run("env-b", name='=HYPERLINK("https://evil.example","x")', seed=2)
    hw = {"cpu_model": "@SUM(A1)", "cpu_count": 2}
    evil = evil.model_copy(
        update={"environment": evil.environment.model_copy(update={"hardware": hw})}
    )
    c = compare_hardware([run("env-a", seed=1), evil])
    rows = [r for r in csv.DictReader(io.StringIO(to_csv(c))) if r["environment_key"] == "env-b"]
    assert rows and all(r["environment"].startswith("'=HYPERLINK(") for r in rows)
    assert all(r["hardware"] == "'@SUM(A1) (2 CPUs)" for r in rows)


def test_csv_text_split_at_a_semicolon_never_starts_a_formula() -> None:
    # Where ';' separates a spreadsheet's cells, "gpu;=1+2" opens as "gpu" and "=1+2".
    evil = run("env-b", name="gpu;=1+2;@SUM(A1),-3", seed=2)
    c = compare_hardware([run("env-a", seed=1), evil])
    rows = [r for r in csv.DictReader(io.StringIO(to_csv(c))) if r["environment_key"] == "env-b"]
    assert rows and all(r["environment"] == "gpu;'=1+2;'@SUM(A1),'-3" for r in rows)
    for row in rows:
        for text in row.values():
            for cell in re.split(r"[;,]", text):
                assert cell[:1] not in ("=", "+", "-", "@"), row


def test_speed_of_light_is_shown_beside_never_in_the_verdict() -> None:

    gpu = run("gpu", seed=2, slowdown=0.5)
    sol = h200_score(0.42)
    configs = [gpu.configurations[0].model_copy(update={"speed_of_light": sol})]
    gpu = gpu.model_copy(update={"configurations": configs + list(gpu.configurations[1:])})
    c = compare_hardware([run("cpu", seed=1), gpu])
    first, second = c.rows
    assert first.cells[1].speed_of_light == 0.42 and first.cells[0].speed_of_light is None
    assert second.cells[1].speed_of_light is None
    assert {r.cells[1].verdict for r in c.rows} == {FASTER}
    rows = list(csv.DictReader(io.StringIO(to_csv(c))))
    assert [r["speed_of_light"] for r in rows] == ["", "0.42", "", ""]
