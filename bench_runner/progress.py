"""Progress on stderr: configuration i of N while building and checking, rounds while timing."""

from __future__ import annotations

import time
from typing import TextIO


def _dur(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f}s"
    return f"{int(seconds // 60)}m{int(seconds % 60):02d}s"


class Progress:
    def __init__(self, stream: TextIO | None, *, n_configs: int, n_samples: int):
        self.stream = stream
        self.n_configs = n_configs
        self.n_samples = n_samples
        self.t0 = time.monotonic()
        self.done_configs = 0
        self.prepare_s = 0.0
        self.rounds_done = 0
        self.round_s = 0.0
        self._last = self.t0
        self.round_guess = 0.0  # seconds per round, from the warm-up, until rounds are timed
        self.phases: dict[str, float] = {}  # seconds spent per phase of the run
        self._phase: tuple[str, float] | None = None

    def _emit(self, text: str) -> None:
        if self.stream is not None:
            print(text, file=self.stream, flush=True)

    def _eta(self) -> float:
        left_configs = self.n_configs - self.done_configs
        per_config = self.prepare_s / max(self.done_configs, 1)
        per_round = self.round_s / self.rounds_done if self.rounds_done else self.round_guess
        left = left_configs * per_config + (self.n_samples - self.rounds_done) * per_round
        # Work added on the way (adaptive sampling) can overtake the plan: never a negative eta.
        return max(0.0, left)

    def prepared(
        self,
        cid: str,
        side: str,
        slot: int,
        status: str,
        reason: str | None = None,
        checked: bool = False,
    ) -> None:
        now = time.monotonic()
        self.prepare_s += now - self._last
        self._last = now
        self.done_configs += 1
        what = "checked and built" if checked else "built"
        note = f": {reason[:120]}" if reason and status != "ok" else ""
        self._emit(
            f"[configuration {self.done_configs}/{self.n_configs}] {cid} ({side}, process "
            f"{slot + 1}) {what if status == 'ok' else status}{note}  "
            f"elapsed {_dur(now - self.t0)}  eta {_dur(self._eta())}"
        )

    def skipped(self) -> None:
        """A configuration that is not built again in a later process (it is not ok)."""
        self.done_configs += 1

    def round_done(self, r: int, rounds: int, slot: int, processes: int, measured: int) -> None:
        now = time.monotonic()
        self.round_s += now - self._last
        self._last = now
        self.rounds_done += 1
        if self.rounds_done in (1, rounds) or self.rounds_done % max(1, rounds // 10) == 0:
            self._emit(
                f"[round {r + 1}/{rounds}] process {slot + 1}/{processes}, {measured} samples  "
                f"elapsed {_dur(now - self.t0)}  eta {_dur(self._eta())}"
            )

    def note(self, text: str) -> None:
        self._emit(f"[note] {text}")

    def phase(self, name: str) -> None:
        """From now on the run is in phase `name` (starting, building, warm-up, timing...)."""
        now = time.monotonic()
        if self._phase is not None:
            was, since = self._phase
            self.phases[was] = self.phases.get(was, 0.0) + now - since
        self._phase = (name, now)

    def finish(self, workers: str | None = None) -> None:
        self.phase("done")
        split = ", ".join(f"{k} {v:.1f}s" for k, v in self.phases.items() if k != "done")
        self._emit(f"done in {_dur(time.monotonic() - self.t0)} ({split})")
        if workers:
            self._emit(f"[workers] {workers}")
