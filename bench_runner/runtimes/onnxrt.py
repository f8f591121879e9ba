"""onnxruntime: ONNX export per configuration, CUDA provider with IOBinding where present.

The CUDA provider path (IOBinding, wall clock with a device sync) is not yet verified on a GPU:
no onnxruntime-gpu wheel reaches the GPU machine we test on, so GPU runs there use the CPU
provider (and say so in `details.provider`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import torch

from bench_runner.errors import ConfigFailure, Unsupported
from bench_runner.runtimes.base import Prepared, Subject
from bench_runner.runtimes.onnx_export import onnx_bytes

_NOT_IMPLEMENTED = ("NOT_IMPLEMENTED", "Could not find an implementation", "not supported")
CUDA = "CUDAExecutionProvider"
CPU = "CPUExecutionProvider"


def providers_for(device: torch.device, available: list[str]) -> list[str]:
    """The CUDA provider (CPU as fallback for its missing ops) on a GPU run where installed."""
    return [CUDA, CPU] if device.type == "cuda" and CUDA in available else [CPU]


def bfloat16_unsupported(providers: list[str]) -> Unsupported:
    # numpy has no bfloat16, and the CPU provider has no bfloat16 kernels.
    where = "(no bfloat16 buffers in numpy)" if providers[0] == CUDA else "on the CPU provider"
    return Unsupported(f"onnxruntime: bfloat16 is not supported through the Python API {where}")


def timer_for(provider: str) -> str:
    """ONNX Runtime's CUDA provider launches on its own stream: events on ours would miss it."""
    return "cuda_wall" if provider == CUDA else "cpu"


def _session(data: bytes, subject: Subject, providers: list[str]) -> tuple[Any, int]:
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = subject.threads
    opts.inter_op_num_threads = 1
    opts.log_severity_level = 3
    t0 = time.perf_counter_ns()
    try:
        session = ort.InferenceSession(data, sess_options=opts, providers=providers)
    except Exception as e:
        msg = str(e).splitlines()[0][:1000] if str(e) else type(e).__name__
        if any(s in str(e) for s in _NOT_IMPLEMENTED):
            raise Unsupported(f"onnxruntime ({providers[0]}) cannot run it: {msg}") from e
        raise ConfigFailure(f"onnxruntime could not load the exported graph: {msg}") from e
    return session, time.perf_counter_ns() - t0


class _Calls:
    """run() for the checks and bind() for the timed call, on one session."""

    def __init__(self, session: Any, device: torch.device):
        self.session = session
        self.device = device
        self.names = [i.name for i in session.get_inputs()]
        self.out_names = [o.name for o in session.get_outputs()]

    def _feeds(self, inputs: list[Any]) -> dict[str, Any]:
        return {n: x.detach().cpu().numpy() for n, x in zip(self.names, inputs, strict=True)}

    def run(self, inputs: list[Any]) -> list[torch.Tensor]:
        outs = self.session.run(self.out_names, self._feeds(inputs))
        return [torch.from_numpy(o).to(self.device) for o in outs]

    def bind_cpu(self, inputs: list[Any]) -> Callable[[], object]:
        feeds = self._feeds(inputs)
        return lambda: self.session.run(self.out_names, feeds)

    def bind_cuda(self, inputs: list[Any]) -> Callable[[], object]:
        binding = self.session.io_binding()
        kept = [x.contiguous() for x in inputs]  # the binding holds raw pointers to these
        for n, x in zip(self.names, kept, strict=True):
            binding.bind_input(
                n,
                "cuda",
                x.device.index or 0,
                x.cpu()[:0].numpy().dtype,
                list(x.shape),
                x.data_ptr(),
            )
        for n in self.out_names:
            binding.bind_output(n, "cuda", self.device.index or 0)

        def call() -> object:
            kept  # noqa: B018 - keeps the bound input tensors alive with the closure
            self.session.run_with_iobinding(binding)
            return None

        return call


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

        providers = providers_for(subject.device, ort.get_available_providers())
        if subject.torch_dtype == torch.bfloat16:
            raise bfloat16_unsupported(providers)
        data, details, export_ns = onnx_bytes(subject)
        session, session_ns = _session(data, subject, providers)
        provider = session.get_providers()[0]
        details.update(
            {"provider": provider, "intra_op_threads": subject.threads, "inter_op_threads": 1}
        )
        calls = _Calls(session, subject.device)
        if len(calls.names) != len(subject.example_inputs):
            raise ConfigFailure(
                f"the exported graph takes {len(calls.names)} inputs but the workload gives "
                f"{len(subject.example_inputs)} (non-tensor inputs are folded into the graph)"
            )
        return Prepared(
            run=calls.run,
            bind=calls.bind_cuda if provider == CUDA else calls.bind_cpu,
            timer=timer_for(provider),
            build={"export_ns": export_ns, "engine_ns": session_ns},
            details=details,
        )
