"""onnxruntime: ONNX export per configuration, CUDA provider with IOBinding where present.

On the CUDA provider ORT runs on a stream we create and hand it (`user_compute_stream`), the
inputs and outputs are torch buffers bound by pointer (no numpy, so bfloat16 works), and the
run does not synchronize at its end: the timed call is asynchronous like an eager call, joined
to the timer's stream by stream waits, so the timer's events bracket ORT's kernels and nothing
else (the host's time to launch the call is recorded beside, as launch overhead). TF32 is off
(`use_tf32=0`, ORT's default is on) except for the tf32 dtype: float32 means float32 here as in
every runtime (bench_runner/precision.py).
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from bench_runner.errors import ConfigFailure, Unsupported
from bench_runner.precision import uses_tf32
from bench_runner.profiling import OwnProfile
from bench_runner.runtimes.base import Prepared, Subject
from bench_runner.runtimes.onnx_export import onnx_bytes

_NOT_IMPLEMENTED = ("NOT_IMPLEMENTED", "Could not find an implementation", "not supported")
CUDA = "CUDAExecutionProvider"
CPU = "CPUExecutionProvider"
# onnx.TensorProto's element types, by torch dtype (IOBinding takes them as integers).
ONNX_TYPES = {
    torch.float32: 1,
    torch.uint8: 2,
    torch.int8: 3,
    torch.int32: 6,
    torch.int64: 7,
    torch.bool: 9,
    torch.float16: 10,
    torch.float64: 11,
    torch.bfloat16: 16,
}
# ORT's names of an output's element type.
TORCH_TYPES = {
    "tensor(float)": torch.float32,
    "tensor(uint8)": torch.uint8,
    "tensor(int8)": torch.int8,
    "tensor(int32)": torch.int32,
    "tensor(int64)": torch.int64,
    "tensor(bool)": torch.bool,
    "tensor(float16)": torch.float16,
    "tensor(double)": torch.float64,
    "tensor(bfloat16)": torch.bfloat16,
}


def providers_for(device: torch.device, available: list[str]) -> list[str]:
    """The CUDA provider (CPU as fallback for its missing ops) on a GPU run where installed."""
    return [CUDA, CPU] if device.type == "cuda" and CUDA in available else [CPU]


def cuda_options(device: torch.device, stream: int, tf32: bool) -> dict[str, str]:
    """The CUDA provider's options: our stream, and float32 computed in float32 unless the
    configuration is tf32."""
    return {
        "device_id": str(device.index or 0),
        "user_compute_stream": str(stream),
        "use_tf32": "1" if tf32 else "0",
    }


def _session(
    data: bytes, subject: Subject, providers: list[Any], *, profile_prefix: str | None = None
) -> tuple[Any, int]:
    import onnxruntime as ort

    opts = ort.SessionOptions()
    if profile_prefix is not None:
        opts.enable_profiling = True
        opts.profile_file_prefix = profile_prefix
    opts.intra_op_num_threads = subject.threads
    opts.inter_op_num_threads = 1
    opts.log_severity_level = 3
    t0 = time.perf_counter_ns()
    try:
        session = ort.InferenceSession(data, sess_options=opts, providers=providers)
    except Exception as e:
        msg = str(e).splitlines()[0][:1000] if str(e) else type(e).__name__
        name = providers[0] if isinstance(providers[0], str) else providers[0][0]
        if any(s in str(e) for s in _NOT_IMPLEMENTED):
            raise Unsupported(f"onnxruntime ({name}) cannot run it: {msg}") from e
        raise ConfigFailure(f"onnxruntime could not load the exported graph: {msg}") from e
    return session, time.perf_counter_ns() - t0


def read_ort_profile(events: list[Any], *, skip_runs: int) -> OwnProfile:
    """ONNX Runtime's profile (a Chrome trace: one "model_run" per run, one "Node" event per
    operator run) as OwnProfile, the first `skip_runs` runs left out. An operator is keyed by
    its type (onnx::Softmax), as torch's are by aten op, so layers of one kind add up.

    The peak is the arena's bytes in use at their most during the profiled runs less those in
    use before the session's first run: ORT plans a run's intermediates into one block that it
    keeps between runs, so a run's own growth would hide them."""
    runs = sorted(
        (e["ts"], e["ts"] + e["dur"])
        for e in events
        if e.get("cat") == "Session" and e.get("name") == "model_run"
    )
    nodes = sorted(
        (e for e in events if e.get("cat") == "Node" and e["name"].endswith("_kernel_time")),
        key=lambda e: e["ts"],
    )
    out: list[tuple[str, int, float]] = []
    in_use: list[int] = []
    for index, (start, end) in enumerate(runs[skip_runs:]):
        for e in (e for e in nodes if start <= e["ts"] <= end):
            out.append((f"onnx::{e['args'].get('op_name', '?')}", index, e["dur"] * 1e3))
            in_use.append(int(e["args"]["mem_bytes_in_use"]))
    if not nodes or not in_use:
        return OwnProfile("onnxruntime", out, None)
    first = nodes[0]["args"]
    before = int(first["mem_bytes_in_use"]) - int(first["mem_in_use_delta"])
    return OwnProfile("onnxruntime", out, max(0, max(in_use) - before))


def _own_profiler(
    data: bytes, subject: Subject
) -> Callable[[list[Any], int, Path | None], OwnProfile]:
    """ORT's profiler over a second CPU session of the same graph and options (profiling is a
    session option, and the timed session must not pay for it): one run to warm it, then the
    profiled calls; its trace file kept at trace_path where asked."""

    def profile(inputs: list[Any], calls: int, trace_path: Path | None) -> OwnProfile:
        with tempfile.TemporaryDirectory(prefix="rnx-ort-profile-") as tmp:
            session, _ = _session(data, subject, [CPU], profile_prefix=f"{tmp}/ort")
            call = _CpuCalls(session, subject.device).bind(inputs)
            for _ in range(1 + calls):
                call()
            written = Path(session.end_profiling())
            events = json.loads(written.read_text())
            if trace_path is not None:
                trace_path.parent.mkdir(parents=True, exist_ok=True)
                shutil.move(str(written), trace_path)
        return read_ort_profile(events, skip_runs=1)

    return profile


class _CpuCalls:
    """The CPU provider: numpy feeds, converted once ahead of the timed call."""

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

    def bind(self, inputs: list[Any]) -> Callable[[], object]:
        feeds = self._feeds(inputs)
        return lambda: self.session.run(self.out_names, feeds)


class _CudaCalls:
    """The CUDA provider: torch buffers bound by pointer, ORT's work on our stream, no sync."""

    def __init__(self, session: Any, device: torch.device, stream: torch.cuda.Stream):
        import onnxruntime as ort

        self.session = session
        self.device = device
        self.stream = stream
        self.names = [i.name for i in session.get_inputs()]
        self.out_names = [o.name for o in session.get_outputs()]
        self.run_options = ort.RunOptions()
        # Run() would otherwise wait for the GPU before returning: host time in the sample.
        self.run_options.add_run_config_entry("disable_synchronize_execution_providers", "1")

    def _binding(self, kept: list[torch.Tensor]) -> Any:
        binding = self.session.io_binding()
        for n, x in zip(self.names, kept, strict=True):
            if x.dtype not in ONNX_TYPES:
                raise Unsupported(f"onnxruntime: no IOBinding element type for {x.dtype}")
            binding.bind_input(
                n, "cuda", self.device.index or 0, ONNX_TYPES[x.dtype], list(x.shape), x.data_ptr()
            )
        return binding

    def _output_buffers(self, kept: list[torch.Tensor]) -> list[torch.Tensor]:
        """Outputs' shapes and types from one run with ORT's own buffers (not timed)."""
        binding = self._binding(kept)
        for n in self.out_names:
            binding.bind_output(n, "cuda", self.device.index or 0)
        self._launch(binding)
        torch.cuda.synchronize(self.device)
        outs = []
        for value in binding.get_outputs():
            dtype = TORCH_TYPES.get(value.data_type())
            if dtype is None:
                raise Unsupported(f"onnxruntime: an output of type {value.data_type()}")
            t = torch.empty(value.shape(), dtype=dtype, device=self.device)
            if t.is_floating_point():  # poisoned: an element ORT does not write shows as NaN
                t.fill_(float("nan"))
            outs.append(t)
        return outs

    def _launch(self, binding: Any) -> None:
        current = torch.cuda.current_stream(self.device)
        self.stream.wait_stream(current)  # inputs written on the caller's stream come first
        self.session.run_with_iobinding(binding, self.run_options)
        current.wait_stream(self.stream)  # the caller's end event waits for ORT's kernels

    def bind(self, inputs: list[Any]) -> Callable[[], object]:
        kept = [x.contiguous() for x in inputs]  # the binding holds raw pointers to these
        outs = self._output_buffers(kept)
        binding = self._binding(kept)
        for n, t in zip(self.out_names, outs, strict=True):
            binding.bind_output(
                n, "cuda", self.device.index or 0, ONNX_TYPES[t.dtype], list(t.shape), t.data_ptr()
            )

        def call() -> object:
            self._launch(binding)
            return (kept, outs)

        return call

    def run(self, inputs: list[Any]) -> list[torch.Tensor]:
        result: Any = self.bind(inputs)()
        torch.cuda.synchronize(self.device)
        return [o.clone() for o in result[1]]


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

        names = providers_for(subject.device, ort.get_available_providers())
        if names[0] == CPU and subject.torch_dtype == torch.bfloat16:
            raise Unsupported("onnxruntime: the CPU provider has no bfloat16 kernels")
        data, details, export_ns = onnx_bytes(subject)
        stream = torch.cuda.Stream(subject.device) if names[0] == CUDA else None
        providers: list[Any] = list(names)
        tf32 = uses_tf32(subject.dtype)
        if stream is not None:
            providers[0] = (CUDA, cuda_options(subject.device, stream.cuda_stream, tf32))
        session, session_ns = _session(data, subject, providers)
        provider = session.get_providers()[0]
        if provider == CPU and subject.torch_dtype == torch.bfloat16:  # CUDA provider not loaded
            raise Unsupported("onnxruntime: the CPU provider has no bfloat16 kernels")
        if provider == CPU and tf32:  # the CUDA provider did not load
            raise Unsupported("onnxruntime: tf32 needs the CUDA provider; this run uses the CPU")
        asked = "1" if tf32 else "0"
        if provider == CUDA and session.get_provider_options()[CUDA].get("use_tf32") != asked:
            raise ConfigFailure(f"onnxruntime's CUDA provider did not take use_tf32={asked}")
        details.update(
            {"provider": provider, "intra_op_threads": subject.threads, "inter_op_threads": 1}
        )
        if provider == CUDA:
            details["use_tf32"] = tf32
        calls: _CpuCalls | _CudaCalls = (
            _CudaCalls(session, subject.device, stream)
            if provider == CUDA and stream is not None
            else _CpuCalls(session, subject.device)
        )
        if len(calls.names) != len(subject.example_inputs):
            raise ConfigFailure(
                f"the exported graph takes {len(calls.names)} inputs but the workload gives "
                f"{len(subject.example_inputs)} (non-tensor inputs are folded into the graph)"
            )
        return Prepared(
            run=calls.run,
            bind=calls.bind,
            timer="cuda" if provider == CUDA else "cpu",
            build={"export_ns": export_ns, "engine_ns": session_ns},
            details=details,
            own_profiler=_own_profiler(data, subject) if provider == CPU else None,
        )
