"""The parent side of the worker processes (the pool): how they start, the pipe to each, and
commands to several at once."""

from __future__ import annotations

import contextlib
import importlib.util
import multiprocessing
import os
import sys
import time
from collections import deque
from collections.abc import Callable, Iterable
from multiprocessing.connection import wait
from pathlib import Path
from typing import Any

START_TIMEOUT_S = 300.0
# Imported once in the fork server and shared by every worker forked from it (CPU runs).
PRELOAD = ["bench_runner.forkserver_preload"]
# What torch.compile and the ONNX exporter import on first use: seconds per process otherwise.
PRELOAD_COMPILER = ["torch._dynamo", "torch._inductor.compile_fx"]

WorkerKey = tuple[int, str]  # (slot, side)


class WorkerDied(Exception):
    pass


def _gpu_present() -> bool:
    return Path("/dev/nvidia0").exists() or Path("/proc/driver/nvidia/gpus").exists()


def start_method(device: str) -> str:
    """forkserver for CPU runs: one interpreter imports torch and forks every worker from it,
    instead of one torch import per worker on a runner of 2 cores
    (benchmarks/harness/harness_budget.py has the wall times). spawn on a GPU machine: a process
    forked from one that ever touched the CUDA driver cannot use CUDA, and spawned workers start
    in parallel on its many cores."""
    if sys.platform != "linux" or device.startswith("cuda"):
        return "spawn"
    if device == "auto" and _gpu_present():
        return "spawn"
    return "forkserver"


def _worker_variables() -> dict[str, str]:
    """Environment variables every worker (and the fork server) starts with.

    PYTORCH_NVML_BASED_CUDA_CHECK: torch.cuda.is_available() in the fork server must ask NVML,
    never initialise the CUDA driver its forks would then be unable to use.
    TORCHINDUCTOR_COMPILE_THREADS=1 where Triton is installed (a GPU machine), unless the job
    sets it: otherwise every worker's first torch.compile starts inductor's pool of compile
    subprocesses, each importing torch on the worker's own pinned CPUs, and shuts it down when
    the worker exits; for the few kernels of a benchmark that costs seconds per process, while
    the other processes and later runs load the compiled kernels from inductor's cache."""
    found = {"PYTORCH_NVML_BASED_CUDA_CHECK": "1"}
    if "TORCHINDUCTOR_COMPILE_THREADS" not in os.environ and _has_triton():
        found["TORCHINDUCTOR_COMPILE_THREADS"] = "1"
    return found


def _has_triton() -> bool:
    try:
        return importlib.util.find_spec("triton") is not None
    except (ImportError, ValueError):
        return False


@contextlib.contextmanager
def _worker_environment() -> Any:
    """The worker's variables while it starts (it inherits them), this process's restored."""
    changes = _worker_variables()
    old = {name: os.environ.get(name) for name in changes}
    os.environ.update(changes)
    try:
        yield
    finally:
        for name, value in old.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def compiler_modules(runtimes: Iterable[str]) -> list[str]:
    """What the plan's runtimes import on first use, to import ahead (none for eager alone)."""
    compiles = any(r in ("torch_compile", "onnxruntime", "tensorrt") for r in runtimes)
    return list(PRELOAD_COMPILER) if compiles else []


def context(method: str, runtimes: Iterable[str]) -> Any:
    ctx = multiprocessing.get_context(method)
    if method == "forkserver":
        # Only the first run of a process decides: the fork server then keeps running.
        ctx.set_forkserver_preload(PRELOAD + compiler_modules(runtimes))
    return ctx


class WorkerHandle:
    """One worker process for one side (head or base) and its pipe."""

    def __init__(self, spec: dict[str, Any], *, ctx: Any = None, wait: bool = True):
        ctx = ctx or multiprocessing.get_context("spawn")
        self.conn, child = ctx.Pipe()
        from bench_runner.worker_entry import main

        self.process = ctx.Process(target=main, args=(child, spec), daemon=True)
        with _worker_environment():
            self.process.start()
        child.close()
        self.hello: dict[str, Any] = {}
        self.close_s: float | None = None
        self._closing_since = 0.0
        if wait:
            self.wait_started()

    @property
    def pid(self) -> int | None:
        return self.process.pid

    def wait_started(self) -> None:
        """The worker has imported torch and the workload and waits for commands."""
        self.hello = self.receive(START_TIMEOUT_S, "starting")

    def receive(self, timeout: float, doing: str) -> dict[str, Any]:
        try:
            ready = self.conn.poll(timeout)
            if ready:
                reply: dict[str, Any] = self.conn.recv()
                return reply
        except (EOFError, OSError):
            pass
        else:
            self.kill()
            raise WorkerDied(f"the worker process timed out after {timeout:.0f}s while {doing}")
        self.process.join(5)
        raise WorkerDied(
            f"the worker process died while {doing} (exit code {self.process.exitcode})"
        )

    def send(self, cmd: dict[str, Any], doing: str) -> None:
        try:
            self.conn.send(cmd)
        except (BrokenPipeError, OSError):
            self.process.join(5)
            raise WorkerDied(
                f"the worker process died before {doing} (exit code {self.process.exitcode})"
            ) from None

    def call(self, cmd: dict[str, Any], *, timeout: float, doing: str) -> dict[str, Any]:
        self.send(cmd, doing)
        return self.receive(timeout, doing)

    def close(self) -> None:
        self.begin_close()
        self.end_close()

    def begin_close(self) -> None:
        """Ask the worker to exit; end_close waits for it (several close at once this way)."""
        self._closing_since = time.perf_counter()
        if self.process.is_alive():
            with contextlib.suppress(WorkerDied):
                self.send({"op": "close"}, "closing")

    def end_close(self) -> None:
        if self.process.is_alive():
            with contextlib.suppress(WorkerDied):
                self.receive(30, "closing")
        self.process.join(10)
        self.kill()
        self.conn.close()
        self.close_s = time.perf_counter() - self._closing_since

    def kill(self) -> None:
        if self.process.is_alive():
            self.process.kill()
            self.process.join(5)


Answer = dict[str, Any] | WorkerDied
# react(key, command, answer) -> more commands, per worker, to queue.
React = Callable[[WorkerKey, dict[str, Any], Answer], dict[WorkerKey, list[dict[str, Any]]]]


class Dispatcher:
    """Gives each worker its commands one after another and hands every answer to `react`,
    waiting on all the workers at once, so commands to different processes overlap."""

    def __init__(self, worker: Callable[[WorkerKey], WorkerHandle | None], timeout_s: float):
        self.worker = worker
        self.timeout_s = timeout_s

    def run(self, first: dict[WorkerKey, list[dict[str, Any]]], react: React) -> None:
        queues: dict[WorkerKey, deque[dict[str, Any]]] = {k: deque(v) for k, v in first.items()}
        busy: dict[WorkerKey, tuple[dict[str, Any], float]] = {}
        self._feed(queues, busy, react)
        while busy:
            by_conn = {}
            for key in busy:
                handle = self.worker(key)
                assert handle is not None
                by_conn[handle.conn] = key
            deadline = min(d for _, d in busy.values())
            ready = wait(list(by_conn), timeout=max(0.0, deadline - time.monotonic()))
            answered = [by_conn[c] for c in ready] or [
                k for k, (_, d) in busy.items() if d <= time.monotonic()
            ]
            for key in answered:
                cmd, _ = busy.pop(key)
                more = react(key, cmd, self._answer(key, cmd, timed_out=not ready))
                for k, cmds in more.items():
                    queues.setdefault(k, deque()).extend(cmds)
            self._feed(queues, busy, react)

    def _answer(self, key: WorkerKey, cmd: dict[str, Any], *, timed_out: bool) -> Answer:
        handle = self.worker(key)
        assert handle is not None
        doing = f"{cmd['op']} of {cmd.get('id', '')}".strip()
        try:
            return handle.receive(0.0 if timed_out else 1.0, doing)
        except WorkerDied as e:
            if timed_out:
                return WorkerDied(
                    f"the worker process timed out after {self.timeout_s:.0f}s while {doing}"
                )
            return e

    def _feed(
        self,
        queues: dict[WorkerKey, deque[dict[str, Any]]],
        busy: dict[WorkerKey, tuple[dict[str, Any], float]],
        react: React,
    ) -> None:
        """Send the next command to every idle worker; a worker that cannot take it answers
        with WorkerDied at once (and `react` may queue more, e.g. for a restarted worker)."""
        progressed = True
        while progressed:
            progressed = False
            for key, queue in list(queues.items()):
                if not queue or key in busy:
                    continue
                progressed = True
                cmd = queue.popleft()
                handle = self.worker(key)
                try:
                    if handle is None:
                        raise WorkerDied("the worker process could not be started")
                    handle.send(cmd, f"{cmd['op']} of {cmd.get('id', '')}")
                except WorkerDied as e:
                    for k, cmds in react(key, cmd, e).items():
                        queues.setdefault(k, deque()).extend(cmds)
                    continue
                busy[key] = (cmd, time.monotonic() + self.timeout_s)
