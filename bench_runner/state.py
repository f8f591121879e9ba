"""What the orchestrator knows of each configuration of each side while a run goes on."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from bench_runner.gpu_checks import ContentionSigns
from bench_runner.plan import ConfigSpec, Plan
from bench_runner.telemetry import is_throttled

TELEMETRY_KEYS = ("sm_mhz", "power_w", "temp_c")


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
    telemetry: dict[str, list[Any]] = field(default_factory=lambda: {k: [] for k in TELEMETRY_KEYS})
    contention: list[ContentionSigns] = field(default_factory=list)
    estimate_ns: float = 0.0
    timing_wall_ns: int = 0
    work: dict[str, Any] | None = None  # bench_runner/work.py, from the checking build
    profile: dict[str, Any] | None = None  # bench_runner/profiling.py, after timing
    memory: dict[str, Any] | None = None

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def fail(self, status: str, reason: str) -> None:
        self.status, self.reason = status, reason

    def _failed(self, res: dict[str, Any], slot: int, *, first: bool) -> None:
        """first: where the configuration was checked (builds) or process 1 (warm-up)."""
        details = res.get("details", {})
        prefix = "" if first else f"process {slot}: "
        self.fail(res["status"], prefix + str(res.get("reason") or res["status"]))
        if not first:
            self.status = "error"  # it passed its check: a later failure is not "unsupported"
        if "traceback" in details:
            self.details["traceback"] = details["traceback"]

    def absorb_build(self, res: dict[str, Any], slot: int, *, checked: bool) -> None:
        """A build's answer; checked: the build that checked the configuration, whose
        correctness, build times and details the document keeps."""
        details = res.get("details", {})
        if checked:
            self.correctness = res.get("correctness")
            self.build = {k: int(v) for k, v in res.get("build", {}).items() if v is not None}
            self.details.update(details)
            self.details["checked_in_process"] = slot
            self.work = res.get("work")
        else:
            self.details.setdefault("build_wall_ns_per_process", []).append(
                details.get("build_wall_ns")
            )
            self.details.setdefault("later_build_wall_ns", []).append(
                details.get("prepare_wall_ns")
            )
        if res["status"] != "ok":
            self._failed(res, slot, first=checked)

    def absorb_warm(self, res: dict[str, Any], slot: int) -> None:
        details = res.get("details", {})
        if slot == 0:
            self.details.update(details)
        else:
            self.details["warmup_wall_ns"] = self.details.get("warmup_wall_ns", 0) + details.get(
                "warmup_wall_ns", 0
            )
        if "contention" in res:
            self.contention.append(ContentionSigns.from_message(res["contention"]))
        self.estimate_ns = float(res.get("estimate_ns", self.estimate_ns or 0.0))
        if res["status"] != "ok":
            self._failed(res, slot, first=slot == 0)

    def absorb_profile(self, res: dict[str, Any]) -> None:
        """The profile step's answer: its failures are details, never the status."""
        self.profile, self.memory = res.get("profile"), res.get("memory")
        for key in ("profile_error", "memory_error", "profile_wall_ns"):
            if key in res:
                self.details[key] = res[key]

    def add_sample(self, answer: dict[str, Any], round_index: int, slot: int) -> None:
        self.ns.append(int(answer["ns"]))
        self.rounds.append(round_index)
        self.processes.append(slot)
        seen = answer.get("telemetry") or {}
        for key in TELEMETRY_KEYS:
            self.telemetry[key].append(seen.get(key))

    def telemetry_details(self) -> dict[str, Any] | None:
        """Per-sample SM clock, power and temperature, and which samples ran throttled."""
        if not any(v is not None for values in self.telemetry.values() for v in values):
            return None
        default = self.details.get("default_sm_mhz")
        clocks = self.telemetry["sm_mhz"]
        out: dict[str, Any] = {k: list(v) for k, v in self.telemetry.items()}
        out["default_sm_mhz"] = default
        out["throttled"] = [i for i, mhz in enumerate(clocks) if is_throttled(mhz, default)]
        return out

    def contention_details(self, run_pids: set[int]) -> dict[str, Any] | None:
        seen = [c for c in self.contention if c.seen(run_pids)]
        if not seen:
            return None
        others = sorted({p for c in seen for p in (c.others(run_pids) or [])})
        return {
            "note": seen[0].note(run_pids),
            "processes_seen": len(seen),
            "other_pids": others,
        }


class RunStates:
    """Every configuration of every side."""

    def __init__(self, plan: Plan):
        self.by_side = {side: {c.id: ConfigState(c) for c in plan.configs} for side in plan.sides}

    def __getitem__(self, side: str) -> dict[str, ConfigState]:
        return self.by_side[side]

    def get(self, side: str) -> dict[str, ConfigState] | None:
        return self.by_side.get(side)

    def ok(self, side: str) -> list[ConfigState]:
        return [st for st in self.by_side[side].values() if st.ok]

    def fail_side(self, side: str, why: str) -> None:
        for st in self.ok(side):
            st.fail("error", why)

    def note_lost_process(self, side: str, slot: int, why: str) -> None:
        """A worker died: its other configurations lose this process's samples only."""
        for st in self.ok(side):
            st.details.setdefault("lost_processes", []).append({"process": slot, "why": why})

    def contended(self, run_pids: set[int]) -> bool:
        return any(
            c.seen(run_pids)
            for states in self.by_side.values()
            for st in states.values()
            for c in st.contention
        )
