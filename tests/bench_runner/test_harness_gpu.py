"""GPU-only checks (skipped without CUDA; benchmarks/gpu/gpu_timing.py runs them on an H200 too)."""

from __future__ import annotations

import os
import time

import pytest
import torch

from bench_runner.gpu_checks import ContentionSigns
from bench_runner.telemetry import GpuTelemetry
from bench_runner.timing import CudaTimer
from bench_runner.worker_process import Side, configure_process
from tests.bench_runner.harness_helpers import EXAMPLES, WORKLOADS, prepare_cmd

pytestmark = pytest.mark.gpu


@pytest.fixture
def cuda_side():
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU (this machine has none)")
    configure_process(1, torch.device("cuda"))

    def make(path):
        side = Side(path=str(path), device=torch.device("cuda"), threads=1, seed=0)
        side.load()
        return side

    return make


@pytest.mark.parametrize("name", ["side_stream.py", "side_stream_small.py"])
def test_work_hidden_on_another_stream_is_an_error(cuda_side, name):
    r = cuda_side(WORKLOADS / name).prepare(prepare_cmd("pytorch_eager", "float32", 1))
    assert r["status"] == "error"
    assert "another stream" in r["reason"]


def test_gpu_timing_method_and_launch_overhead_are_recorded(cuda_side):
    side = cuda_side(WORKLOADS / "tiny.py")
    cmd = prepare_cmd("pytorch_eager", "float32", 2)
    assert side.prepare(cmd)["status"] == "ok"
    assert side.measure(cmd["id"])["ns"] > 0
    report = side.report(cmd["id"])
    assert report["launch_overhead_ns"] > 0 and report["flush_bytes"] >= 2 * report["l2_bytes"]


def test_a_host_pause_longer_than_the_spin_is_retaken_not_timed(cuda_side):
    timer = CudaTimer(torch.device("cuda"), GpuTelemetry(reason="not needed"))
    a = torch.randn(4096, device="cuda")

    def slow_to_launch():
        a.mul_(1.0)
        time.sleep(0.002)  # the host stalls 2 ms between two launches: past the first spin
        a.mul_(1.0)

    ns = timer.sample(slow_to_launch, 2)
    assert timer.details["late_samples_retaken"] >= 1
    assert "late_samples_kept" not in timer.details
    assert ns < 500_000  # two tiny kernels; the GPU waiting 2 ms for the host would show
    assert timer.report()["launch_overhead_ns"] > 2_000_000


@pytest.mark.parametrize(
    ("name", "dtype"),
    [
        ("partial_write.py", "float32"),
        ("lower_precision.py", "float32"),
        ("ignores_input.py", "float32"),
        ("bfloat16_inside.py", "float16"),  # inside float16's tolerance: the precision audit
    ],
)
def test_bad_kernels_are_caught_on_the_gpu_too(cuda_side, name, dtype):
    r = cuda_side(WORKLOADS / name).prepare(prepare_cmd("pytorch_eager", dtype, 8))
    assert r["status"] == "diverged"


HOG = """
import sys, torch
a = torch.randn(4096, 4096, device="cuda")
(a @ a).sum().item()
print("busy", flush=True)
while True:
    for _ in range(50):
        a @ a
    torch.cuda.synchronize()
"""


@pytest.fixture
def gpu_hog():
    """Another process keeping the GPU busy, as a neighbour's CI job would."""
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-c", HOG], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "busy"
        yield proc.pid
    finally:
        proc.kill()
        proc.wait(10)


def test_a_gpu_shared_with_another_process_is_not_an_error(cuda_side, gpu_hog):
    side = cuda_side(WORKLOADS / "tiny.py")
    r = side.prepare(prepare_cmd("pytorch_eager", "float32", 2))
    assert r["status"] == "ok", r.get("reason")
    others = ContentionSigns.from_message(r["contention"]).others({os.getpid()})
    if others is not None:  # None: NVML's pids are the host's (a container), not comparable
        assert gpu_hog in others


def test_clocks_power_and_temperature_come_with_every_sample(cuda_side):
    side = cuda_side(WORKLOADS / "tiny.py")
    if not side.telemetry.available:
        pytest.skip(f"NVML is not usable here: {side.telemetry.reason}")
    cmd = prepare_cmd("pytorch_eager", "float32", 2)
    assert side.prepare(cmd)["status"] == "ok"
    sample = side.measure(cmd["id"])
    assert sample["telemetry"]["sm_mhz"] > 0 and sample["telemetry"]["temp_c"] > 0
    assert sample["telemetry"]["power_w"] > 0  # instantaneous where the GPU gives it


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_a_scalar_loss_in_low_precision_is_ok_on_the_gpu(cuda_side, dtype):
    r = cuda_side(WORKLOADS / "hinge_loss.py").prepare(prepare_cmd("pytorch_eager", dtype, 4096))
    assert r["status"] == "ok", r.get("reason")


NOT_VERIFIED = (
    "not yet verified on a GPU: {what} is not installed here (no wheel reaches the GPU machine "
    "we test on)"
)


@pytest.mark.parametrize(
    ("workload", "dtype", "batch"),
    [
        ("tiny.py", "float32", 2),
        ("gelu_linear", "float32", 32),  # 644 of 4096 elements off with ORT's default TF32
        ("gelu_linear", "tf32", 32),  # ORT's use_tf32=1, asked for and checked as tf32
        ("gelu_linear", "float16", 8),
        ("gelu_linear", "bfloat16", 8),  # through IOBinding of torch buffers, no numpy
    ],
)
def test_onnxruntime_cuda_provider_runs_and_is_checked(cuda_side, workload, dtype, batch):
    ort = pytest.importorskip("onnxruntime", reason="onnxruntime is not installed")
    if "CUDAExecutionProvider" not in ort.get_available_providers():
        pytest.skip(NOT_VERIFIED.format(what="ONNX Runtime's CUDA provider"))
    path = EXAMPLES / "gelu_linear.py" if workload == "gelu_linear" else WORKLOADS / workload
    side = cuda_side(path)
    cmd = prepare_cmd("onnxruntime", dtype, batch)
    r = side.prepare(cmd)
    assert r["status"] == "ok", r.get("reason")
    assert r["details"]["provider"] == "CUDAExecutionProvider"
    assert r["details"]["use_tf32"] is (dtype == "tf32")
    # Timed like eager: events on the stream ORT works on, the host's launch time beside.
    assert r["details"]["timing_method"] == "cuda_events+busy_stream+l2_flush"
    assert side.measure(cmd["id"])["ns"] > 0
    assert side.report(cmd["id"])["launch_overhead_ns"] > 0


@pytest.mark.parametrize("runtime", ["pytorch_eager", "torch_compile"])
def test_tf32_is_its_own_precision_and_float32_stays_float32(cuda_side, runtime):
    side = cuda_side(EXAMPLES / "gelu_linear.py")
    errors = {}
    for dtype in ("float32", "tf32", "float32"):  # the switch goes off again after tf32
        cmd = prepare_cmd(runtime, dtype, 32)
        r = side.prepare(cmd)
        assert r["status"] == "ok", r.get("reason")
        assert side.measure(cmd["id"])["ns"] > 0
        errors.setdefault(dtype, []).append(r["correctness"]["max_abs_error"])
    # float32 is float32 (an H200: ~5e-7); TF32 products keep a 10-bit mantissa (~6e-4).
    assert max(errors["float32"]) < 1e-5 < errors["tf32"][0] < 1e-2
    assert not torch.backends.cuda.matmul.allow_tf32


def test_tensorrt_engine_runs_and_is_checked(cuda_side):
    pytest.importorskip("tensorrt", reason=NOT_VERIFIED.format(what="TensorRT"))
    r = cuda_side(WORKLOADS / "tiny.py").prepare(prepare_cmd("tensorrt", "float16", 2))
    assert r["status"] == "ok", r.get("reason")
    assert r["details"]["strongly_typed"] is True


def profiled_kernel_us(call, calls: int = 20) -> float:
    """A separate profile's kernel time per call: each call alone on the GPU after an L2 flush
    and a synchronize, every GPU activity but the flush's (FillFunctor, which gelu_linear never
    launches) and CUPTI's waits summed, over the calls. No call ranges: independent of the
    kernels timer's attribution."""
    from torch.profiler import ProfilerActivity, profile

    from bench_runner.kernel_time import SYNC_RECORDS

    flush = torch.empty(2 * torch.cuda.get_device_properties(0).L2_cache_size // 4, device="cuda")
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            flush.zero_()
            torch.cuda.synchronize()
            call()
            torch.cuda.synchronize()
    total = sum(
        e.time_range.elapsed_us()
        for e in prof.events()
        if str(e.device_type).endswith("CUDA")
        and not getattr(e, "is_user_annotation", False)
        and "FillFunctor" not in e.name
        and e.name not in SYNC_RECORDS
    )
    return total / calls


@pytest.mark.parametrize("runtime", ["pytorch_eager", "torch_compile", "onnxruntime"])
def test_the_kernels_timer_reads_a_profiles_kernel_sum(cuda_side, runtime):
    if runtime == "onnxruntime":
        ort = pytest.importorskip("onnxruntime", reason="onnxruntime is not installed")
        if "CUDAExecutionProvider" not in ort.get_available_providers():
            pytest.skip(NOT_VERIFIED.format(what="ONNX Runtime's CUDA provider"))
    side = cuda_side(EXAMPLES / "gelu_linear.py")
    cmd = prepare_cmd(runtime, "float16", 8, gpu_timer="kernels")
    r = side.prepare(cmd)
    assert r["status"] == "ok", r.get("reason")
    assert r["details"]["timing_method"] == "cupti_kernel_sum+l2_flush"
    samples = sorted(side.measure(cmd["id"])["ns"] for _ in range(9))
    timed_us = samples[len(samples) // 2] / 1e3
    reference_us = profiled_kernel_us(side.ready[cmd["id"]].call)
    report = side.report(cmd["id"])
    assert abs(timed_us / reference_us - 1) <= 0.10, (timed_us, reference_us, report)
    assert report["kernels_per_call"] >= 1 and report["activities_unattributed"] == 0
    # The events' span of the same calls holds the kernels and the gaps between them.
    assert report["event_span_ns"] / 1e3 >= timed_us
