"""The worker process: loads one side's workload, builds, checks, warms up and times on command.

The orchestrator (runner.py) sends small dict commands over a pipe; only one worker measures at
a time. A workload that crashes this process costs its configurations, never the harness.
"""

from __future__ import annotations

import contextlib
import copy
import logging
import os
import time
import traceback
import warnings
from dataclasses import dataclass, field
from typing import Any

import torch

from bench_runner.correctness import check_correctness
from bench_runner.errors import ConfigFailure, Unsupported
from bench_runner.runtimes import Prepared, Subject, get_runtime
from bench_runner.timing import Timer, make_timer, warm_up
from bench_runner.workload import (
    TORCH_DTYPES,
    OnnxWorkload,
    PythonWorkload,
    as_tensor_list,
    load_workload,
    round_to,
)

# Messages of torch and ONNX Runtime that mean "this op has no kernel for this dtype/device".
_UNSUPPORTED_HINTS = ("not implemented for", "NOT_IMPLEMENTED", "Could not find an implementation")


def configure_process(
    threads: int, device: torch.device, cpus: list[int] | None = None
) -> dict[str, Any]:
    """Fixed thread counts, fixed CPUs and no TF32: what the numbers and tolerances assume."""
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


@dataclass
class Ready:
    prepared: Prepared
    call: Any
    timer: Timer
    loops: int


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

    def load(self) -> None:
        try:
            self.workload = load_workload(self.path)
        except ConfigFailure as e:
            self.load_error = e

    def _reference_and_subject(self, dtype: str, batch_size: int) -> tuple[Any, Any, Subject]:
        wl = self.workload
        assert wl is not None
        tdtype = TORCH_DTYPES[dtype]
        device = self.device

        def make_inputs(seed: int) -> list[Any]:
            raw = wl.inputs(batch_size, seed)
            return [
                round_to(x, tdtype).to(device) if isinstance(x, torch.Tensor) else x for x in raw
            ]

        example = make_inputs(self.seed)
        if isinstance(wl, PythonWorkload):
            ref_model, cand_model, how = wl.build(self.seed)
            candidate = copy.deepcopy(cand_model).to(device=device, dtype=tdtype)
            # Same dtype-rounded weights as the candidate, computed in float64.
            ref64 = copy.deepcopy(ref_model).to(dtype=tdtype).to(device=device, dtype=torch.float64)

            def reference(inputs: list[Any]) -> list[torch.Tensor]:
                up = [x.to(torch.float64) if _is_float(x) else x for x in inputs]
                return as_tensor_list(ref64(*up))

            subject = Subject(
                workload=wl,
                dtype=dtype,
                torch_dtype=tdtype,
                device=device,
                batch_size=batch_size,
                threads=self.threads,
                example_inputs=example,
                module=candidate,
            )
            subject_notes = {"weights": how}
        else:
            from onnx.reference import ReferenceEvaluator

            from bench_runner.runtimes.onnx_export import retype

            evaluator = ReferenceEvaluator(retype(wl.model, tdtype, torch.float64))
            names = [n for n, _, _ in wl.input_specs(batch_size)]

            def reference(inputs: list[Any]) -> list[torch.Tensor]:
                feeds = {
                    n: (x.to(torch.float64) if _is_float(x) else x).cpu().numpy()
                    for n, x in zip(names, inputs, strict=True)
                }
                return [torch.from_numpy(o).to(device) for o in evaluator.run(None, feeds)]

            subject = Subject(
                workload=wl,
                dtype=dtype,
                torch_dtype=tdtype,
                device=device,
                batch_size=batch_size,
                threads=self.threads,
                example_inputs=example,
                onnx_model=retype(wl.model, tdtype, tdtype),
            )
            subject_notes = {}
        subject.notes.update(subject_notes)
        return reference, make_inputs, subject

    def prepare(self, cmd: dict[str, Any]) -> dict[str, Any]:
        cid = cmd["id"]
        self.armed = False
        t0 = time.perf_counter_ns()
        result: dict[str, Any] = {"id": cid, "status": "ok", "details": {}, "build": {}}
        try:
            self._prepare(cmd, result)
        except ConfigFailure as e:
            result.update(status=e.status, reason=e.reason)
            result["details"].update(e.details)
        except Exception as e:  # noqa: BLE001 - a runtime or workload bug must not end the run
            text = f"{type(e).__name__}: {e}"
            status = "unsupported" if any(h in text for h in _UNSUPPORTED_HINTS) else "error"
            result.update(status=status, reason=text.splitlines()[0][:2000] if text else "error")
            if status == "error":
                result["details"]["traceback"] = traceback.format_exc()[-8000:]
        result["details"]["prepare_wall_ns"] = time.perf_counter_ns() - t0
        return result

    def _prepare(self, cmd: dict[str, Any], result: dict[str, Any]) -> None:
        if self.load_error is not None:
            raise self.load_error
        runtime = get_runtime(cmd["runtime"])
        why = runtime.unavailable()
        if why:
            raise Unsupported(f"unavailable: {why}")
        dtype, batch_size = cmd["dtype"], cmd["batch_size"]
        reference, make_inputs, subject = self._reference_and_subject(dtype, batch_size)
        result["details"].update(subject.notes)
        t_build = time.perf_counter_ns()
        prepared = runtime.prepare(subject)
        result["details"]["build_wall_ns"] = time.perf_counter_ns() - t_build
        result["build"] = prepared.build
        result["details"].update(prepared.details)
        if cmd["check"]:
            t_check = time.perf_counter_ns()
            try:
                report = check_correctness(
                    run=prepared.run,
                    reference=reference,
                    make_inputs=make_inputs,
                    expected_dtype=subject.torch_dtype,
                    atol=cmd["atol"],
                    rtol=cmd["rtol"],
                    trials=cmd["trials"],
                    seed=self.seed,
                )
            finally:
                result["details"]["check_wall_ns"] = time.perf_counter_ns() - t_check
            result["correctness"] = report.as_dict()
            if not report.passed:
                raise _diverged(report.failures)
        t_warm = time.perf_counter_ns()
        call = prepared.bind(subject.example_inputs)
        timer = make_timer(prepared.timer, self.device, self.timer_cache)
        timer.check(call)
        warm = warm_up(
            timer,
            call,
            min_iterations=cmd["warmup"],
            budget_ns=cmd["warmup_budget_ns"],
            target_sample_ns=cmd["target_sample_ns"],
            max_sample_ns=cmd["max_sample_ns"],
        )
        result["details"].update(
            {
                "timing_method": timer.method,
                "loops_per_sample": warm.loops,
                "warmup_iterations": warm.iterations,
                "warmup_stable": warm.stable,
                "warmup_wall_ns": time.perf_counter_ns() - t_warm,
            }
        )
        result["estimate_ns"] = warm.per_call_ns * warm.loops
        self.ready[cmd["id"]] = Ready(prepared=prepared, call=call, timer=timer, loops=warm.loops)

    def measure(self, cid: str) -> dict[str, Any]:
        if not self.armed:
            # Once every configuration is built: from here on a recompile is an error.
            for ready in self.ready.values():
                if ready.prepared.before_timing is not None:
                    ready.prepared.before_timing()
            self.armed = True
        r = self.ready[cid]
        try:
            ns = r.timer.sample(r.call, r.loops)
        except Exception as e:  # noqa: BLE001 - e.g. a recompile during timing
            return {"error": f"{type(e).__name__} while timing: {str(e)[:1500]}"}
        return {"ns": max(1, round(ns))}

    def report(self, cid: str) -> dict[str, Any]:
        r = self.ready.get(cid)
        if r is None:
            return {}
        rep = getattr(r.timer, "report", None)
        return rep() if rep else dict(r.timer.details)


class _Diverged(ConfigFailure):
    status = "diverged"


def _diverged(failures: list[str]) -> ConfigFailure:
    more = f"; ... and {len(failures) - 3} more" if len(failures) > 3 else ""
    return _Diverged("; ".join(failures[:3]) + more)


def _is_float(x: Any) -> bool:
    return isinstance(x, torch.Tensor) and x.is_floating_point()


def worker_main(conn: Any, spec: dict[str, Any]) -> None:
    """Entry point of a worker process (multiprocessing 'spawn')."""
    device = torch.device(spec["device"])
    env = configure_process(spec["threads"], device, spec.get("cpus"))
    side = Side(path=spec["path"], device=device, threads=spec["threads"], seed=spec["seed"])
    side.load()
    conn.send({"hello": os.getpid(), **env})
    while True:
        try:
            cmd = conn.recv()
        except EOFError:
            return
        op = cmd["op"]
        if op == "prepare":
            conn.send(side.prepare(cmd))
        elif op == "measure":
            conn.send(side.measure(cmd["id"]))
        elif op == "report":
            conn.send(side.report(cmd["id"]))
        elif op == "close":
            conn.send({"bye": True})
            return
