"""What to call an environment wherever one is shown: its name and its hardware (GPU model,
driver, torch), with the key, which is what groups comparable runs, kept for hover text.

A results document's `environment.hardware` and `.software` are free-form dictionaries (the
harness writes them, bench_runner/environment.py, but any JSON object is accepted), so every
value is read defensively: a stored document of any shape the schema accepts gets a label,
never an exception.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from rnx.schema import Environment

# Long free text from a document would break a table cell; the key on hover stays exact.
MAX_PART_CHARS = 80
SEPARATOR = " · "


@dataclass(frozen=True)
class EnvironmentLabel:
    """An environment as people read it. `key` is exact; the other parts are None when the
    runs did not record them."""

    key: str
    name: str | None = None
    hardware: str | None = None  # "NVIDIA H200", "2× NVIDIA H200", "AMD EPYC 7763 (2 CPUs)"
    driver: str | None = None  # the GPU driver (nvidia-smi)
    torch: str | None = None

    @property
    def title(self) -> str:
        """The short name: the environment's name, else its hardware, else its key."""
        return self.name or self.hardware or self.key

    @property
    def details(self) -> str:
        """What it runs on, in one line: hardware, driver and torch as far as recorded."""
        parts = [
            self.hardware if self.hardware and self.hardware != self.title else None,
            f"driver {self.driver}" if self.driver else None,
            f"torch {self.torch}" if self.torch else None,
        ]
        return SEPARATOR.join(p for p in parts if p)

    @property
    def text(self) -> str:
        """The name with its details, for plain-text surfaces (alerts, CSV, logs)."""
        return f"{self.title} ({self.details})" if self.details else self.title

    @property
    def hover(self) -> str:
        """What a page shows on hover: the key, which is what makes runs comparable."""
        return f"environment key {self.key}"


def _short(value: Any) -> str | None:
    """A recorded value as display text, None when missing or not a scalar."""
    if value is None or isinstance(value, (dict, list, tuple, set)):
        return None
    text = " ".join(str(value).split())
    if not text:
        return None
    return text if len(text) <= MAX_PART_CHARS else text[: MAX_PART_CHARS - 1] + "…"


def hardware_summary(hardware: Mapping[str, Any]) -> str | None:
    """What a run ran on, in a few words: the GPU's model (with a count when there are
    several), else the CPU's model and count; None when nothing was recorded."""
    gpus = hardware.get("gpus")
    names = (
        [_short(g.get("name")) for g in gpus if isinstance(g, dict)]
        if isinstance(gpus, list)
        else []
    )
    if names and names[0]:
        return f"{len(names)}× {names[0]}" if len(names) > 1 else names[0]
    cpu = _short(hardware.get("cpu_model")) or _short(hardware.get("machine"))
    count = _short(hardware.get("cpu_count")) or _short(hardware.get("cores"))
    if cpu is None:
        return None
    return f"{cpu} ({count} CPUs)" if count else cpu


def gpu_driver(hardware: Mapping[str, Any]) -> str | None:
    """The GPU driver's version: the first field of the harness's nvidia-smi query
    (bench_runner.environment.collect_gpu asks for driver_version first)."""
    smi = hardware.get("nvidia_smi")
    first = smi[0] if isinstance(smi, list) and smi else smi
    if not isinstance(first, str):
        return None
    return _short(first.split(",")[0])


def environment_label(
    environment: Environment | None, *, key: str | None = None
) -> EnvironmentLabel:
    """The label of a run's environment; with only a key (no run of it at hand), the key."""
    if environment is None:
        if key is None:
            raise ValueError("environment_label needs an environment or a key")
        return EnvironmentLabel(key=key)
    return EnvironmentLabel(
        key=environment.key,
        name=_short(environment.name),
        hardware=hardware_summary(environment.hardware),
        driver=gpu_driver(environment.hardware),
        torch=_short(environment.software.get("torch")),
    )


def stored_environment_label(raw: Any, *, key: str) -> EnvironmentLabel:
    """The label of a stored document's `environment` object as JSON (a page reads stored
    documents unparsed); the key alone when it is not one the schema reads."""
    try:
        return environment_label(Environment.model_validate(raw))
    except ValidationError:
        return EnvironmentLabel(key=key)


__all__ = [
    "EnvironmentLabel",
    "environment_label",
    "gpu_driver",
    "hardware_summary",
    "stored_environment_label",
]
