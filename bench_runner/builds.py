"""The build phase: every configuration built in every worker process, each checked in one.

Checks go by reference group: the configurations of one (dtype, batch size) share their
inputs and float64 references (bench_runner/references.py), so one process checks a whole
group and computes its references once per run. Process 1 starts with the first group. Once an
answer has shown how much memory a checked configuration takes, and every process can hold
that much at once, the other groups go to whichever process has none in hand, the largest
batch sizes first; otherwise process 1 checks them all, one after another. A configuration that
passed its check is built in every other process: at once where memory allows, else just before
that process's warm-up. Nothing is timed during this phase.
"""

from __future__ import annotations

from collections import deque
from typing import Any, Protocol

from bench_runner.plan import ConfigSpec, Plan
from bench_runner.progress import Progress
from bench_runner.state import ConfigState, RunStates
from bench_runner.worker_pool import Answer, Dispatcher, WorkerDied, WorkerHandle, WorkerKey

# Builds and checks in other processes overlap only while their memory fits in this share of
# what was free when the run started.
OVERLAP_MEMORY_SHARE = 0.5

Group = list[ConfigState]


class Pool(Protocol):
    def hello(self, key: WorkerKey) -> dict[str, Any]: ...
    def get(self, key: WorkerKey) -> WorkerHandle | None: ...
    def restart(self, key: WorkerKey) -> WorkerHandle | None: ...


class Run(Protocol):
    """What the build phase uses of the orchestrator (bench_runner/orchestrator.py)."""

    plan: Plan
    states: RunStates
    dispatcher: Dispatcher
    progress: Progress

    @property
    def pool(self) -> Pool: ...

    def build_cmd(self, c: ConfigSpec, *, check: bool) -> dict[str, Any]: ...


def reference_groups(states: list[ConfigState]) -> list[Group]:
    """The configurations by (dtype, batch size), in plan order."""
    groups: dict[tuple[str, int | None], Group] = {}
    for st in states:
        groups.setdefault((st.spec.dtype, st.spec.batch_size), []).append(st)
    return list(groups.values())


def check_order(groups: list[Group]) -> list[Group]:
    """The first group first (process 1 starts alone with it), then the largest batch sizes
    first: the longest checks start early, so the processes finish close together."""
    head, rest = groups[:1], groups[1:]
    return head + sorted(rest, key=lambda g: -(g[0].spec.batch_size or 0))


class Builder:
    def __init__(self, orch: Run):
        self.orch = orch
        self.deferred: dict[int, list[tuple[str, dict[str, Any]]]] = {}
        self.footprint: dict[str, int] = {}  # bytes a process holds with a build, per side
        self.peak: dict[str, int] = {}  # peak bytes of a checking process, per side
        self.unchecked: dict[str, deque[Group]] = {}
        self.checking: dict[WorkerKey, int] = {}  # checks in hand per worker

    def build_all(self) -> None:
        first: dict[WorkerKey, list[dict[str, Any]]] = {}
        for side in self.orch.plan.sides:
            groups = check_order(reference_groups(self.orch.states.ok(side)))
            self.unchecked[side] = deque(groups)
            first[(0, side)] = self._take_group((0, side))
        self.orch.dispatcher.run(first, self._react)

    def build_deferred(self, slot: int) -> None:
        queues: dict[WorkerKey, list[dict[str, Any]]] = {}
        for side, cmd in self.deferred.pop(slot, []):
            queues.setdefault((slot, side), []).append(cmd)
        self.orch.dispatcher.run(queues, self._react)

    def _take_group(self, key: WorkerKey) -> list[dict[str, Any]]:
        groups = self.unchecked[key[1]]
        group: Group = []
        while groups and not group:
            group = [st for st in groups.popleft() if st.ok]
        self.checking[key] = len(group)
        return [self.orch.build_cmd(st.spec, check=True) for st in group]

    def _room(self, side: str, footprint: int, processes: int) -> bool:
        available = self.orch.pool.hello((0, side)).get("memory_available_bytes")
        if not available or processes <= 0:
            return True
        return footprint * processes <= OVERLAP_MEMORY_SHARE * available

    def _checks_spread(self, side: str) -> bool:
        """Whether every process may check at once: only with a footprint seen, and room."""
        peak = self.peak.get(side)
        return bool(peak) and self._room(side, peak or 0, self.orch.plan.processes)

    def _react(self, key: WorkerKey, cmd: dict[str, Any], answer: Answer):
        slot, side = key
        st = self.orch.states[side][cmd["id"]]
        checked = bool(cmd.get("check"))
        if isinstance(answer, WorkerDied):
            st.fail("error", str(answer) if checked else f"process {slot}: {answer}")
            self.orch.pool.restart(key)
        else:
            st.absorb_build(answer, slot, checked=checked)
            if checked:
                held = int(answer.get("memory_bytes") or 0)
                peak = int(answer.get("peak_memory_bytes") or held)
                self.footprint[side] = max(self.footprint.get(side, 0), held)
                self.peak[side] = max(self.peak.get(side, 0), peak)
        self.orch.progress.prepared(st.spec.id, side, slot, st.status, st.reason, checked)
        if not checked:
            return {}
        more = self._queue_for_others(key, st)
        self.checking[key] -= 1
        for free, cmds in self._next_checks(side, finished=key).items():
            more.setdefault(free, []).extend(cmds)
        return more

    def _next_checks(self, side: str, finished: WorkerKey) -> dict[WorkerKey, list[dict]]:
        """Groups for the processes of `side` that have no checks in hand."""
        candidates = [finished] if self.checking[finished] == 0 else []
        if self._checks_spread(side):
            candidates += [
                (slot, side)
                for slot in range(self.orch.plan.processes)
                if (slot, side) != finished and self.checking.get((slot, side), 0) == 0
            ]
        more: dict[WorkerKey, list[dict]] = {}
        for key in candidates:
            if not self.unchecked[side] or self.orch.pool.get(key) is None:
                continue
            if key[0] != 0 and not self._checks_spread(side):
                continue
            cmds = self._take_group(key)
            if cmds:
                more[key] = cmds
        return more

    def _queue_for_others(self, key: WorkerKey, st: ConfigState):
        checker, side = key
        others = [s for s in range(self.orch.plan.processes) if s != checker]
        more: dict[WorkerKey, list[dict[str, Any]]] = {}
        if not st.ok:
            for _ in others:
                self.orch.progress.skipped()
            return more
        room = self._room(side, self.footprint.get(side, 0), len(others))
        for other in others:
            cmd = self.orch.build_cmd(st.spec, check=False)
            if room:
                more[(other, side)] = [cmd]
            else:
                self.deferred.setdefault(other, []).append((side, cmd))
        return more
