"""Profiles and memory after timing (bench_runner/profiling.py): names, figures, the harness."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from bench_runner import run_benchmark
from bench_runner.profiling import normalise_name, peak_from_allocations, profiled_calls
from bench_runner.worker_process import Side
from rnx.config import Benchmark, GateSettings, HarnessSettings
from rnx.memory_gate import memory_change
from rnx.profile_diff import diff_profiles
from rnx.schema import Memory, Profile
from tests.bench_runner.harness_helpers import WORKLOADS, prepare_cmd

VARIANTS = Path(__file__).parents[2] / "benchmarks" / "data" / "profile_diff"


@pytest.mark.parametrize(
    ("raw", "key"),
    [
        (
            "void at::native::(anonymous namespace)::softmax_warp_forward<float, float, float, 10,"
            " false, false>(float*, float const*, int, int, int, bool*, bool)",
            "at::native::softmax_warp_forward<float, float, float, N, false, false>",
        ),
        (
            "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
            "std::array<char*, 1ul> >(int, at::native::FillFunctor<float>, std::array<char*, 1ul>)",
            "at::native::vectorized_elementwise_kernel<N, at::native::FillFunctor<float>, "
            "std::array<char*, 1ul> >",
        ),
        ("sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x32", None),
        ("triton_poi_fused_add_0", None),
        ("aten::softmax", None),
        ("Memcpy HtoD (Pageable -> Device)", None),
        ("kernel at 0x7f3a2c00 grid 128", "kernel at ADDR grid N"),
        ("name\x1b[31m\nred", "name [31m red"),
    ],
)
def test_names_are_normalised_so_runs_match(raw: str, key: str | None) -> None:
    assert normalise_name(raw) == (raw if key is None else key)


def test_long_names_are_cut_and_numbers_of_launch_shapes_do_not_split_a_kernel() -> None:
    assert len(normalise_name("k" * 500)) == 160
    a = normalise_name("void gemm<128, 64>(float*) [grid 80]")
    assert a == normalise_name("void gemm<256, 32>(float*) [grid 160]")


def test_calls_are_few_and_within_the_budget() -> None:
    assert profiled_calls(1e3) == 7 and profiled_calls(2e7) == 2 and profiled_calls(1e9) == 1


def test_peak_of_allocations_counts_what_is_held_at_once() -> None:
    # (time, bytes): a 4 kB buffer, an 8 kB one while it lives, both freed, a 2 kB one.
    assert peak_from_allocations([(3, -4096), (1, 4096), (2, 8192), (4, -8192), (5, 2048)]) == 12288


def _profiled(
    cpu_process: None, path: Path, runtime: str = "pytorch_eager", trace: Path | None = None
) -> tuple[Profile, Memory]:
    side = Side(path=str(path), device=torch.device("cpu"), threads=1, seed=0)
    side.load()
    cmd = prepare_cmd(runtime, "float32", 64)
    assert side.prepare(cmd)["status"] == "ok"
    for _ in range(20):  # in a run the profile comes after timing: the call is warm
        side.ready[cmd["id"]].call()
    found = side.profile({"id": cmd["id"], "trace": None if trace is None else str(trace)})
    assert "profile_error" not in found and "memory_error" not in found, found
    return Profile(**found["profile"]), Memory(**found["memory"])


def test_an_extra_softmax_is_the_first_row_and_the_same_workload_shows_nothing(cpu_process):
    base, _ = _profiled(cpu_process, VARIANTS / "base.py")
    again, _ = _profiled(cpu_process, VARIANTS / "base.py")
    head, _ = _profiled(cpu_process, VARIANTS / "extra_softmax.py")
    assert base.time_basis == "cpu" and base.calls >= 1 and base.launches_per_call == 0
    assert {o.name for o in base.operators} >= {"aten::_softmax", "aten::cat"}
    changes = diff_profiles(base, head)
    assert changes[0].name in ("aten::_softmax", "aten::softmax"), changes
    assert "calls 1 → 2" in changes[0].text
    assert diff_profiles(base, again) == []


def test_a_doubled_intermediate_is_measured_to_the_byte_and_warns(cpu_process):
    _, base = _profiled(cpu_process, VARIANTS / "base.py")
    _, head = _profiled(cpu_process, VARIANTS / "wide.py")
    # The branch's two live buffers (cat, softmax) of 64 x 1024 x WIDEN float32 each.
    assert head.peak_allocated_bytes - base.peak_allocated_bytes == 2 * 64 * 1024 * 4 * 4
    change, reasons = memory_change("c", base, head, None, None, GateSettings())
    assert change is not None and change.tier == "WARN" and "+2 MiB" in reasons[0]


def test_a_run_keeps_profiles_memory_and_traces(tmp_path: Path) -> None:
    harness = HarnessSettings(
        samples=8, processes=1, warmup=1, **{"time-budget": 5.0, "keep-traces": True}
    )
    bench = Benchmark(workload=str(WORKLOADS / "tiny.py"))
    doc = run_benchmark(bench, harness, progress=None, device="cpu", trace_dir=tmp_path)
    (c,) = doc.configurations
    assert c.profile is not None and c.memory is not None and c.memory.device == "cpu"
    assert c.profile.operators[0].name == "aten::addmm"
    assert c.profile.timed_median_ns is not None and c.profile.host_share is None
    assert c.details["profile_wall_ns"] > 0
    trace = json.loads((tmp_path / str(c.profile.trace)).read_text())
    assert any(e.get("name") == "aten::addmm" for e in trace["traceEvents"])


def test_profile_false_skips_it(tmp_path: Path) -> None:
    harness = HarnessSettings(
        samples=8, processes=1, warmup=1, profile=False, **{"time-budget": 5.0, "keep-traces": True}
    )
    bench = Benchmark(workload=str(WORKLOADS / "tiny.py"))
    doc = run_benchmark(bench, harness, progress=None, device="cpu", trace_dir=tmp_path)
    (c,) = doc.configurations
    assert c.profile is None and c.memory is None and "profile_wall_ns" not in c.details
    assert not list(tmp_path.iterdir())


def test_onnxruntime_on_the_cpu_is_profiled_by_its_own_profiler(cpu_process, tmp_path: Path):
    pytest.importorskip("onnxruntime", reason="the onnx extra is not installed")
    trace = tmp_path / "head-onnxruntime.json"
    base, base_memory = _profiled(cpu_process, VARIANTS / "base.py", "onnxruntime")
    head, _ = _profiled(cpu_process, VARIANTS / "extra_softmax.py", "onnxruntime", trace)
    _, wide_memory = _profiled(cpu_process, VARIANTS / "wide.py", "onnxruntime")
    assert base.source == "onnxruntime" and base.time_basis == "cpu"
    assert {o.name for o in base.operators} >= {"onnx::Softmax", "onnx::Concat"}
    changes = diff_profiles(base, head)
    # SDPA is exported with a Softmax of its own: the extra one is the third.
    assert changes[0].name == "onnx::Softmax" and "calls 2 → 3" in changes[0].text, changes
    # ORT's own trace is kept, in the Chrome trace format Perfetto opens.
    assert head.trace == trace.name
    assert any(e.get("cat") == "Node" for e in json.loads(trace.read_text()))
    # The arena's bytes in use: the branch's two buffers of 64 x 1024 x WIDEN float32 each,
    # doubled, to the byte (ORT plans them into one block); it WARNs as torch's does.
    growth = wide_memory.peak_allocated_bytes - base_memory.peak_allocated_bytes
    assert growth == 2 * 64 * 1024 * 4 * 4
    change, _ = memory_change("c", base_memory, wide_memory, None, None, GateSettings())
    assert change is not None and change.tier == "WARN"
