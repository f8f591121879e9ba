"""The orchestrator: drives the worker processes through a run. It never imports a workload.

The order of a run:
1. every worker process starts at once (slots x sides);
2. builds (bench_runner/builds.py): each configuration is checked in one process, its
   reference group's, and built in the others once it passed, at the same time where memory
   allows (no timing runs yet);
3. per slot, one at a time: warm-up of its configurations, then its block of interleaved rounds.
Only one process warms up or measures at any moment.
"""

from __future__ import annotations

import math
import multiprocessing
import random
import re
import time
from collections.abc import Collection
from dataclasses import replace
from pathlib import Path
from typing import Any

from bench_runner.builds import Builder
from bench_runner.plan import ConfigSpec, Plan, build_command, warm_command
from bench_runner.progress import Progress
from bench_runner.state import ConfigState, RunStates
from bench_runner.tolerances import tolerance_for
from bench_runner.worker_pool import Dispatcher, WorkerDied, WorkerHandle, WorkerKey

PREPARE_TIMEOUT_S = 900.0
# A sample's wall time outside the measurement (pipe round trip), for budgeting extra rounds.
ROUND_TRIP_S = 2e-3


def _range_s(values: list[float]) -> str:
    lo, hi = min(values), max(values)
    return f"{lo:.2f}s" if round(lo, 2) == round(hi, 2) else f"{lo:.2f}-{hi:.2f}s"


def trace_file_name(side: str, config_id: str) -> str:
    """head-pytorch_eager-float32-bs8.json: a kept profile trace's name (harness.keep-traces),
    safe in any file system. Here, not in profiling.py: this process never imports torch."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", f"{side}-{config_id}") + ".json"


class WorkerPool:
    """The run's worker processes, one per (slot, side), started together."""

    def __init__(self, plan: Plan, ctx: Any, spec: Any):
        self.plan = plan
        self.ctx = ctx
        self.spec = spec  # spec(side, slot) -> the worker's start spec
        self.handles: dict[WorkerKey, WorkerHandle | None] = {}
        self.start_errors: dict[WorkerKey, str] = {}
        self.pids: set[int] = set()
        self.hellos: list[dict[str, Any]] = []  # every worker's first answer, restarts included
        self.close_s: list[float] = []

    def start_all(self) -> None:
        """Interpreter start and imports dominate a short run's wall time: all at once."""
        for slot in range(self.plan.processes):
            for side in self.plan.sides:
                try:
                    handle = self._start((slot, side))
                except OSError as e:
                    self._failed((slot, side), f"cannot start a worker process: {e}")
                    continue
                self.handles[(slot, side)] = handle
        for key, started in list(self.handles.items()):
            if started is None:
                continue
            try:
                started.wait_started()
            except WorkerDied as e:
                self._failed(key, str(e))
                continue
            self.hellos.append(started.hello)
            if started.pid is not None:
                self.pids.add(started.pid)

    def _start(self, key: WorkerKey, *, wait: bool = False) -> WorkerHandle:
        slot, side = key
        try:
            return WorkerHandle(self.spec(side, slot), ctx=self.ctx, wait=wait)
        except OSError:
            if self.ctx.get_start_method() != "forkserver":
                raise
            # No fork server here (no room for its socket, say): spawn, as on a GPU machine.
            self.ctx = multiprocessing.get_context("spawn")
            return WorkerHandle(self.spec(side, slot), ctx=self.ctx, wait=wait)

    def _failed(self, key: WorkerKey, why: str) -> None:
        self.handles[key] = None
        self.start_errors[key] = why

    def get(self, key: WorkerKey) -> WorkerHandle | None:
        return self.handles.get(key)

    def hello(self, key: WorkerKey) -> dict[str, Any]:
        handle = self.handles.get(key)
        return {} if handle is None else handle.hello

    def restart(self, key: WorkerKey) -> WorkerHandle | None:
        """A new process after one died: it will build the configurations still to come."""
        self.drop(key)
        try:
            handle = self._start(key, wait=True)
        except (OSError, WorkerDied) as e:
            self._failed(key, str(e))
            return None
        self.handles[key] = handle
        self.hellos.append(handle.hello)
        if handle.pid is not None:
            self.pids.add(handle.pid)
        return handle

    def drop(self, key: WorkerKey) -> None:
        handle = self.handles.get(key)
        if handle is not None:
            handle.kill()
        self.handles[key] = None

    def close_slot(self, slot: int) -> None:
        """The slot's workers (head and base) exit at once; this waits until they are gone."""
        closing = []
        for side in self.plan.sides:
            handle = self.handles.get((slot, side))
            if handle is not None:
                handle.begin_close()
                closing.append(handle)
            self.handles[(slot, side)] = None
        for handle in closing:
            handle.end_close()
            if handle.close_s is not None:
                self.close_s.append(handle.close_s)

    def startup_summary(self) -> str | None:
        """Where the workers' start and exit went, as ranges over the processes."""
        parts = [h.get("startup_s") or {} for h in self.hellos]
        if not parts:
            return None
        text = []
        for name in ("import", "workload", "device"):
            values = [p[name] for p in parts if isinstance(p.get(name), (int, float))]
            if values:
                text.append(f"{name} {_range_s(values)}")
        closing = f"; exit {_range_s(self.close_s)} each" if self.close_s else ""
        return f"{len(parts)} worker processes: start {', '.join(text)}{closing}"

    def close_all(self) -> None:
        # Every slot that ever had a worker: adaptive sampling adds slots beyond the plan's.
        for slot in sorted({slot for slot, _ in self.handles} | set(range(self.plan.processes))):
            self.close_slot(slot)


class Orchestrator:
    def __init__(self, plan: Plan, progress: Progress, pool: WorkerPool):
        self.plan = plan
        self.progress = progress
        self.pool = pool
        self.rng = random.Random(plan.harness.seed)
        self.states = RunStates(plan)
        self.dispatcher = Dispatcher(pool.get, PREPARE_TIMEOUT_S)
        self.peaks: dict[str, Any] | None = None  # the device's peaks, for speed of light
        # harness.keep-traces: the folder the profiles' Chrome traces go to (runner.py).
        self.trace_dir: Path | None = None
        n_units = len(plan.configs) * len(plan.sides)
        budget_ns = plan.harness.time_budget_s * 1e9
        self.warmup_budget_ns = min(max(0.15 * budget_ns / n_units, 5e7), 5e9)
        self.max_sample_ns = max(0.6 * budget_ns / (plan.samples * n_units), 1e5)
        self.target_sample_ns = min(1e6 if plan.device == "cpu" else 2e5, self.max_sample_ns)

    def build_cmd(self, c: ConfigSpec, *, check: bool) -> dict[str, Any]:
        return build_command(c, tolerance_for(self.plan.benchmark, c.dtype), check=check)

    def warm_cmd(self, c: ConfigSpec) -> dict[str, Any]:
        return warm_command(
            c.id,
            warmup=self.plan.harness.warmup,
            warmup_budget_ns=self.warmup_budget_ns,
            target_sample_ns=self.target_sample_ns,
            max_sample_ns=self.max_sample_ns,
        )

    def run(self) -> None:
        for (slot, side), why in self.pool.start_errors.items():
            self.states.fail_side(side, f"process {slot}: {why}")
        builder = Builder(self)
        self.progress.phase("building and checking")
        builder.build_all()
        for slot in range(self.plan.processes):
            self.progress.phase("building later")
            builder.build_deferred(slot)
            self.progress.phase("warm-up")
            self._warm_all(slot)
            if slot == 0:
                self._more_rounds_under_contention()
            self.progress.phase("timing")
            Rounds(self, slot).run()
            self.progress.phase("closing workers")
            if slot == 0:
                self._collect_profiles()
                self._collect_reports()
            self.pool.close_slot(slot)

    def add_process(self, ids: Collection[str], rounds: int) -> int:
        """Adaptive sampling (bench_runner/adaptive.py): one more worker process per side,
        fresh, for the configurations `ids` only: start, build, warm up, `rounds` interleaved
        rounds, exit. Returns the new process's slot."""
        slot, first = self.plan.processes, self.plan.samples
        self.plan = replace(self.plan, processes=slot + 1, samples=first + rounds)
        self.progress.n_samples = self.plan.samples
        wanted = set(ids)
        # The added process builds these again: the count of builds grows with it, so the
        # progress line never reads past its total.
        self.progress.n_configs += sum(
            st.spec.id in wanted for side in self.plan.sides for st in self.states.ok(side)
        )
        self.progress.phase("starting an added process")
        for side in self.plan.sides:
            self.pool.restart((slot, side))
        self.progress.phase("building later")
        for side in self.plan.sides:
            self._build_in(slot, side, wanted)
        self.progress.phase("warm-up")
        self._warm_all(slot, only=wanted)
        self.progress.phase("timing")
        Rounds(self, slot, rounds=range(first, first + rounds), only=wanted).run()
        self.progress.phase("closing workers")
        self.pool.close_slot(slot)
        return slot

    def _build_in(self, slot: int, side: str, ids: set[str]) -> None:
        """Builds (no checks: each configuration was checked once) in an added process."""
        for st in self.states.ok(side):
            worker = self.pool.get((slot, side))
            if worker is None:
                self.states.note_lost_process(
                    side, slot, self.pool.start_errors.get((slot, side), "it did not start")
                )
                return
            if st.spec.id not in ids:
                continue
            try:
                res = worker.call(
                    self.build_cmd(st.spec, check=False),
                    timeout=PREPARE_TIMEOUT_S,
                    doing=f"building {st.spec.id}",
                )
            except WorkerDied as e:
                self.pool.drop((slot, side))
                self.states.note_lost_process(side, slot, str(e))
                return
            st.absorb_build(res, slot, checked=False)
            self.progress.prepared(st.spec.id, side, slot, st.status, st.reason)

    def _warm_all(self, slot: int, only: set[str] | None = None) -> None:
        """Warm-up is a measurement: one configuration at a time, nothing else running."""
        for side in self.plan.sides:
            for st in self.states.ok(side):
                if only is not None and st.spec.id not in only:
                    continue
                worker = self.pool.get((slot, side))
                if worker is None:
                    break
                doing = f"warming up {st.spec.id}"
                try:
                    cmd = self.warm_cmd(st.spec)
                    res = worker.call(cmd, timeout=PREPARE_TIMEOUT_S, doing=doing)
                except WorkerDied as e:
                    st.fail("error", f"process {slot}: {e}")
                    self.pool.drop((slot, side))
                    self.states.note_lost_process(side, slot, str(e))
                    break
                st.absorb_warm(res, slot)

    def _more_rounds_under_contention(self) -> None:
        """A GPU shared with other processes is noisier: more rounds where the budget allows."""
        if not self.states.contended(self.pool.pids):
            return
        per_round_s = sum(
            st.estimate_ns / 1e9 + ROUND_TRIP_S
            for side in self.plan.sides
            for st in self.states.ok(side)
        )
        affordable = math.floor(0.6 * self.plan.harness.time_budget_s / max(per_round_s, 1e-9))
        samples = min(2 * self.plan.samples, max(self.plan.samples, affordable))
        if samples > self.plan.samples:
            self.progress.note(
                f"the GPU is shared with other work: {samples} rounds instead of "
                f"{self.plan.samples} (see each configuration's details.contention)"
            )
            self.plan = self.plan.with_samples(samples)
            self.progress.n_samples = samples

    def _collect_profiles(self) -> None:
        """Memory and a profile of every configuration from the first process, after its
        timing (bench_runner/profiling.py); harness.profile: false skips it."""
        if not self.plan.harness.profile:
            return
        self.progress.phase("profiling")
        for side in self.plan.sides:
            worker = self.pool.get((0, side))
            if worker is None:
                continue
            for st in self.states.ok(side):
                trace = None
                if self.trace_dir is not None:
                    trace = str(self.trace_dir / trace_file_name(side, st.spec.id))
                cmd = {"op": "profile", "id": st.spec.id, "trace": trace}
                try:
                    st.absorb_profile(
                        worker.call(cmd, timeout=PREPARE_TIMEOUT_S, doing=f"profiling {st.spec.id}")
                    )
                except WorkerDied as e:
                    # The samples stand; the process is gone, so its other reports are too.
                    st.details["profile_error"] = str(e)[:2000]
                    self.pool.drop((0, side))
                    break

    def _collect_reports(self) -> None:
        self._collect_peaks()
        for side in self.plan.sides:
            worker = self.pool.get((0, side))
            if worker is None:
                continue
            for st in self.states.ok(side):
                cmd = {"op": "report", "id": st.spec.id}
                try:
                    st.details.update(worker.call(cmd, timeout=60, doing="reporting"))
                except WorkerDied:
                    break

    def _collect_peaks(self) -> None:
        """The device's peaks from the first process, after its timing: a table lookup, or
        short probes (bench_runner/peak_probe.py) that must not run while anything is timed."""
        worker = self.pool.get((0, "head"))
        if worker is None or not any(st.work for st in self.states.ok("head")):
            return
        dtypes = sorted({st.spec.dtype for st in self.states.ok("head")})
        try:
            self.peaks = worker.call({"op": "peaks", "dtypes": dtypes}, timeout=120, doing="peaks")
        except WorkerDied:
            self.peaks = None


class Rounds:
    """One slot's block of interleaved rounds: every ok configuration (both sides) once per
    round, in a random order, one sample at a time."""

    def __init__(
        self,
        orch: Orchestrator,
        slot: int,
        *,
        rounds: range | None = None,
        only: set[str] | None = None,
    ):
        self.orch = orch
        self.slot = slot
        self.rounds = orch.plan.slot_rounds(slot) if rounds is None else rounds
        self.only = only  # adaptive sampling: the configurations still measured

    def _active(self) -> list[tuple[str, str]]:
        return [
            (side, st.spec.id)
            for side in self.orch.plan.sides
            for st in self.orch.states.ok(side)
            if self.orch.pool.get((self.slot, side)) is not None
            and (self.only is None or st.spec.id in self.only)
        ]

    def run(self) -> None:
        plan, states = self.orch.plan, self.orch.states
        active = self._active()
        self.orch.progress.round_guess = sum(
            states[side][cid].estimate_ns / 1e9 + 1e-3 for side, cid in active
        )
        if not active:
            return
        for r in self.rounds:
            order = list(active)
            self.orch.rng.shuffle(order)
            for side, cid in order:
                self._sample(side, states[side][cid], r)
            self.orch.progress.round_done(r, plan.samples, self.slot, plan.processes, len(order))

    def _sample(self, side: str, st: ConfigState, r: int) -> None:
        worker = self.orch.pool.get((self.slot, side))
        if not st.ok or worker is None:
            return
        cid = st.spec.id
        timeout = max(120.0, 50 * st.estimate_ns / 1e9)
        t0 = time.perf_counter_ns()
        try:
            res = worker.call({"op": "measure", "id": cid}, timeout=timeout, doing=f"timing {cid}")
        except WorkerDied as e:
            st.fail("error", f"process {self.slot}: {e}")
            self.orch.pool.drop((self.slot, side))
            self.orch.states.note_lost_process(side, self.slot, str(e))
            return
        st.timing_wall_ns += time.perf_counter_ns() - t0
        if "error" in res:
            st.fail("error", f"process {self.slot}, round {r}: {res['error']}")
            return
        st.add_sample(res, r, self.slot)
