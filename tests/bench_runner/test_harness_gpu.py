"""GPU-only checks (skipped without CUDA; benchmarks/gpu_timing.py runs them on an H200 too)."""

from __future__ import annotations

import pytest
import torch

from bench_runner.worker import Side, configure_process
from tests.bench_runner.harness_helpers import WORKLOADS, prepare_cmd

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


def test_work_hidden_on_another_stream_is_an_error(cuda_side):
    r = cuda_side(WORKLOADS / "side_stream.py").prepare(prepare_cmd("pytorch_eager", "float32", 1))
    assert r["status"] == "error"
    assert "another stream" in r["reason"]


def test_gpu_timing_method_and_launch_overhead_are_recorded(cuda_side):
    side = cuda_side(WORKLOADS / "tiny.py")
    cmd = prepare_cmd("pytorch_eager", "float32", 2)
    assert side.prepare(cmd)["status"] == "ok"
    assert side.measure(cmd["id"])["ns"] > 0
    report = side.report(cmd["id"])
    assert report["launch_overhead_ns"] > 0 and report["flush_bytes"] >= 2 * report["l2_bytes"]


@pytest.mark.parametrize("name", ["partial_write.py", "lower_precision.py", "ignores_input.py"])
def test_bad_kernels_are_caught_on_the_gpu_too(cuda_side, name):
    r = cuda_side(WORKLOADS / name).prepare(prepare_cmd("pytorch_eager", "float32", 8))
    assert r["status"] == "diverged"
