"""Telling work this process hides on another stream apart from a GPU shared with other processes.

Both make synchronised wall time longer than the events on the timed stream. Only the first is a
broken measurement (work the events never see, reported as free); the second is a noisy
neighbour: the call waited for someone else's kernels. The difference shows after the timed
stream has finished: a device-wide synchronize then waits only for *this process's* other
streams, never for another process's work.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

# Work still running in this process after the timed stream finished, beyond this, is hidden.
HIDDEN_FRACTION = 0.5
HIDDEN_FLOOR_NS = 50_000.0
# Wall time beyond the events by more than this, with no hidden work: the call waited for the GPU.
WAIT_FRACTION = 0.5
WAIT_FLOOR_NS = 200_000.0
# A fixed kernel whose median time exceeds its fastest by this factor ran on a busy GPU.
CALIBRATION_SPREAD = 1.5


@dataclass(frozen=True)
class StreamCheck:
    """Medians over a few calls of: event time, synchronised wall time, and the time a
    device-wide synchronize still took after the timed stream had finished."""

    event_ns: float
    wall_ns: float
    after_stream_ns: float

    @classmethod
    def of(cls, events: list[float], walls: list[float], after: list[float]) -> StreamCheck:
        return cls(statistics.median(events), statistics.median(walls), statistics.median(after))

    @property
    def hidden_work(self) -> bool:
        return self.after_stream_ns > HIDDEN_FRACTION * self.event_ns + HIDDEN_FLOOR_NS

    @property
    def waited_for_gpu(self) -> bool:
        extra = self.wall_ns - self.event_ns
        return not self.hidden_work and extra > WAIT_FRACTION * self.event_ns + WAIT_FLOOR_NS

    def hidden_reason(self) -> str:
        return (
            f"event time ({self.event_ns / 1e3:.1f} us) and synchronised wall time "
            f"({self.wall_ns / 1e3:.1f} us) disagree, and this process still had "
            f"{self.after_stream_ns / 1e3:.1f} us of GPU work after the timed stream finished: "
            f"the call leaves work on another stream, which the events do not time. Run the "
            f"work on torch.cuda.current_stream()"
        )

    def as_details(self) -> dict[str, int]:
        return {
            "stream_check_event_ns": round(self.event_ns),
            "stream_check_wall_ns": round(self.wall_ns),
            "stream_check_after_stream_ns": round(self.after_stream_ns),
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
