"""Shared by the benchmarks/gpu/ scripts: the CUDA gate, the output folder, NVML sampling."""

from __future__ import annotations

import json
import os
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
WORKLOADS = ROOT / "tests" / "bench_runner" / "workloads"
EXAMPLES = ROOT / "examples"


def require_cuda(script: str) -> None:
    """Exit 2 with a clear line where there is no GPU (the scripts run on the lead's H200)."""
    import torch

    if not torch.cuda.is_available():
        print(f"{script} needs CUDA: no GPU is visible here, nothing was measured", file=sys.stderr)
        sys.exit(2)


def out_dir(given: str | None) -> Path | None:
    where = given or os.environ.get("OUT")
    if not where:
        return None
    path = Path(where)
    path.mkdir(parents=True, exist_ok=True)
    return path


def save(folder: Path | None, name: str, data: Any) -> None:
    if folder is not None:
        (folder / name).write_text(json.dumps(data, indent=1, default=str))


class ClockSampler:
    """SM clock, power and temperature every `period_s` in a thread, while a block runs."""

    def __init__(self, period_s: float = 0.005):
        import torch

        from bench_runner.telemetry import open_telemetry

        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        uuid = str(getattr(props, "uuid", "") or "") or None
        self.telemetry = open_telemetry(uuid, torch.cuda.current_device())
        self.period_s = period_s
        self.readings: list[dict[str, Any]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> ClockSampler:
        self.readings = []
        self._stop.clear()
        if self.telemetry.available:
            self._thread = threading.Thread(target=self._run, daemon=True)
            self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            reading: dict[str, Any] = dict(self.telemetry.read())
            reading["reasons"] = self.telemetry.clock_reasons()
            self.readings.append(reading)
            time.sleep(self.period_s)

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def summary(self) -> dict[str, float | None]:
        def med(key: str) -> float | None:
            values = [r[key] for r in self.readings if r.get(key) is not None]
            return statistics.median(values) if values else None

        from bench_runner.telemetry import SLOWDOWN_REASONS, reason_names

        # Why the clock was below its maximum: the slowdown reasons NVML gave, with the share of
        # readings that carried each (sw_power_cap: the power limit; *_thermal_*: heat).
        counts: dict[str, int] = {}
        for r in self.readings:
            for name in reason_names(r.get("reasons") or 0):
                if name in SLOWDOWN_REASONS:
                    counts[name] = counts.get(name, 0) + 1
        n = max(len(self.readings), 1)
        return {
            "sm_mhz": med("sm_mhz"),
            "power_w": med("power_w"),
            "temp_c": med("temp_c"),
            "max_power_w": max(
                (r["power_w"] for r in self.readings if r.get("power_w")), default=None
            ),
            "slowdown_reasons": {k: round(v / n, 2) for k, v in sorted(counts.items())},
        }
