"""onnxruntime: ONNX export per configuration, CUDA provider with IOBinding where present."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import torch

from bench_runner.errors import ConfigFailure, Unsupported
from bench_runner.runtimes.base import Prepared, Subject
from bench_runner.runtimes.onnx_export import onnx_bytes

_NOT_IMPLEMENTED = ("NOT_IMPLEMENTED", "Could not find an implementation", "not supported")


class OnnxRuntime:
    name = "onnxruntime"

    def unavailable(self) -> str | None:
        try:
            import onnx  # noqa: F401
            import onnxruntime  # noqa: F401
        except ImportError as e:
            return f"{e.name} is not installed (pip install 'rnx-benchmark[onnx]')"
        return None

    def prepare(self, subject: Subject) -> Prepared:
        import onnxruntime as ort

        use_cuda = (
            subject.device.type == "cuda"
            and "CUDAExecutionProvider" in ort.get_available_providers()
        )
        if subject.torch_dtype == torch.bfloat16:
            # numpy has no bfloat16, and the CPU provider has no bfloat16 kernels.
            raise Unsupported(
                "onnxruntime: bfloat16 is not supported through the Python API "
                + ("(no bfloat16 buffers in numpy)" if use_cuda else "on the CPU provider")
            )
        data, details, export_ns = onnx_bytes(subject)
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = subject.threads
        opts.inter_op_num_threads = 1
        opts.log_severity_level = 3
        providers = (
            ["CUDAExecutionProvider", "CPUExecutionProvider"]
            if use_cuda
            else ["CPUExecutionProvider"]
        )
        t0 = time.perf_counter_ns()
        try:
            session = ort.InferenceSession(data, sess_options=opts, providers=providers)
        except Exception as e:
            msg = str(e).splitlines()[0][:1000] if str(e) else type(e).__name__
            if any(s in str(e) for s in _NOT_IMPLEMENTED):
                raise Unsupported(f"onnxruntime ({providers[0]}) cannot run it: {msg}") from e
            raise ConfigFailure(f"onnxruntime could not load the exported graph: {msg}") from e
        session_ns = time.perf_counter_ns() - t0
        provider = session.get_providers()[0]
        details.update(
            {"provider": provider, "intra_op_threads": subject.threads, "inter_op_threads": 1}
        )
        names = [i.name for i in session.get_inputs()]
        out_names = [o.name for o in session.get_outputs()]
        if len(names) != len(subject.example_inputs):
            raise ConfigFailure(
                f"the exported graph takes {len(names)} inputs but the workload gives "
                f"{len(subject.example_inputs)} (non-tensor inputs are folded into the graph)"
            )
        device = subject.device

        def run(inputs: list[Any]) -> list[torch.Tensor]:
            feeds = {n: x.detach().cpu().numpy() for n, x in zip(names, inputs, strict=True)}
            outs = session.run(out_names, feeds)
            return [torch.from_numpy(o).to(device) for o in outs]

        def bind_cpu(inputs: list[Any]) -> Callable[[], object]:
            feeds = {n: x.detach().cpu().numpy() for n, x in zip(names, inputs, strict=True)}
            return lambda: session.run(out_names, feeds)

        def bind_cuda(inputs: list[Any]) -> Callable[[], object]:
            binding = session.io_binding()
            kept = [x.contiguous() for x in inputs]  # the binding holds raw pointers to these
            for n, x in zip(names, kept, strict=True):
                binding.bind_input(
                    n,
                    "cuda",
                    x.device.index or 0,
                    x.cpu()[:0].numpy().dtype,
                    list(x.shape),
                    x.data_ptr(),
                )
            for n in out_names:
                binding.bind_output(n, "cuda", device.index or 0)

            def call() -> object:
                kept  # noqa: B018 - keeps the bound input tensors alive with the closure
                session.run_with_iobinding(binding)
                return None

            return call

        return Prepared(
            run=run,
            bind=bind_cuda if provider == "CUDAExecutionProvider" else bind_cpu,
            timer="cuda_wall" if provider == "CUDAExecutionProvider" else "cpu",
            build={"export_ns": export_ns, "engine_ns": session_ns},
            details=details,
        )
