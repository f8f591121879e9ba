"""tensorrt: ONNX to a strongly typed engine (build time apart), run on the current CUDA stream.

Not yet verified on a GPU: no tensorrt wheel reaches the GPU machine we test on. Its refusals
are tested on the CPU; its GPU run is a test skipped with that reason (test_harness_gpu.py).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import torch

from bench_runner.errors import ConfigFailure, Unsupported
from bench_runner.precision import uses_tf32
from bench_runner.runtimes.base import Prepared, Subject
from bench_runner.runtimes.onnx_export import onnx_bytes


class TensorRT:
    name = "tensorrt"

    def unavailable(self) -> str | None:
        try:
            import tensorrt  # noqa: F401
        except ImportError:
            return (
                "tensorrt is not installed (pip install 'rnx-benchmark[tensorrt]' on a GPU runner)"
            )
        if not torch.cuda.is_available():
            return "tensorrt needs an NVIDIA GPU and none is visible"
        return None

    def prepare(self, subject: Subject) -> Prepared:
        # Refusals first: they hold whether or not TensorRT is installed.
        if subject.torch_dtype == torch.float64:
            raise Unsupported("TensorRT has no float64 kernels")
        if subject.device.type != "cuda":
            raise Unsupported("TensorRT runs on an NVIDIA GPU; this run uses the CPU")
        import tensorrt as trt

        data, details, export_ns = onnx_bytes(subject)
        logger = trt.Logger(trt.Logger.ERROR)
        builder = trt.Builder(logger)
        # Strongly typed: the engine keeps the graph's dtypes instead of choosing its own.
        flag = 1 << int(trt.NetworkDefinitionCreationFlag.STRONGLY_TYPED)
        network = builder.create_network(flag)
        parser = trt.OnnxParser(network, logger)
        if not parser.parse(data):
            errors = "; ".join(str(parser.get_error(i)) for i in range(parser.num_errors))
            raise Unsupported(f"TensorRT's ONNX parser refused the graph: {errors[:1500]}")
        config = builder.create_builder_config()
        # TensorRT allows TF32 by default: float32 means float32 unless the dtype is tf32.
        if uses_tf32(subject.dtype):
            config.set_flag(trt.BuilderFlag.TF32)
        else:
            config.clear_flag(trt.BuilderFlag.TF32)
        details["tf32"] = uses_tf32(subject.dtype)
        t0 = time.perf_counter_ns()
        serialized = builder.build_serialized_network(network, config)
        if serialized is None:
            raise ConfigFailure("TensorRT failed to build an engine (see its log above)")
        engine = trt.Runtime(logger).deserialize_cuda_engine(serialized)
        engine_ns = time.perf_counter_ns() - t0
        context = engine.create_execution_context()
        io = [engine.get_tensor_name(i) for i in range(engine.num_io_tensors)]
        in_names = [n for n in io if engine.get_tensor_mode(n) == trt.TensorIOMode.INPUT]
        out_names = [n for n in io if engine.get_tensor_mode(n) == trt.TensorIOMode.OUTPUT]
        torch_types = {
            trt.float32: torch.float32,
            trt.float16: torch.float16,
            trt.bfloat16: torch.bfloat16,
            trt.int32: torch.int32,
            trt.int64: torch.int64,
            trt.bool: torch.bool,
        }

        def bind(inputs: list[Any]) -> Callable[[], object]:
            kept = [x.contiguous() for x in inputs]
            for n, x in zip(in_names, kept, strict=True):
                context.set_input_shape(n, tuple(x.shape))
                context.set_tensor_address(n, x.data_ptr())
            outs: list[torch.Tensor] = []
            for n in out_names:
                shape = tuple(context.get_tensor_shape(n))
                t = torch.empty(shape, dtype=torch_types[engine.get_tensor_dtype(n)], device="cuda")
                # Poisoned: an element the engine does not write shows up as NaN.
                if t.is_floating_point():
                    t.fill_(float("nan"))
                context.set_tensor_address(n, t.data_ptr())
                outs.append(t)

            def call() -> object:
                context.execute_async_v3(torch.cuda.current_stream().cuda_stream)
                return (kept, outs)

            return call

        def run(inputs: list[Any]) -> list[torch.Tensor]:
            result: Any = bind(inputs)()
            torch.cuda.synchronize()
            return [o.clone() for o in result[1]]

        details.update({"strongly_typed": True, "tensorrt_version": trt.__version__})
        return Prepared(
            run=run,
            bind=bind,
            timer="cuda",
            build={"export_ns": export_ns, "engine_ns": engine_ns},
            details=details,
        )
