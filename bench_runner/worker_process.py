"""What runs inside a worker process: loads one side's workload, builds, checks, warms up and
times on command.

The orchestrator sends small dict commands over a pipe: `build` (and, in the first process,
check) a configuration, `warm` it up, `measure` one sample, `report`, `close`. Only one worker
warms up or measures at a time; builds may overlap. A workload that crashes this process costs
its configurations, never the harness.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import sys
import time
import traceback
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from bench_runner import compiler_preload
from bench_runner.correctness import check_correctness
from bench_runner.errors import ConfigFailure, Unsupported
from bench_runner.gpu_checks import ContentionSigns
from bench_runner.peak_probe import peaks_for
from bench_runner.precision import set_matmul_precision, uses_tf32
from bench_runner.profiling import profile_configuration
from bench_runner.references import ReferenceStore
from bench_runner.runtimes import Prepared, get_runtime
from bench_runner.subjects import build_subject
from bench_runner.telemetry import GpuTelemetry, open_telemetry
from bench_runner.timing import CudaTimer, Timer, make_timer, warm_up
from bench_runner.work import measure_work
from bench_runner.workload import TORCH_DTYPES, OnnxWorkload, PythonWorkload, load_workload

# Messages of torch and ONNX Runtime that mean "this op has no kernel for this dtype/device".
_UNSUPPORTED_HINTS = ("not implemented for", "NOT_IMPLEMENTED", "Could not find an implementation")
# References kept for reuse by the next runtime of the same dtype and batch size.
REFERENCE_BUDGET_CPU = 1 << 30
REFERENCE_BUDGET_GPU_FRACTION = 0.1


def configure_process(
    threads: int, device: torch.device, cpus: list[int] | None = None
) -> dict[str, Any]:
    """Fixed thread counts, fixed CPUs and no TF32 (until a tf32 configuration asks for it):
    what the numbers and tolerances assume."""
    pinned: list[int] = []
    if cpus:
        # A CPU that vanished (hot-unplug, a changed cpuset) leaves the process unpinned.
        with contextlib.suppress(AttributeError, OSError):
            os.sched_setaffinity(0, set(cpus))
            pinned = sorted(os.sched_getaffinity(0))
    # Exporter and deprecation chatter would bury the progress lines on stderr.
    warnings.filterwarnings("ignore")
    for name in ("torch.onnx", "torch._dynamo", "torch._inductor", "onnxscript"):
        logging.getLogger(name).setLevel(logging.ERROR)
    torch.set_num_threads(threads)
    with contextlib.suppress(RuntimeError):  # only settable before inter-op work has started
        torch.set_num_interop_threads(1)
    torch.set_grad_enabled(False)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    if device.type == "cuda" and device.index is not None:
        torch.cuda.set_device(device)
    return {"torch_threads": torch.get_num_threads(), "tf32": False, "cpus": pinned}


def resolve_device(text: str) -> torch.device:
    """auto: CUDA when a GPU is visible, else the CPU. Raises ValueError with the fix."""
    if text == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if text.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"--device {text}: no CUDA device is visible; use --device cpu")
    if text != "cpu" and not text.startswith("cuda"):
        raise ValueError(f"--device {text!r}: use auto, cpu or cuda[:N]")
    return torch.device(text)


def memory_in_use(device: torch.device) -> int:
    """Bytes this process holds where the work runs: device memory, or resident CPU memory."""
    if device.type == "cuda":
        return int(torch.cuda.memory_allocated(device))
    with contextlib.suppress(OSError, ValueError, IndexError):
        resident_pages = int(open("/proc/self/statm").read().split()[1])  # noqa: SIM115
        return resident_pages * os.sysconf("SC_PAGE_SIZE")
    return 0


def peak_memory(device: torch.device) -> int:
    """The most this process has held so far: device memory, or its peak resident memory."""
    if device.type == "cuda":
        return int(torch.cuda.max_memory_allocated(device))
    with contextlib.suppress(ImportError, OSError):
        import resource

        peak = int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
        return peak if sys.platform == "darwin" else peak * 1024  # bytes there, KiB on Linux
    return memory_in_use(device)


def memory_available(device: torch.device) -> int | None:
    if device.type == "cuda":
        free, _total = torch.cuda.mem_get_info(device)
        return int(free)
    with contextlib.suppress(OSError, ValueError):
        for line in open("/proc/meminfo"):  # noqa: SIM115
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return None


def in_process_command(
    runtime: str, dtype: str, batch_size: int | None, **over: Any
) -> dict[str, Any]:
    """A `prepare` command with the default tolerances and a short warm-up, for callers that
    drive a Side in their own process (tests, benchmarks); `over` replaces any key."""
    from bench_runner.plan import ConfigSpec, build_command, warm_command
    from bench_runner.tolerances import DEFAULT_TOLERANCES

    spec = ConfigSpec(runtime, dtype, batch_size)
    built = build_command(spec, DEFAULT_TOLERANCES[dtype], check=True)
    warm = warm_command(
        spec.id, warmup=1, warmup_budget_ns=2e7, target_sample_ns=1e5, max_sample_ns=1e6
    )
    return {**built, **warm, "op": "prepare", **over}


@dataclass
class Ready:
    prepared: Prepared
    example_inputs: list[Any]
    dtype: str
    call: Any = None  # bound after the checks: a runtime may keep one binding (TensorRT)
    timer: Timer | None = None
    loops: int = 1
    per_call_ns: float = 0.0  # the warm-up's estimate: sizes the profile (profiling.py)


@dataclass
class Side:
    path: str
    device: torch.device
    threads: int
    seed: int
    workload: PythonWorkload | OnnxWorkload | None = None
    load_error: ConfigFailure | None = None
    ready: dict[str, Ready] = field(default_factory=dict)
    timer_cache: dict[str, Any] = field(default_factory=dict)
    armed: bool = False
    references: ReferenceStore | None = None
    _telemetry: GpuTelemetry | None = None

    def load(self) -> None:
        try:
            self.workload = load_workload(self.path)
        except ConfigFailure as e:
            self.load_error = e

    @property
    def telemetry(self) -> GpuTelemetry:
        if self._telemetry is None:
            if self.device.type != "cuda":
                self._telemetry = GpuTelemetry(reason="the run is on the CPU")
            else:
                props = torch.cuda.get_device_properties(self.device)
                uuid = str(getattr(props, "uuid", "") or "") or None
                self._telemetry = open_telemetry(uuid, self.device.index or 0)
        return self._telemetry

    def _reference_store(self) -> ReferenceStore:
        if self.references is None:
            budget = REFERENCE_BUDGET_CPU
            if self.device.type == "cuda":
                total = torch.cuda.get_device_properties(self.device).total_memory
                budget = int(REFERENCE_BUDGET_GPU_FRACTION * total)
            self.references = ReferenceStore(budget)
        return self.references

    def _failed(self, result: dict[str, Any], e: BaseException) -> None:
        if isinstance(e, ConfigFailure):
            result.update(status=e.status, reason=e.reason)
            result["details"].update(e.details)
            return
        text = f"{type(e).__name__}: {e}"
        status = "unsupported" if any(h in text for h in _UNSUPPORTED_HINTS) else "error"
        result.update(status=status, reason=text.splitlines()[0][:2000] if text else "error")
        if status == "error":
            result["details"]["traceback"] = traceback.format_exc()[-8000:]

    def _guarded(self, cmd: dict[str, Any], step: Any, wall_key: str) -> dict[str, Any]:
        """Run one step for a configuration; any failure becomes its status, never a crash."""
        t0 = time.perf_counter_ns()
        result: dict[str, Any] = {"id": cmd["id"], "status": "ok", "details": {}, "build": {}}
        try:
            step(cmd, result)
        except Exception as e:  # noqa: BLE001 - a runtime or workload bug must not end the run
            self._failed(result, e)
        result["details"][wall_key] = time.perf_counter_ns() - t0
        return result

    def build(self, cmd: dict[str, Any]) -> dict[str, Any]:
        """Build one configuration (and, when asked, check it): no timing."""
        self.armed = False
        return self._guarded(cmd, self._build, "prepare_wall_ns")

    def warm(self, cmd: dict[str, Any]) -> dict[str, Any]:
        """The hidden-work check, the signs of a shared GPU and the warm-up of a built config."""
        return self._guarded(cmd, self._warm, "warmup_wall_ns")

    def prepare(self, cmd: dict[str, Any]) -> dict[str, Any]:
        """build then warm, as one answer (in-process callers: tests, benchmarks)."""
        built = self.build(cmd)
        if built["status"] != "ok":
            return built
        warmed = self.warm(cmd)
        warmed["details"] = {**built["details"], **warmed["details"]}
        return {**built, **warmed, "build": built["build"], "correctness": built.get("correctness")}

    def _build(self, cmd: dict[str, Any], result: dict[str, Any]) -> None:
        if self.load_error is not None:
            raise self.load_error
        assert self.workload is not None
        if cmd["runtime"] != "pytorch_eager":
            result["details"]["compiler_import_wait_ns"] = compiler_preload.wait()
        runtime = get_runtime(cmd["runtime"])
        why = runtime.unavailable()
        if why:
            raise Unsupported(f"unavailable: {why}")
        dtype, batch_size = cmd["dtype"], cmd["batch_size"]
        if uses_tf32(dtype) and self.device.type != "cuda":
            raise Unsupported(
                "tf32 is TensorFloat-32, a matrix-math mode of NVIDIA GPUs; on the CPU use float32"
            )
        set_matmul_precision(dtype)
        t_subject = time.perf_counter_ns()
        subject, cases = build_subject(
            self.workload,
            dtype=dtype,
            batch_size=batch_size,
            device=self.device,
            threads=self.threads,
            seed=self.seed,
            trials=cmd["trials"],
            store=self._reference_store() if cmd["check"] else None,
        )
        result["details"].update(subject.notes)
        result["details"]["subject_wall_ns"] = time.perf_counter_ns() - t_subject
        t_build = time.perf_counter_ns()
        prepared = runtime.prepare(subject)
        result["details"]["build_wall_ns"] = time.perf_counter_ns() - t_build
        result["build"] = prepared.build
        result["details"].update(prepared.details)
        self.ready[cmd["id"]] = Ready(prepared, subject.example_inputs, dtype)
        if cases is not None:
            self._count_work(cmd, result, subject.example_inputs)
            self._check(cmd, result, prepared, cases)
        result["memory_bytes"] = memory_in_use(self.device)
        result["peak_memory_bytes"] = peak_memory(self.device)

    def _count_work(self, cmd: dict[str, Any], result: dict[str, Any], inputs: list[Any]) -> None:
        """FLOPs and bytes, once per configuration, in the process that checks it. A failure
        costs the configuration its speed-of-light score, never its timing or verdict."""
        wl = self.workload
        python = isinstance(wl, PythonWorkload)
        t0 = time.perf_counter_ns()
        try:
            result["work"] = measure_work(
                wl.module if isinstance(wl, PythonWorkload) else None,
                wl.build_reference(self.seed) if isinstance(wl, PythonWorkload) else None,
                inputs,
                dtype=cmd["dtype"],
                torch_dtype=TORCH_DTYPES[cmd["dtype"]],
                batch_size=cmd["batch_size"],
            )
        except Exception as e:  # noqa: BLE001 - a workload's get_flops may raise anything
            what = "counting its work" if python else "counting the inputs' bytes"
            result["details"]["work_error"] = f"{what} failed: {type(e).__name__}: {e}"[:2000]
        result["details"]["work_wall_ns"] = time.perf_counter_ns() - t0

    def peaks(self, dtypes: list[str]) -> dict[str, Any]:
        """The device's peaks: the table's for a known GPU, else measured now (after timing)."""
        try:
            return peaks_for(self.device, dtypes).as_dict()
        except Exception as e:  # noqa: BLE001 - no peaks costs the scores, never the run
            return {"error": f"{type(e).__name__}: {e}"[:2000]}

    def _check(self, cmd: dict[str, Any], result: dict[str, Any], prepared: Prepared, cases: Any):
        t_check = time.perf_counter_ns()
        inputs_ns, reference_ns = cases.inputs_ns, cases.reference_ns
        try:
            report = check_correctness(
                run=prepared.run,
                cases=cases,
                expected_dtype=TORCH_DTYPES[cmd["dtype"]],
                dtype_name=cmd["dtype"],
                atol=cmd["atol"],
                rtol=cmd["rtol"],
                trials=cmd["trials"],
                fill=prepared.deterministic_fill,
            )
        finally:
            result["details"]["check_wall_ns"] = time.perf_counter_ns() - t_check
            # Of which: drawing the inputs and the float64 references (0 where reused).
            result["details"]["check_inputs_wall_ns"] = cases.inputs_ns - inputs_ns
            result["details"]["check_reference_wall_ns"] = cases.reference_ns - reference_ns
            self._reference_store().trim()
        result["correctness"] = report.as_dict()
        result["details"]["correctness_notes"] = report.notes
        if not report.passed:
            self.ready.pop(cmd["id"], None)
            raise _diverged(report.failures)

    def _warm(self, cmd: dict[str, Any], result: dict[str, Any]) -> None:
        ready = self.ready[cmd["id"]]
        set_matmul_precision(ready.dtype)
        ready.call = ready.prepared.bind(ready.example_inputs)
        timer = make_timer(
            ready.prepared.timer,
            self.device,
            self.timer_cache,
            self.telemetry,
            cmd.get("gpu_timer", "events"),
        )
        try:
            stream = timer.check(ready.call)
        except ConfigFailure:
            self.ready.pop(cmd["id"], None)
            raise
        if self.device.type == "cuda":
            result["contention"] = self._contention(timer, stream).as_message()
            result["details"].update(self.telemetry.describe())
        warm = warm_up(
            timer,
            ready.call,
            min_iterations=cmd["warmup"],
            budget_ns=cmd["warmup_budget_ns"],
            target_sample_ns=cmd["target_sample_ns"],
            max_sample_ns=cmd["max_sample_ns"],
        )
        ready.timer, ready.loops, ready.per_call_ns = timer, warm.loops, warm.per_call_ns
        result["details"].update(
            {
                "timing_method": timer.method,
                "loops_per_sample": warm.loops,
                "warmup_iterations": warm.iterations,
                "warmup_stable": warm.stable,
            }
        )
        result["estimate_ns"] = warm.per_call_ns * warm.loops

    def _contention(self, timer: Timer, stream: Any) -> ContentionSigns:
        spread = timer.calibration_spread() if isinstance(timer, CudaTimer) else None
        return ContentionSigns(
            gpu_pids=self.telemetry.compute_pids(),
            own_pid=os.getpid(),
            calibration_spread=spread,
            waited_for_gpu=bool(stream is not None and stream.waited_for_gpu),
            wait_ns=0.0 if stream is None else max(0.0, stream.wall_ns - stream.event_ns),
            active_pids=self.telemetry.active_pids(),
        )

    def measure(self, cid: str) -> dict[str, Any]:
        if not self.armed:
            # Once every configuration is built: from here on a recompile is an error.
            for ready in self.ready.values():
                if ready.prepared.before_timing is not None:
                    ready.prepared.before_timing()
            self.armed = True
        r = self.ready[cid]
        assert r.timer is not None, f"{cid} was measured before it was warmed up"
        set_matmul_precision(r.dtype)
        try:
            ns = r.timer.sample(r.call, r.loops)
        except Exception as e:  # noqa: BLE001 - e.g. a recompile during timing
            return {"error": f"{type(e).__name__} while timing: {str(e)[:1500]}"}
        answer: dict[str, Any] = {"ns": max(1, round(ns))}
        if getattr(r.timer, "last", None):
            answer["telemetry"] = r.timer.last  # type: ignore[union-attr]
        return answer

    def profile(self, cmd: dict[str, Any]) -> dict[str, Any]:
        """Memory and a few profiled calls of a configuration once its timing is over
        (bench_runner/profiling.py); cmd["trace"]: where to keep the Chrome trace, or None."""
        r = self.ready.get(cmd["id"])
        if r is None or r.call is None:
            return {}
        set_matmul_precision(r.dtype)
        trace = cmd.get("trace")
        own = r.prepared.own_profiler
        return profile_configuration(
            r.call,
            self.device,
            per_call_ns=r.per_call_ns,
            trace_path=None if trace is None else Path(trace),
            own_profiler=None if own is None else functools.partial(own, r.example_inputs),
        )

    def report(self, cid: str) -> dict[str, Any]:
        r = self.ready.get(cid)
        if r is None or r.timer is None:
            return {}
        rep = getattr(r.timer, "report", None)
        return rep() if rep else dict(r.timer.details)


class _Diverged(ConfigFailure):
    status = "diverged"


def _diverged(failures: list[str]) -> ConfigFailure:
    more = f"; ... and {len(failures) - 3} more" if len(failures) > 3 else ""
    return _Diverged("; ".join(failures[:3]) + more)


def _hello(side: Side, spec: dict[str, Any], env: dict[str, Any]) -> dict[str, Any]:
    hello: dict[str, Any] = {"hello": os.getpid(), "device": str(side.device), **env}
    wl = side.workload
    hello["batching"] = None if wl is None else wl.batching
    hello["memory_available_bytes"] = memory_available(side.device)
    if spec.get("environment") is not None:
        from bench_runner.environment import collect_environment

        found = collect_environment(name=spec["environment"].get("name"), threads=side.threads)
        hello["environment"] = found.model_dump(mode="json")
    return hello


def worker_main(conn: Any, spec: dict[str, Any]) -> None:
    """Entry point of a worker process (multiprocessing 'forkserver' or 'spawn')."""
    try:
        device = resolve_device(spec["device"])
    except ValueError as e:
        conn.send({"hello": os.getpid(), "device_error": str(e)})
        return
    t0 = time.perf_counter()
    env = configure_process(spec["threads"], device, spec.get("cpus"))
    side = Side(path=spec["path"], device=device, threads=spec["threads"], seed=spec["seed"])
    side.load()
    t_loaded = time.perf_counter()
    hello = _hello(side, spec, env)
    # Where a worker's start goes (the progress output's last lines sum it up): importing torch
    # and the harness, loading the workload, and the rest (the first CUDA call, the machine's
    # description in the first worker).
    hello["startup_s"] = {
        "import": spec.get("import_s"),
        "workload": t_loaded - t0,
        "device": time.perf_counter() - t_loaded,
    }
    conn.send(hello)
    compiler_preload.start(spec.get("preload") or [])
    handlers = {"build": side.build, "warm": side.warm, "prepare": side.prepare}
    while True:
        try:
            cmd = conn.recv()
        except EOFError:
            return
        op = cmd["op"]
        if op in handlers:
            conn.send(handlers[op](cmd))
        elif op == "measure":
            conn.send(side.measure(cmd["id"]))
        elif op == "profile":
            conn.send(side.profile(cmd))
        elif op == "report":
            conn.send(side.report(cmd["id"]))
        elif op == "peaks":
            conn.send(side.peaks(cmd["dtypes"]))
        elif op == "close":
            conn.send({"bye": True})
            return
