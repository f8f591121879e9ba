"""What tests of the action share: a clock whose sleeps cost no time, and the step outputs
the action wrote to $GITHUB_OUTPUT."""

from __future__ import annotations

import random
import time
from pathlib import Path

from action.upload import Clock


class VirtualClock(Clock):
    """Real time plus slept time: retry schedules run instantly but still count against the
    upload's budget. The seed fixes the retries' jitter."""

    def __init__(self, seed: int = 1) -> None:
        self.slept: list[float] = []
        super().__init__(
            monotonic=lambda: time.monotonic() + sum(self.slept),
            sleep=self.slept.append,
            wall=time.time,
            rng=random.Random(seed),
        )


def read_outputs(path: Path) -> dict[str, str]:
    """The `name<<DELIMITER` blocks the action wrote to its $GITHUB_OUTPUT file, by name."""
    values, lines, i = {}, path.read_text().splitlines(), 0
    while i < len(lines):
        name, _, delimiter = lines[i].partition("<<")
        j = lines.index(delimiter, i + 1)
        values[name] = "\n".join(lines[i + 1 : j])
        i = j + 1
    return values
