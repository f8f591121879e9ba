"""Runtimes through the registry: unsupported combinations, ONNX, torch.compile details."""

from __future__ import annotations

import pytest
import torch

from bench_runner.runtimes import REGISTRY, get_runtime
from tests.bench_runner.harness_helpers import EXAMPLES, WORKLOADS


def test_registry_has_the_four_runtimes():
    assert set(REGISTRY) == {"pytorch_eager", "torch_compile", "onnxruntime", "tensorrt"}
    with pytest.raises(KeyError, match="unknown runtime"):
        get_runtime("tvm")


def test_tensorrt_is_unavailable_with_a_reason_here(prepare):
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU; tensorrt may really run")
    r = prepare(WORKLOADS / "tiny.py", runtime="tensorrt")
    assert r["status"] == "unsupported"
    assert r["reason"].startswith("unavailable: ")


def test_onnx_workload_on_onnxruntime_is_checked_against_the_onnx_reference(prepare):
    r = prepare(EXAMPLES / "tiny_mlp.onnx", runtime="onnxruntime", dtype="float32", batch_size=3)
    assert r["status"] == "ok", r.get("reason")
    assert r["details"]["provider"] == "CPUExecutionProvider"
    assert r["correctness"]["max_abs_error"] < 1e-5


def test_onnx_workload_in_float64_uses_retyped_weights(prepare):
    r = prepare(EXAMPLES / "tiny_mlp.onnx", runtime="onnxruntime", dtype="float64", batch_size=2)
    assert r["status"] == "ok", r.get("reason")
    assert r["correctness"]["max_abs_error"] < 1e-12


def test_onnx_workload_on_eager_is_unsupported(prepare):
    r = prepare(EXAMPLES / "tiny_mlp.onnx", runtime="pytorch_eager")
    assert r["status"] == "unsupported" and "onnxruntime" in r["reason"]


def test_onnxruntime_cpu_bfloat16_is_unsupported_not_diverged(prepare):
    r = prepare(WORKLOADS / "tiny.py", runtime="onnxruntime", dtype="bfloat16")
    assert r["status"] == "unsupported"
    assert "bfloat16" in r["reason"]


def test_python_workload_on_onnxruntime_records_the_exporter(prepare):
    r = prepare(WORKLOADS / "tiny.py", runtime="onnxruntime", dtype="float32")
    assert r["status"] == "ok", r.get("reason")
    assert "dynamo" in r["details"]["export"]
    assert r["build"]["export_ns"] > 0


@pytest.mark.slow  # two inductor compilations, about 10 s on 2 cores
def test_torch_compile_records_compile_time_and_graph_breaks(prepare):
    r = prepare(WORKLOADS / "graph_break.py", runtime="torch_compile")
    assert r["status"] == "ok", r.get("reason")
    assert r["build"]["compile_ns"] > 0
    assert r["details"]["graph_breaks"] >= 1


@pytest.mark.slow
def test_torch_compile_recompile_after_warmup_is_an_error(cpu_process):
    from bench_runner.runtimes.base import Subject
    from bench_runner.workload import PythonWorkload

    wl = PythonWorkload.load(str(WORKLOADS / "tiny.py"))
    _, model, _ = wl.build(seed=0)
    x = torch.randn(2, 8)
    subject = Subject(
        workload=wl,
        dtype="float32",
        torch_dtype=torch.float32,
        device=torch.device("cpu"),
        batch_size=2,
        threads=1,
        example_inputs=[x],
        module=model,
    )
    prepared = get_runtime("torch_compile").prepare(subject)
    assert prepared.before_timing is not None
    prepared.before_timing()
    prepared.run([torch.randn(2, 8)])  # same shape: no recompile, fine
    with pytest.raises(Exception, match="[Rr]ecompil"):
        prepared.run([torch.randn(5, 8, 1).squeeze(-1)])


# ---- The GPU paths of ONNX Runtime and TensorRT, as far as they can be checked without one ----
# Their runs on a GPU are in test_harness_gpu.py (skipped without a GPU or the package, with the
# reason; benchmarks/gpu/gpu_runtimes.py runs them on a GPU machine).


def test_onnxruntime_uses_its_cuda_provider_only_on_a_gpu_run_where_installed():
    from bench_runner.runtimes.onnxrt import providers_for

    cuda, cpu = torch.device("cuda"), torch.device("cpu")
    both = ["CUDAExecutionProvider", "CPUExecutionProvider"]
    assert providers_for(cuda, both) == both
    assert providers_for(cuda, ["CPUExecutionProvider"]) == ["CPUExecutionProvider"]
    assert providers_for(cpu, both) == ["CPUExecutionProvider"]
    # onnxruntime-gpu lists TensorRT's provider whether or not TensorRT's libraries load (on the
    # H200 they do not): it is never asked for, so it can neither crash nor be timed.
    assert providers_for(cuda, ["TensorrtExecutionProvider", *both]) == both


def test_onnxruntime_cuda_provider_computes_float32_without_tf32_on_our_stream():
    from bench_runner.runtimes.onnxrt import cuda_options

    # ORT's own default is use_tf32=1: float32 matmuls in TF32, 5.6e-4 off on an H200.
    options = cuda_options(torch.device("cuda", 1), 1234, tf32=False)
    assert options == {"device_id": "1", "user_compute_stream": "1234", "use_tf32": "0"}
    assert cuda_options(torch.device("cuda", 0), 1, tf32=True)["use_tf32"] == "1"


@pytest.mark.parametrize("runtime", ["pytorch_eager", "torch_compile", "onnxruntime"])
def test_tf32_on_the_cpu_is_unsupported_and_says_to_use_float32(prepare, runtime):
    r = prepare(WORKLOADS / "tiny.py", runtime=runtime, dtype="tf32", batch_size=2)
    assert r["status"] == "unsupported"
    assert "TensorFloat-32" in r["reason"] and "use float32" in r["reason"]


def test_tf32_math_is_on_only_while_a_tf32_configuration_runs():
    from bench_runner.precision import set_matmul_precision

    try:
        set_matmul_precision("tf32")
        assert torch.backends.cuda.matmul.allow_tf32 and torch.backends.cudnn.allow_tf32
        assert torch.get_float32_matmul_precision() == "high"
        for dtype in ("float32", "float16", "bfloat16", "float64"):
            set_matmul_precision(dtype)
            assert not torch.backends.cuda.matmul.allow_tf32
            assert not torch.backends.cudnn.allow_tf32
            assert torch.get_float32_matmul_precision() == "highest"
    finally:
        set_matmul_precision("float32")


def test_onnxruntime_bfloat16_on_the_cpu_provider_is_unsupported_with_the_reason():
    from bench_runner.errors import Unsupported
    from bench_runner.runtimes.base import Subject
    from bench_runner.runtimes.onnxrt import OnnxRuntime
    from bench_runner.workload import PythonWorkload

    wl = PythonWorkload.load(str(WORKLOADS / "tiny.py"))
    subject = Subject(
        workload=wl,
        dtype="bfloat16",
        torch_dtype=torch.bfloat16,
        device=torch.device("cpu"),
        batch_size=2,
        threads=1,
        example_inputs=[torch.zeros(2, 8, dtype=torch.bfloat16)],
    )
    with pytest.raises(Unsupported, match="CPU provider has no bfloat16 kernels"):
        OnnxRuntime().prepare(subject)


def test_tensorrt_refuses_float64_and_cpu_runs_without_being_installed():
    from bench_runner.errors import Unsupported
    from bench_runner.runtimes.base import Subject
    from bench_runner.runtimes.tensorrt import TensorRT
    from bench_runner.workload import PythonWorkload

    wl = PythonWorkload.load(str(WORKLOADS / "tiny.py"))

    def subject(dtype: torch.dtype) -> Subject:
        return Subject(
            workload=wl,
            dtype=str(dtype).removeprefix("torch."),
            torch_dtype=dtype,
            device=torch.device("cpu"),
            batch_size=2,
            threads=1,
            example_inputs=[torch.zeros(2, 8, dtype=dtype)],
        )

    with pytest.raises(Unsupported, match="no float64 kernels"):
        TensorRT().prepare(subject(torch.float64))
    with pytest.raises(Unsupported, match="this run uses the CPU"):
        TensorRT().prepare(subject(torch.float16))
