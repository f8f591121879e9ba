"""Telling work this process hides on another stream apart from a GPU shared with other processes.

Both make synchronised wall time longer than the events on the timed stream. Only the first is a
broken measurement (work the events never see, reported as free); the second is a noisy
neighbour: the call waited for someone else's kernels. The difference shows after the timed
stream has finished: a device-wide synchronize then waits only for *this process's* other
streams, never for another process's work.

Only nearly: on a GPU time-sliced between processes that synchronize itself can take tens of
microseconds with nothing of ours left to run (four `rnx bench` runs on one H200: up to 90 us
after an idle round, 78 us after a 13 us call). So each round of the check times the same
synchronize after an idle round too (a spin of about the call's length on the timed stream, no
call), and the *leftover* is what the call leaves beyond that. The leftover is hidden work when
it is above a floor (LEFTOVER_FLOOR_NS), above IDLE_FACTOR times the idle synchronize of the
same rounds (the synchronize's own noise grows with its latency on a busy GPU), and above the
time the call waited for the GPU before its stream finished (a neighbour's time slices); and
every one of RECHECKS checks in a row must find it. The call's own event time enters only as a
small fraction (EVENT_FRACTION): hidden work that competes with the call for the GPU lengthens
the call's events too (side_stream_small.py on the H200: 252 us of events for a 1024-element
`x * 2`, about 117 us left after them), so a bar that grows fast with the event time would rise
with the work it must see; but a leftover below 2% of the call's time misses less than the
gate's equivalence margin, and a long honest call can leave that much (a 21.6 ms float32 matmul
on the H200 left 61 us, in 3 checks in a row, with nothing on another stream).
`shows_hidden_work` and `StreamCheck.hidden_work` are the rule, pure functions of recorded times
(tested on the CPU with the H200's numbers).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

# Leftover work (the idle synchronize subtracted) above both of these is hidden work... On the
# H200 honest calls left at most 27.9 us (4 runs sharing the GPU; idle synchronize 26.4 us), the
# small side-stream workload about 109-117 us (idle 10.7-18.2 us): about 2x margin either side.
LEFTOVER_FLOOR_NS = 50_000.0
IDLE_FACTOR = 2.0
# ...and above this fraction of the call's own event time (less would change its timing by less
# than the gate's +-2% equivalence margin).
EVENT_FRACTION = 0.02
# ...in CHECK_ROUNDS rounds (medians), found again in each of RECHECKS checks in a row. An honest
# call is checked once; only a check that finds a leftover is repeated.
CHECK_ROUNDS = 5
RECHECKS = 3
# Wall time beyond the events by more than this, with no hidden work: the call waited for the GPU.
WAIT_FRACTION = 0.5
WAIT_FLOOR_NS = 200_000.0
# A fixed kernel whose median time exceeds its fastest by this factor ran on a busy GPU.
CALIBRATION_SPREAD = 1.5


@dataclass(frozen=True)
class SyncRound:
    """One call timed on its stream and by the host, and an idle round right after it."""

    event_ns: float  # the call, by CUDA events on the timed stream
    wall_ns: float  # host time from before the start event to the end of a device-wide sync
    after_ns: float  # that device-wide synchronize alone, once the timed stream was done
    idle_after_ns: float  # the same synchronize after an idle round (a spin, no call)

    @property
    def leftover_ns(self) -> float:
        """This process's GPU work still running after the timed stream finished."""
        return max(0.0, self.after_ns - self.idle_after_ns)

    @property
    def waited_ns(self) -> float:
        """Wall time before the timed stream finished beyond the call's own GPU time: launch
        latency and, on a shared GPU, the wait for other processes' time slices."""
        return max(0.0, self.wall_ns - self.event_ns - self.after_ns)


def hidden_bar_ns(idle_after_ns: float, event_ns: float = 0.0) -> float:
    """The leftover above which the call left work behind: the floor, IDLE_FACTOR times the
    synchronize's own time after an idle round, or EVENT_FRACTION of the call's event time,
    whichever is highest."""
    return max(LEFTOVER_FLOOR_NS, IDLE_FACTOR * idle_after_ns, EVENT_FRACTION * event_ns)


def shows_hidden_work(rounds: Sequence[SyncRound]) -> bool:
    """One check's verdict from its rounds' medians: a leftover above `hidden_bar_ns` of the
    idle synchronize, and larger than the time the call waited for the GPU, so that the
    leftover, not a neighbour, is what made the wall time long."""
    if not rounds:
        return False
    leftover = statistics.median(r.leftover_ns for r in rounds)
    idle = statistics.median(r.idle_after_ns for r in rounds)
    event = statistics.median(r.event_ns for r in rounds)
    waited = statistics.median(r.waited_ns for r in rounds)
    return leftover > hidden_bar_ns(idle, event) and leftover > waited


def _median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else 0.0


@dataclass(frozen=True)
class StreamCheck:
    """The checks made of one configuration: the first, and re-checks while each found hidden
    work. The figures shown are the last check's medians."""

    checks: tuple[tuple[SyncRound, ...], ...]

    @property
    def hidden_work(self) -> bool:
        return len(self.checks) >= RECHECKS and all(shows_hidden_work(c) for c in self.checks)

    def _last(self, key: str) -> float:
        return _median([getattr(r, key) for r in self.checks[-1]]) if self.checks else 0.0

    @property
    def event_ns(self) -> float:
        return self._last("event_ns")

    @property
    def wall_ns(self) -> float:
        return self._last("wall_ns")

    @property
    def after_stream_ns(self) -> float:
        return self._last("after_ns")

    @property
    def idle_after_ns(self) -> float:
        return self._last("idle_after_ns")

    @property
    def leftover_ns(self) -> float:
        return self._last("leftover_ns")

    @property
    def waited_ns(self) -> float:
        return self._last("waited_ns")

    @property
    def waited_for_gpu(self) -> bool:
        extra = self.wall_ns - self.event_ns
        return not self.hidden_work and extra > WAIT_FRACTION * self.event_ns + WAIT_FLOOR_NS

    def hidden_reason(self) -> str:
        bar_us = hidden_bar_ns(self.idle_after_ns, self.event_ns) / 1e3
        return (
            f"event time ({self.event_ns / 1e3:.1f} us) and synchronised wall time "
            f"({self.wall_ns / 1e3:.1f} us) disagree, and this process still had "
            f"{self.leftover_ns / 1e3:.1f} us of GPU work after the timed stream finished "
            f"(beyond the {self.idle_after_ns / 1e3:.1f} us the same synchronize takes after an "
            f"idle round, and above {bar_us:.0f} us and the "
            f"{self.waited_ns / 1e3:.1f} us the call waited for the GPU; found in "
            f"{len(self.checks)} checks of {CHECK_ROUNDS} rounds): the call leaves work on "
            f"another stream, which the events do not time. Run the work on "
            f"torch.cuda.current_stream()"
        )

    def as_details(self) -> dict[str, int]:
        return {
            "stream_check_event_ns": round(self.event_ns),
            "stream_check_wall_ns": round(self.wall_ns),
            "stream_check_after_stream_ns": round(self.after_stream_ns),
            "stream_check_idle_after_ns": round(self.idle_after_ns),
            "stream_check_leftover_ns": round(self.leftover_ns),
            "stream_check_waited_ns": round(self.waited_ns),
            "stream_checks": len(self.checks),
        }


@dataclass(frozen=True)
class ContentionSigns:
    """What one worker saw of other work on its GPU while preparing a configuration."""

    gpu_pids: list[int] | None  # every process NVML lists on the GPU (None: unknown)
    own_pid: int
    calibration_spread: float | None  # median / fastest time of a fixed kernel
    waited_for_gpu: bool
    wait_ns: float = 0.0
    # Processes that ran kernels in the last second (None: the GPU cannot say). A process that
    # only holds a context (an idle notebook) takes nothing from us.
    active_pids: list[int] | None = None

    def others(self, run_pids: set[int]) -> list[int] | None:
        """Processes busy on the GPU that are not this run's (all those present where activity
        is unknown); None where NVML's process ids are not this process's (a container's own
        PID namespace: this worker is missing from them)."""
        if self.gpu_pids is None or self.own_pid not in self.gpu_pids:
            return None
        present = [p for p in self.gpu_pids if p not in run_pids]
        if self.active_pids is None:
            return present
        return [p for p in present if p in self.active_pids]

    def seen(self, run_pids: set[int]) -> bool:
        spread = self.calibration_spread or 1.0
        return bool(self.others(run_pids)) or spread > CALIBRATION_SPREAD or self.waited_for_gpu

    def note(self, run_pids: set[int]) -> str:
        parts = []
        others = self.others(run_pids)
        if others:
            listed = ", ".join(str(p) for p in others[:5])
            busy = "running kernels" if self.active_pids is not None else "present"
            parts.append(f"{len(others)} other process(es) {busy} on the GPU (pid {listed})")
        if self.waited_for_gpu:
            parts.append(
                f"calls waited {self.wait_ns / 1e3:.0f} us for the GPU beyond their own work"
            )
        if (self.calibration_spread or 1.0) > CALIBRATION_SPREAD:
            parts.append(
                f"a fixed calibration kernel ran {self.calibration_spread:.1f}x its fastest time"
            )
        return "GPU shared with other work: " + "; ".join(parts)

    def as_message(self) -> dict[str, Any]:
        return {
            "gpu_pids": self.gpu_pids,
            "own_pid": self.own_pid,
            "calibration_spread": self.calibration_spread,
            "waited_for_gpu": self.waited_for_gpu,
            "wait_ns": self.wait_ns,
            "active_pids": self.active_pids,
        }

    @classmethod
    def from_message(cls, data: dict[str, Any]) -> ContentionSigns:
        return cls(
            gpu_pids=data.get("gpu_pids"),
            own_pid=int(data.get("own_pid", -1)),
            calibration_spread=data.get("calibration_spread"),
            waited_for_gpu=bool(data.get("waited_for_gpu")),
            wait_ns=float(data.get("wait_ns") or 0.0),
            active_pids=data.get("active_pids"),
        )
