"""kernalin.yml: thresholds and benchmarks as code, for the harness, the action and compare."""

from __future__ import annotations

import os
import re
import reprlib
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

import yaml
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    field_validator,
)

from rnx.branches import BRANCH_PATTERN
from rnx.errors import InvalidData
from rnx.schema import (
    DTYPES,
    RUNTIMES,
    BatchSize,
    Dtype,
    GpuTimer,
    ProcessCount,
    Runtime,
    SampleCount,
    TimeBudget,
    WarmupCount,
)

CONFIG_VERSION = 1
DEFAULT_CONFIG_FILE = "kernalin.yml"


class ConfigError(InvalidData):
    """kernalin.yml, or a harness knob from the environment (RNX_THREADS), is not what it may
    be: the message names the file or variable and what to write. A domain error like the
    other InvalidData, so the contracts never raise the command line's UserError; the edges
    that show InvalidData (rnx.errors.run_command, `rnx gate`) show this one the same way."""


def _fraction(value: Any) -> Any:
    """Accept "25%", 25% written as 0.25, or "0.25"; refuse anything else with a clear message."""
    if isinstance(value, bool):
        raise ValueError("expected a percentage such as 25% or a fraction such as 0.25")
    if isinstance(value, str):
        text = value.strip()
        try:
            return float(text[:-1]) / 100 if text.endswith("%") else float(text)
        except ValueError:
            raise ValueError(f"{value!r} is not a percentage; write it like 25% or 0.25") from None
    return value


Fraction = Annotated[float, BeforeValidator(_fraction), Field(allow_inf_nan=False)]


def _fraction_or_off(value: Any) -> Any:
    """A percentage, or `off` (YAML's false too) for a check that is turned off: None."""
    if value is False or (isinstance(value, str) and value.strip().lower() == "off"):
        return None
    if value is True:
        raise ValueError("expected a percentage such as 10% or off")
    return _fraction(value)


OptionalFraction = Annotated[
    Annotated[float, Field(gt=0, le=100, allow_inf_nan=False)] | None,
    BeforeValidator(_fraction_or_off),
]

_DURATION = re.compile(r"^(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m)?(?:(\d+(?:\.\d+)?)s?)?$")


def parse_duration(value: Any) -> float:
    """Seconds from "3m", "90s", "1m30s", "1h", "0" or a number of seconds; ValueError names
    the value and how to write it."""
    if isinstance(value, bool):
        raise ValueError("expected a duration such as 3m, 90s or 1m30s")
    if isinstance(value, (int, float)):
        return float(value)
    text = str(value).strip().lower().replace(" ", "")
    found = _DURATION.match(text) if text else None
    if found is None or not any(found.groups()):
        raise ValueError(f"{str(value)[:40]!r} is not a duration; write it like 3m, 90s or 1m30s")
    h, m, sec = (float(g) if g else 0.0 for g in found.groups())
    return 3600 * h + 60 * m + sec


Duration = Annotated[float, BeforeValidator(parse_duration), Field(allow_inf_nan=False)]
DEFAULT_BUDGET_S = 180.0


def _csv_list(value: Any) -> Any:
    """Inputs arrive as "1,8" from the action and as [1, 8] from YAML: accept both."""
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return [value]
    return value


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)


class Tolerance(_Strict):
    atol: Annotated[float, Field(ge=0, allow_inf_nan=False)]
    rtol: Annotated[float, Field(ge=0, allow_inf_nan=False)]


BranchPattern = Annotated[str, StringConstraints(pattern=BRANCH_PATTERN.pattern)]


class GateSettings(_Strict):
    # rope and probability: the ranges stats.compare itself accepts.
    mode: Literal["enforce", "soft-fail", "report-only"] = "enforce"
    block_threshold: Annotated[Fraction, Field(gt=0, le=10)] = Field(0.25, alias="block-threshold")
    rope: Annotated[Fraction, Field(gt=0, lt=1)] = 0.02
    probability: Annotated[float, Field(gt=0.5, lt=1)] = 0.95
    compare: Literal["baseline", "paired"] = "baseline"
    # Which branches' pushes are uploaded as baseline candidates; None: every push is, and the
    # server's CI token alone decides (docs/configuration.md).
    baseline_branches: list[BranchPattern] | None = Field(None, alias="baseline-branches")
    # Adaptive sampling (docs/harness.md): the most wall time `rnx gate` measures one workload,
    # fixed processes included, adding processes for configurations not yet decided; 0: off.
    budget: Annotated[Duration, Field(ge=0, le=86_400)] = DEFAULT_BUDGET_S
    # Memory as a gated dimension (rnx/memory_gate.py): peak memory growth over the baseline
    # beyond these WARNs / BLOCKs; None (`off`) turns one off.
    memory_threshold: OptionalFraction = Field(0.10, alias="memory-threshold")
    memory_block_threshold: OptionalFraction = Field(None, alias="memory-block-threshold")


def _threads_from_environment() -> int | None:
    """RNX_THREADS: the machine's choice of CPU threads per worker (kernalin.yml's wins)."""
    text = os.environ.get("RNX_THREADS", "").strip()
    if not text:
        return None
    if not (text.isascii() and text.isdigit() and len(text) < 6) or int(text) < 1:
        raise ConfigError(f"RNX_THREADS={text!r}: give a whole number of threads, 1 or more")
    return int(text)


def _pin_from_environment() -> bool:
    """RNX_PIN_CPUS=0: leave the worker processes where something else placed them."""
    return os.environ.get("RNX_PIN_CPUS", "1").strip() != "0"


class HarnessSettings(_Strict):
    """How to measure (kernalin.yml `harness:`); the results document records what was asked."""

    samples: SampleCount = 30
    processes: ProcessCount = 3
    # A push measured to become a baseline run (`rnx gate` on a push, compare: baseline): its
    # processes. A baseline run serves every pull request compared with it, and its process
    # spread is half of what a head's 9 processes cannot narrow (docs/statistics.md, "Baseline
    # investment"); None: as harness.processes.
    baseline_processes: ProcessCount | None = Field(9, alias="baseline-processes")
    warmup: WarmupCount = 5
    time_budget_s: TimeBudget = Field(120.0, alias="time-budget")
    seed: int = 0
    # Per machine more than per repository: the defaults come from the environment, read here
    # and nowhere else (None: the harness picks, see bench_runner.placement).
    threads: Annotated[int, Field(ge=1, le=1024)] | None = Field(
        default_factory=_threads_from_environment
    )
    pin_cpus: bool = Field(default_factory=_pin_from_environment, alias="pin-cpus")
    # A few profiled calls per configuration after its timing (bench_runner/profiling.py), and
    # whether their Chrome traces are kept beside the results file (docs/profiles.md).
    profile: bool = True
    keep_traces: bool = Field(False, alias="keep-traces")
    # events: CUDA events around each call (what the gate's calibrations were recorded with);
    # kernels: the sum of the call's own kernels' GPU durations (CUPTI). docs/harness.md.
    gpu_timer: GpuTimer = Field("events", alias="gpu-timer")


class Benchmark(_Strict):
    workload: Annotated[str, Field(min_length=1)]
    runtimes: Annotated[list[Runtime], BeforeValidator(_csv_list), Field(min_length=1)] = Field(
        default_factory=lambda: list[Runtime](["pytorch_eager"])
    )
    batch_sizes: Annotated[
        list[BatchSize],
        BeforeValidator(_csv_list),
        Field(min_length=1),
    ] = Field(default_factory=lambda: [1], alias="batch-sizes")
    dtypes: Annotated[list[Dtype], BeforeValidator(_csv_list), Field(min_length=1)] = Field(
        default_factory=lambda: list[Dtype](["float32"])
    )
    tolerances: dict[Dtype, Tolerance] = Field(default_factory=dict)

    @field_validator("runtimes", "dtypes", "batch_sizes")
    @classmethod
    def _no_duplicates(cls, v: list[Any]) -> list[Any]:
        return list(dict.fromkeys(v))

    @property
    def batch_sizes_given(self) -> bool:
        """False when batch sizes come from the default, not from the file, a flag or an input."""
        return "batch_sizes" in self.model_fields_set


# Auto-sync's every-N bound: compare-commits lists at most 250 commits, so a larger N could
# not be counted.
MAX_SYNC_EVERY = 250


def _repository_path(value: Any) -> Any:
    """A path inside the repository: relative, without `..` (what a commit's paths are)."""
    if isinstance(value, str):
        text = value.replace("\\", "/").strip()
        parts = [p for p in text.split("/") if p not in ("", ".")]
        if text.startswith("/") or re.match(r"^[A-Za-z]:", text) or ".." in parts or not parts:
            raise ValueError(
                f"{value[:80]!r} is not a path inside the repository; write it relative to the "
                "root without '..', e.g. kernels/attention.py"
            )
        return "/".join(parts)
    return value


RepositoryPath = Annotated[str, BeforeValidator(_repository_path)]


class AutoSync(_Strict):
    """kernalin.yml `auto-sync:` (App mode, docs/auto-sync.md): the gate server benchmarks every
    new commit of `branch` that touches one of `workloads` or what it imports."""

    branch: Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_.+/-]{1,255}$")]
    # None: every workload of `benchmarks:`.
    workloads: Annotated[list[RepositoryPath], Field(min_length=1)] | None = None
    # A baseline run at least every this many commits of the branch; None: the server's
    # RNX_AUTOSYNC_EVERY; 0: never for this reason.
    every: Annotated[int, Field(ge=0, le=MAX_SYNC_EVERY)] | None = None


class KernalinConfig(_Strict):
    version: Literal[1] = 1
    gate: GateSettings = Field(default_factory=GateSettings)
    harness: HarnessSettings = Field(default_factory=HarnessSettings)
    benchmarks: list[Benchmark] = Field(default_factory=list)
    auto_sync: AutoSync | None = Field(None, alias="auto-sync")

    def synced_workloads(self) -> list[str]:
        """The paths auto-sync follows: its own list, else every benchmark's workload."""
        if self.auto_sync is None:
            return []
        if self.auto_sync.workloads is not None:
            return list(dict.fromkeys(self.auto_sync.workloads))
        paths = []
        for b in self.benchmarks:
            try:
                paths.append(_repository_path(b.workload))
            except ValueError:
                continue  # a workload outside the repository has no commits to follow
        return list(dict.fromkeys(paths))


# A bounded repr for values quoted in errors: a YAML alias bomb is a tiny file whose full
# repr is not (10 aliases of 10 aliases ... nine deep is 10**9 items).
_SHORT_REPR = reprlib.Repr()
_SHORT_REPR.maxlevel = 2


def _describe(err: ValidationError, source: str, *, key_prefix: str = "") -> str:
    problems = []
    for e in err.errors()[:5]:
        loc = key_prefix + ".".join(str(x) for x in e["loc"])
        msg = e["msg"]
        if e["type"] == "extra_forbidden":
            msg = "unknown key (check the spelling; see docs/configuration.md)"
        elif e["type"] == "string_pattern_mismatch" and "branches" in loc:
            msg = (
                f"{_SHORT_REPR.repr(e['input'])} is not a branch name or pattern; write names "
                "like main or release/* (letters, digits, . _ - + / and * only)"
            )
        elif e["type"] == "string_pattern_mismatch" and loc.endswith("auto-sync.branch"):
            msg = (
                f"{_SHORT_REPR.repr(e['input'])} is not a branch name; write one branch like "
                "main (letters, digits, . _ - + / only; no patterns)"
            )
        elif e["type"] == "literal_error":
            msg = f"{_SHORT_REPR.repr(e['input'])} is not allowed; {msg.lower()}"
        problems.append(f"{loc}: {msg}")
    return f"{source}: " + "; ".join(problems)


ConfigModel = TypeVar("ConfigModel", bound=BaseModel)


def override(
    model: ConfigModel, changes: Mapping[str, Any], *, source: str, key_prefix: str = ""
) -> ConfigModel:
    """`model` with `changes` (keys as in kernalin.yml; None leaves a value as it is) laid over
    it, checked exactly as the file's own values are: flags and action inputs use this. An
    error names the key with `key_prefix` ("--" where the keys are command-line flags)."""
    # exclude_unset: a value left to its default stays "not given" (the harness runs a workload
    # without a batch dimension at its own shapes only when no batch sizes were given).
    data = model.model_dump(by_alias=True, exclude_unset=True) | {
        k: v for k, v in changes.items() if v is not None
    }
    try:
        return type(model).model_validate(data)
    except ValidationError as e:
        raise ConfigError(_describe(e, source, key_prefix=key_prefix)) from None


def parse_config(
    data: dict[str, Any] | None, *, source: str = DEFAULT_CONFIG_FILE
) -> KernalinConfig:
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(
            f"{source}: the top level must be a mapping (version:, gate:, benchmarks:)"
        )
    version = data.get("version", CONFIG_VERSION)
    if version != CONFIG_VERSION:
        raise ConfigError(f"{source}: version {version!r} is not supported; write version: 1")
    try:
        return KernalinConfig.model_validate(data)
    except ValidationError as e:
        raise ConfigError(_describe(e, source)) from None


def load_config(path: str | Path | None) -> KernalinConfig:
    """Read kernalin.yml: no default file means defaults; a missing named file is an error."""
    if path is None:
        default = Path(DEFAULT_CONFIG_FILE)
        if not default.exists():
            return KernalinConfig()
        path = default
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise ConfigError(f"cannot read config file {path}: {e.strerror}") from None
    except UnicodeDecodeError as e:
        raise ConfigError(
            f"{path} is not UTF-8 text (byte {e.start}: {e.reason}); save it as UTF-8"
        ) from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise ConfigError(f"{path} is not valid YAML: {e}") from None
    except RecursionError:
        raise ConfigError(f"{path} nests too deeply to be a kernalin.yml") from None
    return parse_config(data, source=str(path))


__all__ = [
    "DTYPES",
    "RUNTIMES",
    "Benchmark",
    "AutoSync",
    "GateSettings",
    "HarnessSettings",
    "KernalinConfig",
    "Tolerance",
    "load_config",
    "override",
    "parse_config",
]
