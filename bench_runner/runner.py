"""The orchestrator: plans configurations, drives worker processes, interleaves rounds, and
assembles the results document. It never imports a workload itself."""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import multiprocessing
import os
import random
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from bench_runner.environment import collect_environment
from bench_runner.gitinfo import local_git, local_repository
from bench_runner.progress import Progress
from bench_runner.tolerances import tolerance_for
from rnx.config import Benchmark, HarnessSettings
from rnx.errors import UserError
from rnx.schema import (
    MAX_CONFIGURATIONS,
    BuildTime,
    Configuration,
    Correctness,
    Environment,
    GitRef,
    ResultsDocument,
    Samples,
    Settings,
    Tool,
    Workload,
    config_id,
)

CORRECTNESS_TRIALS = 3
PREPARE_TIMEOUT_S = 900.0
START_TIMEOUT_S = 300.0


@dataclass(frozen=True)
class ConfigSpec:
    runtime: str
    dtype: str
    batch_size: int

    @property
    def id(self) -> str:
        return config_id(self.runtime, self.dtype, self.batch_size)


def plan_configurations(benchmark: Benchmark) -> list[ConfigSpec]:
    configs = [
        ConfigSpec(r, d, b)
        for r, d, b in itertools.product(
            benchmark.runtimes, benchmark.dtypes, benchmark.batch_sizes
        )
    ]
    if len(configs) > MAX_CONFIGURATIONS:
        raise UserError(
            f"{benchmark.workload}: {len(benchmark.runtimes)} runtimes x {len(benchmark.dtypes)} "
            f"dtypes x {len(benchmark.batch_sizes)} batch sizes = {len(configs)} configurations; "
            f"at most {MAX_CONFIGURATIONS} per run. Drop some runtimes, dtypes or batch sizes, "
            f"or split the benchmark into several entries"
        )
    return configs


def file_sha256(path: str) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def default_threads() -> int:
    """Half the usable CPUs, at most 4: on a small shared runner, intra-op threads that spin
    while a neighbour holds the other core turn a 1 ms kernel into 20 ms (seen on 2 cores)."""
    if os.environ.get("RNX_THREADS"):
        return max(1, int(os.environ["RNX_THREADS"]))
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:
        cpus = os.cpu_count() or 1
    return max(1, min(4, cpus // 2))


def cpus_for_slot(slot: int, threads: int) -> list[int]:
    """The CPUs the worker processes of one slot run on: the same ones for every side.

    A process the scheduler moves between cores, or one that lands on a busier core than its
    partner, runs at its own speed; in paired mode that offset does not cancel in the per-round
    ratios (benchmarks/paired_pinning.py measures it; docs/harness.md has the figures). Slots
    take consecutive blocks of `threads` CPUs, wrapping around. Empty where the platform cannot
    pin (macOS, Windows), or with RNX_PIN_CPUS=0 (when something else already places the
    processes): the worker then runs where the scheduler puts it."""
    if os.environ.get("RNX_PIN_CPUS", "1") == "0":
        return []
    try:
        usable = sorted(os.sched_getaffinity(0))
    except AttributeError:
        return []
    start = slot * threads
    return [usable[(start + i) % len(usable)] for i in range(min(threads, len(usable)))]


def resolve_device(device: str | None) -> str:
    import torch

    if device in (None, "auto"):
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise UserError(f"--device {device}: no CUDA device is visible; use --device cpu")
    if device != "cpu" and not device.startswith("cuda"):
        raise UserError(f"--device {device!r}: use auto, cpu or cuda[:N]")
    return device


class WorkerDied(Exception):
    pass


class WorkerHandle:
    """One worker process for one side (head or base) and its pipe."""

    def __init__(self, spec: dict[str, Any], *, wait: bool = True):
        ctx = multiprocessing.get_context("spawn")
        self.conn, child = ctx.Pipe()
        from bench_runner.worker import worker_main

        self.process = ctx.Process(target=worker_main, args=(child, spec), daemon=True)
        self.process.start()
        child.close()
        self.hello: dict[str, Any] = {}
        if wait:
            self.wait_started()

    def wait_started(self) -> None:
        """The worker has imported torch and the workload and waits for commands."""
        self.hello = self._recv(START_TIMEOUT_S, "starting")

    def _recv(self, timeout: float, doing: str) -> dict[str, Any]:
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

    def call(self, cmd: dict[str, Any], *, timeout: float, doing: str) -> dict[str, Any]:
        try:
            self.conn.send(cmd)
        except (BrokenPipeError, OSError):
            self.process.join(5)
            raise WorkerDied(
                f"the worker process died before {doing} (exit code {self.process.exitcode})"
            ) from None
        return self._recv(timeout, doing)

    def close(self) -> None:
        if self.process.is_alive():
            with contextlib.suppress(WorkerDied):
                self.call({"op": "close"}, timeout=30, doing="closing")
        self.process.join(10)
        self.kill()
        self.conn.close()

    def kill(self) -> None:
        if self.process.is_alive():
            self.process.kill()
            self.process.join(5)


@dataclass
class ConfigState:
    spec: ConfigSpec
    status: str = "ok"
    reason: str | None = None
    correctness: dict[str, Any] | None = None
    build: dict[str, int] = field(default_factory=dict)
    details: dict[str, Any] = field(default_factory=dict)
    ns: list[int] = field(default_factory=list)
    rounds: list[int] = field(default_factory=list)
    processes: list[int] = field(default_factory=list)
    estimate_ns: float = 0.0
    timing_wall_ns: int = 0

    def fail(self, status: str, reason: str) -> None:
        self.status, self.reason = status, reason


@dataclass
class Plan:
    configs: list[ConfigSpec]
    sides: dict[str, str]  # side -> workload path
    samples: int
    processes: int
    harness: HarnessSettings
    benchmark: Benchmark
    device: str
    threads: int

    def slot_rounds(self, slot: int) -> range:
        """Contiguous blocks of rounds per worker process, as even as possible."""
        lo = slot * self.samples // self.processes
        hi = (slot + 1) * self.samples // self.processes
        return range(lo, hi)


class Orchestrator:
    def __init__(self, plan: Plan, progress: Progress):
        self.plan = plan
        self.progress = progress
        self.rng = random.Random(plan.harness.seed)
        self.states = {side: {c.id: ConfigState(c) for c in plan.configs} for side in plan.sides}
        n_units = len(plan.configs) * len(plan.sides)
        budget_ns = plan.harness.time_budget_s * 1e9
        self.warmup_budget_ns = min(max(0.15 * budget_ns / n_units, 5e7), 5e9)
        self.max_sample_ns = max(0.6 * budget_ns / (plan.samples * n_units), 1e5)
        self.target_sample_ns = min(1e6 if plan.device == "cpu" else 2e5, self.max_sample_ns)

    def _spec(self, side: str, slot: int) -> dict[str, Any]:
        p = self.plan
        return {
            "path": p.sides[side],
            "device": p.device,
            "threads": p.threads,
            "seed": p.harness.seed,
            "cpus": cpus_for_slot(slot, p.threads),
        }

    def _prepare_cmd(self, c: ConfigSpec, check: bool) -> dict[str, Any]:
        tol = tolerance_for(self.plan.benchmark, c.dtype)
        return {
            "op": "prepare",
            "id": c.id,
            "runtime": c.runtime,
            "dtype": c.dtype,
            "batch_size": c.batch_size,
            "check": check,
            "atol": tol.atol,
            "rtol": tol.rtol,
            "trials": CORRECTNESS_TRIALS,
            "warmup": self.plan.harness.warmup,
            "warmup_budget_ns": self.warmup_budget_ns,
            "target_sample_ns": self.target_sample_ns,
            "max_sample_ns": self.max_sample_ns,
        }

    def _start(self, side: str, slot: int) -> WorkerHandle | None:
        try:
            return WorkerHandle(self._spec(side, slot))
        except WorkerDied as e:
            self._start_failed(side, slot, str(e))
            return None

    def _prepare_all(
        self, side: str, slot: int, worker: WorkerHandle | None
    ) -> WorkerHandle | None:
        """Build (and in the first process, check) every configuration still ok on this side."""
        for c in self.plan.configs:
            st = self.states[side][c.id]
            if st.status != "ok":
                if slot == 0:
                    self.progress.prepared(c.id, side, slot, st.status)
                else:
                    self.progress.skipped()
                continue
            if worker is None:
                worker = self._start(side, slot)
                if worker is None:
                    return None
            try:
                res = worker.call(
                    self._prepare_cmd(c, check=(slot == 0)),
                    timeout=PREPARE_TIMEOUT_S,
                    doing=f"preparing {c.id}",
                )
            except WorkerDied as e:
                st.fail("error", str(e))
                worker = None
                self.progress.prepared(c.id, side, slot, st.status, st.reason)
                continue
            self._absorb(st, res, slot)
            self.progress.prepared(c.id, side, slot, st.status, st.reason)
        return worker

    def _absorb(self, st: ConfigState, res: dict[str, Any], slot: int) -> None:
        details = res.get("details", {})
        if slot == 0:
            st.correctness = res.get("correctness")
            st.build = {k: int(v) for k, v in res.get("build", {}).items() if v is not None}
            st.details.update(details)
        else:
            st.details.setdefault("build_wall_ns_per_process", []).append(
                details.get("build_wall_ns")
            )
            st.details["warmup_wall_ns"] = st.details.get("warmup_wall_ns", 0) + details.get(
                "warmup_wall_ns", 0
            )
        st.estimate_ns = float(res.get("estimate_ns", st.estimate_ns or 0.0))
        if res["status"] != "ok":
            prefix = "" if slot == 0 else f"process {slot}: "
            st.fail(res["status"], prefix + str(res.get("reason") or res["status"]))
            if slot != 0:
                st.status = "error"  # it passed in process 0: a later failure is not "unsupported"
            if "traceback" in details:
                st.details["traceback"] = details["traceback"]

    def _spawn_all(self) -> dict[tuple[int, str], WorkerHandle | None]:
        """Start every worker process up front, in parallel, and wait until all are idle.

        Interpreter start and imports dominate a short run's wall time; done together they cost
        about one start instead of one per process. Nothing is timed until every worker waits
        idle on its pipe, so a starting process never competes with a measurement.
        """
        started: dict[tuple[int, str], WorkerHandle | None] = {}
        for slot in range(self.plan.processes):
            for side in self.plan.sides:
                try:
                    started[(slot, side)] = WorkerHandle(self._spec(side, slot), wait=False)
                except OSError as e:
                    self._start_failed(side, slot, f"cannot start a worker process: {e}")
                    started[(slot, side)] = None
        for (slot, side), handle in started.items():
            if handle is None:
                continue
            try:
                handle.wait_started()
            except WorkerDied as e:
                self._start_failed(side, slot, str(e))
                started[(slot, side)] = None
        return started

    def _start_failed(self, side: str, slot: int, why: str) -> None:
        for st in self.states[side].values():
            if st.status == "ok":
                st.fail("error", f"process {slot}: {why}")

    def run(self) -> None:
        p = self.plan
        started = self._spawn_all()
        for slot in range(p.processes):
            workers: dict[str, WorkerHandle | None] = {}
            for side in p.sides:
                workers[side] = self._prepare_all(side, slot, started[(slot, side)])
            self._rounds(slot, workers)
            for side, w in workers.items():
                if w is None:
                    continue
                if slot == 0:
                    self._collect_reports(side, w)
                w.close()

    def _collect_reports(self, side: str, worker: WorkerHandle) -> None:
        for st in self.states[side].values():
            if st.status != "ok":
                continue
            try:
                st.details.update(
                    worker.call({"op": "report", "id": st.spec.id}, timeout=60, doing="reporting")
                )
            except WorkerDied:
                return

    def _rounds(self, slot: int, workers: dict[str, WorkerHandle | None]) -> None:
        self.progress.round_guess = sum(
            st.estimate_ns / 1e9 + 1e-3
            for side in self.plan.sides
            for st in self.states[side].values()
            if st.status == "ok"
        )
        active = [
            (side, cid)
            for side in self.plan.sides
            for cid, st in self.states[side].items()
            if st.status == "ok" and workers.get(side) is not None
        ]
        if not active:
            return
        for r in self.plan.slot_rounds(slot):
            order = list(active)
            self.rng.shuffle(order)
            for side, cid in order:
                st = self.states[side][cid]
                worker = workers[side]
                if st.status != "ok" or worker is None:
                    continue
                timeout = max(120.0, 50 * st.estimate_ns / 1e9)
                t0 = time.perf_counter_ns()
                try:
                    res = worker.call(
                        {"op": "measure", "id": cid}, timeout=timeout, doing=f"timing {cid}"
                    )
                except WorkerDied as e:
                    st.fail("error", f"process {slot}: {e}")
                    workers[side] = None
                    self._abandon(side, slot, str(e))
                    continue
                st.timing_wall_ns += time.perf_counter_ns() - t0
                if "error" in res:
                    st.fail("error", f"process {slot}, round {r}: {res['error']}")
                    continue
                st.ns.append(int(res["ns"]))
                st.rounds.append(r)
                st.processes.append(slot)
            self.progress.round_done(r, self.plan.samples, slot, self.plan.processes, len(order))

    def _abandon(self, side: str, slot: int, why: str) -> None:
        """A worker died mid-round: its other configurations lose this process's samples only."""
        for st in self.states[side].values():
            if st.status == "ok":
                st.details.setdefault("lost_processes", []).append({"process": slot, "why": why})


def _samples(st: ConfigState) -> Samples | None:
    if not st.ns:
        return None
    return Samples(ns=st.ns, round=st.rounds, process=st.processes)


def _configuration(head: ConfigState, base: ConfigState | None) -> Configuration:
    status, reason = head.status, head.reason
    samples = _samples(head) if status == "ok" else None
    if status == "ok" and samples is None:
        status, reason = "error", "no samples were measured (every worker process failed)"
    details = dict(head.details)
    details["timing_wall_ns"] = head.timing_wall_ns
    base_samples = None
    if base is not None:
        details["base_status"] = base.status
        if base.status != "ok":
            details["base_reason"] = base.reason
        else:
            base_samples = _samples(base)
        if base.correctness is not None:
            details["base_correctness"] = base.correctness
    correctness = Correctness(**head.correctness) if head.correctness else None
    return Configuration(
        runtime=head.spec.runtime,
        dtype=head.spec.dtype,
        batch_size=head.spec.batch_size,
        status=status,
        reason=reason,
        correctness=correctness,
        build=BuildTime(**head.build),
        samples=samples,
        base_samples=base_samples,
        details=_jsonable(details),
    )


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, float) and value != value:
        return None
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return str(value)


def run_benchmark(
    benchmark: Benchmark,
    harness: HarnessSettings,
    *,
    repository: str | None = None,
    git: GitRef | None = None,
    base_workload: str | None = None,
    environment_name: str | None = None,
    progress: TextIO | None = sys.stderr,
    device: str | None = None,
    environment: Environment | None = None,
    threads: int | None = None,
) -> ResultsDocument:
    """Correctness, then interleaved timing, of every configuration of one workload.

    base_workload given: paired mode (base and head alternate in random order in every round).
    """
    configs = plan_configurations(benchmark)
    sides = {"head": benchmark.workload}
    if base_workload is not None:
        sides["base"] = base_workload
    for path in sides.values():
        if not Path(path).is_file():
            raise UserError(
                f"workload {path} does not exist (give the path of a .py or .onnx file)"
            )
    resolved = resolve_device(device)
    threads = threads or default_threads()
    processes = min(harness.processes, harness.samples)
    plan = Plan(
        configs=configs,
        sides=sides,
        samples=harness.samples,
        processes=processes,
        harness=harness,
        benchmark=benchmark,
        device=resolved,
        threads=threads,
    )
    tracker = Progress(
        progress, n_configs=len(configs) * len(sides) * processes, n_samples=harness.samples
    )
    env = environment or collect_environment(name=environment_name, threads=threads)
    if resolved != "cpu" and "device" not in env.software:
        env = env.model_copy(update={"software": {**env.software, "device": resolved}})
    orchestrator = Orchestrator(plan, tracker)
    orchestrator.run()
    head = orchestrator.states["head"]
    base = orchestrator.states.get("base")
    configurations = [_configuration(head[c.id], base[c.id] if base else None) for c in configs]
    workload_dir = str(Path(benchmark.workload).resolve().parent)
    doc = ResultsDocument(
        run_id=uuid.uuid4(),
        repository=repository or local_repository(workload_dir),
        git=git or local_git(workload_dir),
        environment=env,
        workload=Workload(
            path=benchmark.workload,
            sha256=file_sha256(benchmark.workload),
            base_path=base_workload,
            base_sha256=file_sha256(base_workload) if base_workload else None,
        ),
        settings=Settings(
            samples=harness.samples,
            warmup=harness.warmup,
            rounds=harness.samples,
            processes=processes,
            mode="paired" if base_workload else "single",
            seed=harness.seed,
            time_budget_s=harness.time_budget_s,
        ),
        configurations=configurations,
        tool=Tool(version=_version()),
    )
    tracker.finish()
    return doc


def _version() -> str:
    try:
        from rnx import __version__

        return str(__version__)
    except ImportError:
        return "0"
