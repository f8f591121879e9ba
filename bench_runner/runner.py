"""run_benchmark: one workload's configurations, checked then timed, as a results document.

The pieces: plan.py (what is measured), worker_pool.py (the processes), orchestrator.py (the order
of a run), worker_process.py (inside a process), results.py (the document's configurations).
"""

from __future__ import annotations

import dataclasses
import hashlib
import sys
import time
import uuid
from pathlib import Path
from typing import Any, TextIO

from bench_runner.adaptive import AdaptiveSampling, Baseline, Decider, sample_until_decided
from bench_runner.environment import collect_environment
from bench_runner.gitinfo import local_git, local_repository
from bench_runner.lfs_pointer import refuse_pointer
from bench_runner.orchestrator import Orchestrator, WorkerPool
from bench_runner.placement import cpus_for_slot, default_threads
from bench_runner.plan import Plan, plan_configurations
from bench_runner.progress import Progress
from bench_runner.results import configuration
from bench_runner.worker_pool import compiler_modules, context, start_method
from rnx.config import Benchmark, HarnessSettings
from rnx.errors import UserError
from rnx.schema import Environment, GateReport, GitRef, ResultsDocument, Settings, Tool, Workload

# Where kept traces go when the caller names no folder; `rnx bench` names one beside --out.
TRACE_DIR = "rnx-traces"


def file_sha256(path: str) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _check_device_text(device: str) -> str:
    if device != "auto" and device != "cpu" and not device.startswith("cuda"):
        raise UserError(f"--device {device!r}: use auto, cpu or cuda[:N]")
    return device


def _spec_maker(plan: Plan, environment_name: str | None, collect: bool) -> Any:
    def spec(side: str, slot: int) -> dict[str, Any]:
        first = slot == 0 and side == "head"
        return {
            "path": plan.sides[side],
            "device": plan.device,
            "threads": plan.threads,
            "seed": plan.harness.seed,
            "cpus": cpus_for_slot(slot, plan.threads, pin=plan.harness.pin_cpus),
            # Imported in the background by a spawned worker (a forked one has them already).
            "preload": compiler_modules(plan.benchmark.runtimes),
            # The first worker has torch imported anyway: it describes the machine, so this
            # process need not import torch at all.
            "environment": {"name": environment_name} if first and collect else None,
        }

    return spec


def _started(pool: WorkerPool, plan: Plan) -> Plan:
    """The plan once the workers are up: the device they resolved, and the workload's own
    shapes when it has no batch dimension and no batch sizes were given."""
    hellos = [pool.hello(key) for key in pool.handles]
    errors = [h["device_error"] for h in hellos if "device_error" in h]
    if errors:
        pool.close_all()
        raise UserError(errors[0])
    head = pool.hello((0, "head"))
    if head.get("device") and plan.device == "auto":
        plan = dataclasses.replace(plan, device=head["device"])
    if head.get("batching") == "none" and not plan.benchmark.batch_sizes_given:
        plan = plan.at_native_shapes()
    return plan


def _environment(pool: WorkerPool, name: str | None, threads: int, device: str) -> Environment:
    found = pool.hello((0, "head")).get("environment")
    env = (
        Environment.model_validate(found)
        if found
        else collect_environment(name=name, threads=threads)
    )
    if device != "cpu" and "device" not in env.software:
        env = env.model_copy(update={"software": {**env.software, "device": device}})
    return env


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
    adaptive: AdaptiveSampling | None = None,
    trace_dir: str | Path | None = None,
) -> ResultsDocument:
    """Correctness, then interleaved timing, of every configuration of one workload.

    base_workload given: paired mode (base and head alternate in random order in every round).
    adaptive given: after the fixed processes, fresh ones for configurations not yet decided
    (bench_runner/adaptive.py). trace_dir: where harness.keep-traces puts the profiles'
    Chrome traces (default: TRACE_DIR in the working directory).
    """
    started = time.monotonic()
    configs = plan_configurations(benchmark)  # refuses too many before anything starts
    sides = {"head": benchmark.workload}
    if base_workload is not None:
        sides["base"] = base_workload
    for path in sides.values():
        if not Path(path).is_file():
            raise UserError(
                f"workload {path} does not exist (give the path of a .py or .onnx file)"
            )
        refuse_pointer(Path(path))
    threads = threads or default_threads(harness)
    plan = Plan(
        configs=configs,
        sides=sides,
        samples=harness.samples,
        processes=min(harness.processes, harness.samples),
        harness=harness,
        benchmark=benchmark,
        device=_check_device_text(device or "auto"),
        threads=threads,
    )
    ctx = context(start_method(plan.device), benchmark.runtimes)
    pool = WorkerPool(plan, ctx, _spec_maker(plan, environment_name, environment is None))
    tracker = Progress(progress, n_configs=0, n_samples=harness.samples)
    try:
        tracker.phase("starting workers")
        pool.start_all()
        plan = _started(pool, plan)
        tracker.n_configs = len(plan.configs) * len(sides) * plan.processes
        if plan.configs[0].batch_size is None:
            tracker.note("no batch dimension and no batch sizes: the workload's own shapes")
        env = environment or _environment(pool, environment_name, threads, plan.device)
        orchestrator = Orchestrator(plan, tracker, pool)
        if harness.keep_traces and harness.profile:
            orchestrator.trace_dir = Path(trace_dir or TRACE_DIR).resolve()
        against = _adaptive_baselines(adaptive, env, base_workload, tracker)
        orchestrator.run()
        if adaptive is not None and against is not None:
            # The server's thresholds when it gave them: its verdict is the one that counts.
            gate = against.gate or adaptive.gate
            baselines = list(against.documents)
            prepared: list[Any] = []  # the baselines prepared once, on the first judgement

            def judge(doubled: bool = False) -> GateReport:
                from bench_runner.adaptive_rule import with_processes_doubled
                from rnx.verdict import PreparedBaselines, evaluate

                if not prepared:
                    prepared.append(PreparedBaselines(baselines))
                doc = _document(orchestrator, env, repository, git, base_workload)
                head = with_processes_doubled(doc) if doubled else doc
                return evaluate(head, baselines, gate, prepared=prepared[0])

            decider = Decider(judge, adaptive.budget_s, started, lambda: judge(doubled=True))
            added = sample_until_decided(orchestrator, decider)
            _record_adaptive(orchestrator, added)
    finally:
        pool.close_all()
    tracker.finish(pool.startup_summary())
    return _document(orchestrator, env, repository, git, base_workload)


def _adaptive_baselines(
    adaptive: AdaptiveSampling | None,
    env: Environment,
    base_workload: str | None,
    progress: Progress,
) -> Baseline | None:
    """Whether this run samples adaptively, and against which baseline documents; a note on
    the progress stream says why not when it cannot."""
    if adaptive is None:
        return None
    if base_workload is not None:
        return Baseline([])  # paired: the base is measured in the same processes
    if adaptive.baselines is None:
        return None
    found = adaptive.baselines(env.key)
    if isinstance(found, str):
        progress.note(f"fixed sampling: {found}")
        return None
    if not found.documents:
        progress.note("fixed sampling: no baseline yet for this workload in this environment")
        return None
    progress.note(
        f"adaptive sampling against {len(found.documents)} baseline "
        f"run{'s' if len(found.documents) != 1 else ''}, budget {adaptive.budget_s:.0f}s"
    )
    return found


def _record_adaptive(orchestrator: Orchestrator, added: dict[str, list[str]]) -> None:
    """details.adaptive per configuration that got processes beyond the fixed ones."""
    for states in orchestrator.states.by_side.values():
        for cid, why in added.items():
            if cid in states:
                states[cid].details["adaptive"] = {"added_processes": len(why), "why": why}


def _document(
    orchestrator: Orchestrator,
    env: Environment,
    repository: str | None,
    git: GitRef | None,
    base_workload: str | None,
) -> ResultsDocument:
    plan = orchestrator.plan
    head = orchestrator.states["head"]
    base = orchestrator.states.get("base")
    pids = orchestrator.pool.pids
    peaks = orchestrator.peaks
    configurations = [
        configuration(head[c.id], base[c.id] if base else None, pids, peaks) for c in plan.configs
    ]
    benchmark = plan.benchmark
    workload_dir = str(Path(benchmark.workload).resolve().parent)
    return ResultsDocument(
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
            samples=plan.harness.samples,
            warmup=plan.harness.warmup,
            rounds=plan.samples,
            processes=plan.processes,
            mode="paired" if base_workload else "single",
            seed=plan.harness.seed,
            time_budget_s=plan.harness.time_budget_s,
            gpu_timer=plan.harness.gpu_timer,
        ),
        configurations=configurations,
        tool=Tool(version=_version()),
    )


def _version() -> str:
    try:
        from rnx import __version__

        return str(__version__)
    except ImportError:
        return "0"
