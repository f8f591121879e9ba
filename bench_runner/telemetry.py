"""What the GPU was doing while it was measured: SM clock, power, temperature, throttling and the
other processes on it, read through NVML (nvidia-ml-py). Optional: without nvidia-ml-py, or where
NVML fails, every reading is None and `reason` says why; nothing raises."""

from __future__ import annotations

import os
import subprocess
import time
from dataclasses import dataclass, field
from typing import Any

# nvbench's rule: a sample taken below 75% of the default SM clock was taken while throttled.
THROTTLED_BELOW = 0.75
# NVML clock event reasons (nvmlClocksEventReason*), by bit.
_REASONS = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}
# Reasons that slow the clock below what the workload asks for (idle and settings do not).
SLOWDOWN_REASONS = frozenset(
    {"sw_power_cap", "hw_slowdown", "sw_thermal_slowdown", "hw_thermal_slowdown",
     "hw_power_brake_slowdown"}
)  # fmt: skip


def reason_names(mask: int) -> list[str]:
    return [name for bit, name in _REASONS.items() if mask & bit]


def is_throttled(sm_mhz: float | None, default_sm_mhz: float | None) -> bool:
    return bool(sm_mhz and default_sm_mhz and sm_mhz < THROTTLED_BELOW * default_sm_mhz)


@dataclass
class GpuTelemetry:
    """One GPU through NVML; `handle` None means no readings (and `reason` says why)."""

    handle: Any = None
    nvml: Any = None
    reason: str | None = None
    default_sm_mhz: int | None = None
    max_sm_mhz: int | None = None
    power_limit_w: float | None = None
    errors: dict[str, str] = field(default_factory=dict)

    @property
    def available(self) -> bool:
        return self.handle is not None

    def _query(self, name: str, fn: str, *args: Any) -> Any:
        if self.handle is None or name in self.errors:
            return None
        try:
            return getattr(self.nvml, fn)(self.handle, *args)
        except Exception as e:  # noqa: BLE001 - NVMLError_NotSupported and friends, per query
            self.errors[name] = f"{type(e).__name__}: {e}"
            return None

    def _instant_power_mw(self) -> int | None:
        """Board power now, in mW (NVML_FI_DEV_POWER_INSTANT). nvmlDeviceGetPowerUsage is an
        average over the last second on Ampere (but GA100) and newer GPUs: it reads a 0.2 s
        burst as mostly idle."""
        field = getattr(self.nvml, "NVML_FI_DEV_POWER_INSTANT", None)
        if field is None:
            return None
        found = self._query("power_instant", "nvmlDeviceGetFieldValues", [field])
        if not found or int(found[0].nvmlReturn) != 0:
            self.errors.setdefault("power_instant", "NVML_FI_DEV_POWER_INSTANT not supported")
            return None
        return int(found[0].value.uiVal)

    def read(self) -> dict[str, float | None]:
        """The SM clock (MHz), board power (W, instantaneous where the GPU gives it, else
        NVML's average) and temperature (C) now."""
        sm = self._query("sm_clock", "nvmlDeviceGetClockInfo", 1)  # NVML_CLOCK_SM
        power = self._instant_power_mw()
        if power is None:
            power = self._query("power", "nvmlDeviceGetPowerUsage")
        temp = self._query("temperature", "nvmlDeviceGetTemperature", 0)  # NVML_TEMPERATURE_GPU
        return {
            "sm_mhz": None if sm is None else int(sm),
            "power_w": None if power is None else round(power / 1000, 1),
            "temp_c": None if temp is None else int(temp),
        }

    def clock_reasons(self) -> int | None:
        fn = (
            "nvmlDeviceGetCurrentClocksEventReasons"
            if hasattr(self.nvml, "nvmlDeviceGetCurrentClocksEventReasons")
            else "nvmlDeviceGetCurrentClocksThrottleReasons"
        )
        mask = self._query("clock_reasons", fn)
        return None if mask is None else int(mask)

    def utilization(self) -> int | None:
        rates = self._query("utilization", "nvmlDeviceGetUtilizationRates")
        return None if rates is None else int(rates.gpu)

    def active_pids(self, within_s: float = 1.0) -> list[int] | None:
        """Processes that ran kernels on the GPU in the last `within_s` seconds (NVML's
        per-process SM samples); None where the GPU or driver cannot say."""
        if self.handle is None or "process_utilization" in self.errors:
            return None
        since_us = int((time.time() - within_s) * 1e6)
        try:
            samples = self.nvml.nvmlDeviceGetProcessUtilization(self.handle, since_us)
        except Exception as e:  # noqa: BLE001 - NVMLError_*
            if type(e).__name__ == "NVMLError_NotFound":  # no samples: nobody ran kernels
                return []
            self.errors["process_utilization"] = f"{type(e).__name__}: {e}"
            return None
        return sorted({int(s.pid) for s in samples if int(getattr(s, "smUtil", 0)) > 0})

    def compute_pids(self) -> list[int] | None:
        procs = self._query("processes", "nvmlDeviceGetComputeRunningProcesses")
        return None if procs is None else sorted({int(p.pid) for p in procs})

    def describe(self) -> dict[str, Any]:
        out: dict[str, Any] = {"nvml": self.available}
        if self.reason:
            out["nvml_reason"] = self.reason
        for key in ("default_sm_mhz", "max_sm_mhz", "power_limit_w"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        if self.errors:
            out["nvml_errors"] = dict(self.errors)
        return out


def _handle(nvml: Any, uuid: str | None, index: int) -> Any:
    """The NVML handle of torch's device: NVML numbers every GPU of the machine, CUDA only the
    visible ones (CUDA_VISIBLE_DEVICES, CUDA_DEVICE_ORDER), so the UUID decides where known."""
    if uuid:
        for text in (uuid, f"GPU-{uuid}"):
            try:
                return nvml.nvmlDeviceGetHandleByUUID(text)
            except Exception:  # noqa: BLE001 - try the other spelling
                continue
    if os.environ.get("CUDA_VISIBLE_DEVICES"):
        raise LookupError("the GPU's UUID is unknown and CUDA_VISIBLE_DEVICES renumbers GPUs")
    return nvml.nvmlDeviceGetHandleByIndex(index)


def open_telemetry(uuid: str | None, index: int) -> GpuTelemetry:
    """NVML for the GPU with this UUID (torch's device properties) or, failing that, index."""
    try:
        import pynvml
    except ImportError:
        return GpuTelemetry(
            reason="nvidia-ml-py is not installed (pip install nvidia-ml-py): clocks, power, "
            "temperature and other processes are not recorded"
        )
    try:
        pynvml.nvmlInit()
        handle = _handle(pynvml, uuid, index)
    except Exception as e:  # noqa: BLE001 - NVMLError_*, LookupError: recorded, never raised
        return GpuTelemetry(reason=f"NVML is not usable here ({type(e).__name__}: {e})")
    t = GpuTelemetry(handle=handle, nvml=pynvml)
    default = t._query("default_clock", "nvmlDeviceGetDefaultApplicationsClock", 1)
    peak = t._query("max_clock", "nvmlDeviceGetMaxClockInfo", 1)
    limit = t._query("power_limit", "nvmlDeviceGetEnforcedPowerLimit")
    t.max_sm_mhz = None if peak is None else int(peak)
    t.default_sm_mhz = int(default) if default else t.max_sm_mhz
    t.power_limit_w = None if limit is None else round(limit / 1000, 1)
    return t


def nvidia_smi(fields: str) -> list[str] | None:
    """nvidia-smi's CSV rows for --query-gpu=fields, one per GPU; None where it cannot run."""
    try:
        out = subprocess.run(
            ["nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return [line.strip() for line in out.splitlines() if line.strip()]
