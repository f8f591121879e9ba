"""The results document: one versioned model the harness writes and the server and action read."""

from __future__ import annotations

import json
import uuid
from datetime import datetime, timedelta, timezone
from functools import cached_property
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    field_validator,
    model_validator,
)

import stats
from rnx.branches import MAX_BRANCH_CHARS, branch_name_problem
from rnx.errors import InvalidData

SCHEMA_VERSION = 1
SUPPORTED_VERSIONS = (1,)
MAX_CONFIGURATIONS = 48
MAX_SAMPLES_PER_SIDE = 100_000

# Bounds shared by kernalin.yml (what a run may ask for: rnx.config.HarnessSettings) and the
# results document (what a run was asked for: Settings below), defined once here.
# Fewer samples than the statistics need can never decide a comparison.
MIN_SAMPLES = stats.MIN_SAMPLES
MAX_SAMPLES = 10_000
MAX_PROCESSES = 64
MAX_WARMUP = 10_000
MAX_TIME_BUDGET_S = 86_400.0
MAX_BATCH_SIZE = 1_000_000
SampleCount = Annotated[int, Field(ge=MIN_SAMPLES, le=MAX_SAMPLES)]
ProcessCount = Annotated[int, Field(ge=1, le=MAX_PROCESSES)]
WarmupCount = Annotated[int, Field(ge=0, le=MAX_WARMUP)]
TimeBudget = Annotated[float, Field(gt=0, le=MAX_TIME_BUDGET_S, allow_inf_nan=False)]
BatchSize = Annotated[int, Field(ge=1, le=MAX_BATCH_SIZE)]

Runtime = Literal["pytorch_eager", "torch_compile", "onnxruntime", "tensorrt"]
Dtype = Literal["float32", "tf32", "float16", "bfloat16", "float64"]
Status = Literal["ok", "unsupported", "diverged", "error"]
RUNTIMES: tuple[str, ...] = ("pytorch_eager", "torch_compile", "onnxruntime", "tensorrt")
DTYPES: tuple[str, ...] = ("float32", "tf32", "float16", "bfloat16", "float64")

# How a GPU configuration is timed (kernalin.yml harness.gpu-timer): `events` reads CUDA events
# around each call (kernels, the GPU's gaps between them, the events' own few us); `kernels`
# sums the GPU durations of the call's own kernels (CUPTI). They read different things, so the
# gate never compares one with the other (rnx/verdict.py).
GpuTimer = Literal["events", "kernels"]
GPU_TIMERS: tuple[str, ...] = ("events", "kernels")
# details.timing_method of a configuration: the clock that produced its samples.
CPU_METHOD = "perf_counter_ns"
EVENTS_METHOD = "cuda_events+busy_stream+l2_flush"
KERNELS_METHOD = "cupti_kernel_sum+l2_flush"
TIMING_METHODS: tuple[str, ...] = (CPU_METHOD, EVENTS_METHOD, KERNELS_METHOD)

# Names that end up in URLs, SQL parameters, file names and HTML: keep them to what GitHub allows.
Repository = Annotated[
    str, StringConstraints(pattern=r"^[A-Za-z0-9_.-]{1,100}/[A-Za-z0-9_.-]{1,100}$")
]
Sha = Annotated[str, StringConstraints(pattern=r"^[0-9a-fA-F]{4,64}$")]
EnvironmentKey = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_.:-]{1,128}$")]
Sha256 = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")]
NonNegFloat = Annotated[float, Field(ge=0, allow_inf_nan=False)]
# One sample longer than a day is a broken timer, not a measurement.
SampleNs = Annotated[int, Field(gt=0, le=86_400 * 10**9, strict=True)]

# PostgreSQL's integer column, and GitHub's own pull request numbers, stop at 2**31 - 1.
MAX_PR_NUMBER = 2**31 - 1
# A run's created_at: after this and at most this far ahead of the reader's clock. Outside it
# is a broken clock, and dates near year 1 or 9999 overflow once moved to UTC.
EARLIEST_CREATED_AT = datetime(2000, 1, 1, tzinfo=timezone.utc)
CREATED_AT_LEEWAY = timedelta(days=1)


def _check_branch(name: str) -> str:
    """Git's own rules for branch names (rnx/branches.py), so a branch is never a path trick
    nor a look-alike of another."""
    problem = branch_name_problem(name)
    if problem is not None:
        raise ValueError(problem)
    return name


def check_created_at(value: datetime, *, now: datetime | None = None) -> datetime:
    """`value` in UTC (a time without an offset is UTC), when it lies in the window."""
    value = value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value
    if value < EARLIEST_CREATED_AT:
        raise ValueError(
            f"{value.isoformat()} is before {EARLIEST_CREATED_AT.date()}: the runner's clock "
            "is wrong; write the run's real UTC time"
        )
    latest = (now or datetime.now(timezone.utc)) + CREATED_AT_LEEWAY
    if value > latest:
        raise ValueError(
            f"{value.isoformat()} is more than a day in the future: the runner's clock is "
            "wrong; write the run's real UTC time"
        )
    return value.astimezone(timezone.utc)


Branch = Annotated[str, Field(min_length=1, max_length=MAX_BRANCH_CHARS)]


class _Model(BaseModel):
    # Unknown fields are refused: a typo in a hand-written document must not vanish silently.
    model_config = ConfigDict(extra="forbid", frozen=True)


class GitRef(_Model):
    branch: Branch
    sha: Sha
    event: Annotated[str, StringConstraints(pattern=r"^[a-z_]{1,64}$")] = "push"
    pr_number: Annotated[int, Field(ge=1, le=MAX_PR_NUMBER)] | None = None
    base_branch: Branch | None = None
    base_sha: Sha | None = None

    @field_validator("branch", "base_branch")
    @classmethod
    def _branch_ok(cls, v: str | None) -> str | None:
        return v if v is None else _check_branch(v)

    @property
    def is_pull_request(self) -> bool:
        return self.pr_number is not None or self.event.startswith("pull_request")


class Environment(_Model):
    """Where the run happened. `key` groups comparable runs; the details are shown, never hidden."""

    key: EnvironmentKey
    name: Annotated[str, Field(max_length=200)] | None = None
    hardware: dict[str, Any] = Field(default_factory=dict)
    runner: dict[str, Any] = Field(default_factory=dict)
    software: dict[str, Any] = Field(default_factory=dict)


class Workload(_Model):
    path: Annotated[str, Field(min_length=1, max_length=1000)]
    sha256: Sha256
    # Paired mode: the base version of the workload (another file or checkout).
    base_path: Annotated[str, Field(max_length=1000)] | None = None
    base_sha256: Sha256 | None = None

    @field_validator("path", "base_path")
    @classmethod
    def _no_control_chars(cls, v: str | None) -> str | None:
        if v is not None and any(ord(c) < 32 for c in v):
            raise ValueError("a workload path must not contain control characters")
        return v


class Settings(_Model):
    """What the harness was asked to run: a record in the document, not settings (those are
    kernalin.yml's `harness:`), bounded exactly as kernalin.yml bounds them. A configuration
    may hold fewer samples than asked for (a time budget spent, a crash)."""

    samples: SampleCount
    warmup: WarmupCount
    rounds: Annotated[int, Field(ge=1, le=MAX_SAMPLES_PER_SIDE)]
    processes: ProcessCount
    mode: Literal["single", "paired"] = "single"
    seed: int = 0
    time_budget_s: TimeBudget | None = None
    # Documents written before the choice existed were timed with events.
    gpu_timer: GpuTimer = "events"


class Correctness(_Model):
    passed: bool
    trials: Annotated[int, Field(ge=0)]
    atol: NonNegFloat
    rtol: NonNegFloat
    max_abs_error: NonNegFloat | None = None
    max_rel_error: NonNegFloat | None = None
    # Human-readable failures ("output ignores input 1", "input 0 was modified", ...).
    failures: list[str] = Field(default_factory=list)


class BuildTime(_Model):
    """Time spent before timing (compile, export, engine build): never mixed into the samples."""

    compile_ns: Annotated[int, Field(ge=0)] | None = None
    export_ns: Annotated[int, Field(ge=0)] | None = None
    engine_ns: Annotated[int, Field(ge=0)] | None = None


class Samples(_Model):
    """Column-wise samples: ns[i] was measured in round[i] by worker process[i]."""

    ns: list[SampleNs]
    round: list[Annotated[int, Field(ge=0)]]
    process: list[Annotated[int, Field(ge=0)]]

    @model_validator(mode="after")
    def _same_length(self) -> Samples:
        if not (len(self.ns) == len(self.round) == len(self.process)):
            raise ValueError(
                f"samples.ns, samples.round and samples.process must have one entry per sample "
                f"(got {len(self.ns)}, {len(self.round)}, {len(self.process)})"
            )
        if len(self.ns) > MAX_SAMPLES_PER_SIDE:
            raise ValueError(f"at most {MAX_SAMPLES_PER_SIDE} samples per side")
        return self

    def by_process(self) -> list[list[int]]:
        """The times of each worker process, in process order."""
        return [list(g) for g in self.process_times]

    @property
    def process_times(self) -> tuple[tuple[int, ...], ...]:
        """by_process, immutable, worked out once per parsed document: the server re-gates every
        upload against the same parsed baseline documents (gate_server/domain/stored_documents.py),
        and grouping their samples again each time was a tenth of the re-gate. A copy with other
        samples (model_copy(update=...) copies the kept groups too) works them out again."""
        ns, process, groups, _ = self.grouped
        if ns is self.ns and process is self.process:
            return groups
        return _grouped_by_process(self.ns, self.process)

    @property
    def process_arrays(self) -> tuple[Any, ...]:
        """process_times as read-only float64 arrays (stats.frozen_groups), kept the same way:
        the statistics convert every group to one, and numpy takes arrays 2-3 times as fast as
        tuples of ints."""
        ns, process, _, arrays = self.grouped
        if ns is self.ns and process is self.process:
            return arrays
        return stats.frozen_groups(_grouped_by_process(self.ns, self.process))

    @cached_property
    def grouped(self) -> tuple[list[int], list[int], tuple[tuple[int, ...], ...], tuple[Any, ...]]:
        """process_times and process_arrays, kept with the very lists they were worked out
        from."""
        groups = _grouped_by_process(self.ns, self.process)
        return self.ns, self.process, groups, stats.frozen_groups(groups)


def _grouped_by_process(ns: list[int], process: list[int]) -> tuple[tuple[int, ...], ...]:
    """The times of each worker process, in process order."""
    groups: dict[int, list[int]] = {}
    for t, p in zip(ns, process, strict=True):
        found = groups.get(p)
        if found is None:
            groups[p] = [t]
        else:
            found.append(t)
    return tuple(tuple(groups[p]) for p in sorted(groups))


class Work(_Model):
    """What one call does (bench_runner/work.py): FLOPs and the bytes that must move at least
    once (inputs and weights read, outputs written). "counted" on the eager Model, or
    "declared" by the workload's get_flops/get_bytes."""

    flops: Annotated[int, Field(ge=0)] | None = None
    bytes: Annotated[int, Field(ge=0)] | None = None
    flops_source: Literal["counted", "declared"] | None = None
    bytes_source: Literal["counted", "declared"] | None = None
    # Where the count ran: "meta" (shapes only) or the device the model ran on once.
    counted_on: Annotated[str, Field(max_length=20)] | None = None
    note: Annotated[str, Field(max_length=2000)] | None = None


PositiveFloat = Annotated[float, Field(gt=0, allow_inf_nan=False)]


class SpeedOfLight(_Model):
    """The roofline score of the median time (rnx/roofline.py): roofline_s / measured_s, 1.0
    at the limit. Shown next to a verdict, never part of it."""

    score: NonNegFloat
    bound: Literal["compute", "memory"]
    roofline_s: PositiveFloat
    measured_s: PositiveFloat
    peak_flops: PositiveFloat | None = None  # FLOP/s for the configuration's dtype
    peak_bandwidth: PositiveFloat | None = None  # bytes per second
    peak_source: Literal["table", "measured"]
    peak_part: Annotated[str, Field(max_length=200)]
    # score above rnx.roofline.BEYOND_ROOFLINE_TOLERANCE: a measurement or counting problem.
    beyond_roofline: bool = False


# ---- Profiles and memory (bench_runner/profiling.py): what a configuration spent its time
# and memory on. Names come from the workload's kernels and operators: untrusted text, bounded
# in count and length, shown as text and never as markup.
MAX_PROFILE_ROWS = 30
MAX_PROFILE_NAME = 160
MAX_OPERATOR_KERNELS = 3
_NO_CONTROL = r"^[^\x00-\x1f\x7f]+$"
ProfileName = Annotated[
    str, StringConstraints(min_length=1, max_length=MAX_PROFILE_NAME, pattern=_NO_CONTROL)
]
TraceName = Annotated[str, StringConstraints(max_length=300, pattern=r"^[A-Za-z0-9_.-]+$")]
# Per call: a count or nanoseconds; more than a day per call is not a measurement.
PerCall = Annotated[float, Field(ge=0, le=86_400e9, allow_inf_nan=False)]
Share = Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)]
Bytes = Annotated[int, Field(ge=0, le=1 << 50)]


class OperatorProfile(_Model):
    """One operator, per call of the configuration: how often it ran, its self time (device
    time of the kernels it launched on a GPU, CPU self time on the CPU) and its kernels."""

    name: ProfileName
    calls: PerCall
    self_ns: PerCall
    share: Share
    launches: PerCall = 0.0
    kernels: Annotated[list[ProfileName], Field(max_length=MAX_OPERATOR_KERNELS)] = Field(
        default_factory=list
    )


class KernelProfile(_Model):
    """One device kernel (or copy), per call: launches and device time."""

    name: ProfileName
    launches: PerCall
    ns: PerCall
    share: Share


class Profile(_Model):
    """A few profiled calls of a configuration after its timing (docs/profiles.md)."""

    source: Literal["torch.profiler", "onnxruntime"]
    # What self_ns measures: "device" (kernel time on a GPU) or "cpu" (CPU self time).
    time_basis: Literal["device", "cpu"]
    calls: Annotated[int, Field(ge=1, le=1000)]
    total_ns: PerCall  # the operators' self times summed, per call (the shares' whole)
    launches_per_call: PerCall = 0.0
    kernel_ns: PerCall | None = None  # the kernels' device time summed, per call (GPU only)
    # The timed median per call, and 1 - kernel_ns / median: time the GPU was not running a
    # kernel of this configuration (launch overhead, host work, gaps), GPU only.
    timed_median_ns: PerCall | None = None
    host_share: Share | None = None
    operators: Annotated[list[OperatorProfile], Field(max_length=MAX_PROFILE_ROWS)] = Field(
        default_factory=list
    )
    kernels: Annotated[list[KernelProfile], Field(max_length=MAX_PROFILE_ROWS)] = Field(
        default_factory=list
    )
    # What the row caps left out: rows and their time per call.
    other_rows: Annotated[int, Field(ge=0, le=1_000_000)] = 0
    other_ns: PerCall = 0.0
    # The kept Chrome trace's file name (harness.keep-traces), beside the results file.
    trace: TraceName | None = None


class Memory(_Model):
    """Memory during a few calls after timing (bench_runner/profiling.py, docs/profiles.md).

    peak_allocated_bytes is the gated figure: the most memory the calls held at once beyond what
    was allocated before them. On a GPU: torch.cuda.max_memory_allocated over the calls less
    held_bytes (weights, inputs and the harness's L2-flush buffer). On the CPU: from the
    profiler's allocation events, since the process's resident set is mostly the interpreter
    and torch."""

    device: Literal["cuda", "cpu"]
    peak_allocated_bytes: Bytes
    held_bytes: Bytes | None = None  # allocated before the calls (GPU)
    peak_reserved_bytes: Bytes | None = None  # the caching allocator's peak (GPU)
    # (peak reserved - peak allocated) / peak reserved: memory the allocator held but no
    # tensor used at the peak ("stranded" by fragmentation or caching).
    reserved_unallocated_share: Share | None = None
    rss_growth_bytes: Bytes | None = None  # CPU: VmHWM growth over the calls, Linux only


class Configuration(_Model):
    runtime: Runtime
    dtype: Dtype
    # None: the workload has no batch dimension and ran at its own shapes (id .../native).
    batch_size: BatchSize | None
    status: Status
    reason: Annotated[str, Field(max_length=20_000)] | None = None
    correctness: Correctness | None = None
    build: BuildTime = Field(default_factory=BuildTime)
    samples: Samples | None = None
    base_samples: Samples | None = None  # paired mode only
    # Runtime specifics: graph breaks, execution provider, timing method, launch overhead...
    details: dict[str, Any] = Field(default_factory=dict)
    # Optional (documents written before them parse): the work and the speed-of-light score.
    work: Work | None = None
    speed_of_light: SpeedOfLight | None = None
    # Optional too: the profile and memory of a few calls after timing (head's; base_* in
    # paired mode, measured in the same process).
    profile: Profile | None = None
    memory: Memory | None = None
    base_profile: Profile | None = None
    base_memory: Memory | None = None

    @property
    def id(self) -> str:
        return config_id(self.runtime, self.dtype, self.batch_size)

    @property
    def timing_method(self) -> str | None:
        """The clock its samples came from (None: not recorded, as for a configuration that was
        never timed)."""
        method = self.details.get("timing_method")
        return method if isinstance(method, str) else None

    @model_validator(mode="after")
    def _status_consistent(self) -> Configuration:
        if self.status != "ok" and not self.reason:
            raise ValueError(f"configuration {self.id} has status {self.status!r} but no reason")
        method = self.details.get("timing_method")
        if method is not None and method not in TIMING_METHODS:
            raise ValueError(
                f"configuration {self.id}: details.timing_method {str(method)[:80]!r} is not "
                f"one of {', '.join(TIMING_METHODS)}"
            )
        return self


NATIVE_SHAPES = "native"


def config_id(runtime: str, dtype: str, batch_size: int | None) -> str:
    """runtime/dtype/bsN, or runtime/dtype/native for a workload run at its own shapes."""
    return f"{runtime}/{dtype}/{NATIVE_SHAPES if batch_size is None else f'bs{batch_size}'}"


class Tool(_Model):
    name: str = "rnx-benchmark"
    version: str = "0"


class ResultsDocument(_Model):
    schema_version: Literal[1] = 1
    run_id: uuid.UUID
    created_at: datetime = Field(default_factory=lambda: datetime.now(timezone.utc))
    repository: Repository
    git: GitRef
    environment: Environment
    workload: Workload
    settings: Settings
    configurations: Annotated[
        list[Configuration], Field(min_length=1, max_length=MAX_CONFIGURATIONS)
    ]
    tool: Tool = Field(default_factory=Tool)

    @field_validator("created_at")
    @classmethod
    def _created_at_in_window(cls, v: datetime) -> datetime:
        return check_created_at(v)

    @model_validator(mode="after")
    def _unique_configurations(self) -> ResultsDocument:
        seen: set[str] = set()
        for c in self.configurations:
            if c.id in seen:
                raise ValueError(f"configuration {c.id} appears twice")
            seen.add(c.id)
            if self.settings.mode == "single" and c.base_samples is not None:
                raise ValueError(f"configuration {c.id} has base_samples but mode is 'single'")
        return self

    def to_json(self, *, indent: int | None = None) -> str:
        return self.model_dump_json(indent=indent)

    @property
    def by_id(self) -> dict[str, Configuration]:
        """The configurations by id (unique within a document), worked out once per parsed
        document: the server compares every upload with the same parsed baselines, and
        indexing them again each time was a third of evaluate's own planning (about 40 us of
        CPU per upload of 8 configurations against 6 baselines). A copy with other
        configurations (model_copy(update=...) copies the kept index too) indexes them anew."""
        configurations, index = self.indexed
        if configurations is self.configurations:
            return index
        return {c.id: c for c in self.configurations}

    @cached_property
    def indexed(self) -> tuple[list[Configuration], dict[str, Configuration]]:
        """by_id, kept with the very list it was worked out from."""
        return self.configurations, {c.id: c for c in self.configurations}


# ---- The gate's answer: shared by `rnx compare`, the server's reply and the action's reports.

Verdict = Literal["faster", "slower", "equivalent", "undecided", "broken", "no-baseline", "skipped"]
Tier = Literal["PASS", "WARN", "BLOCK"]


class ConfigComparison(_Model):
    id: str
    runtime: Runtime
    dtype: Dtype
    batch_size: int | None
    status: Status
    verdict: Verdict
    reason: str | None = None
    base_median_ns: float | None = None
    head_median_ns: float | None = None
    ratio: float | None = None
    low: float | None = None
    high: float | None = None
    p_slower: float | None = None
    p_faster: float | None = None
    p_equivalent: float | None = None
    p_block: float | None = None  # P(ratio > 1 + block threshold)
    # The smallest slowdown (a fraction) these data could call credible (stats.Comparison's):
    # a change below it is below what this runner resolves.
    resolution: float | None = None
    base_samples: int = 0
    head_samples: int = 0
    # The head's speed-of-light score, and the baseline's (its first run with this
    # configuration): shown next to the verdict, never part of it.
    speed_of_light: SpeedOfLight | None = None
    base_speed_of_light: SpeedOfLight | None = None
    # What moved in the profile (WARN/BLOCK configurations, or all on request): explains,
    # never decides. memory: peak memory and launches base -> head, where both sides have them.
    explanation: list[ProfileChange] = Field(default_factory=list)
    memory: MemoryChange | None = None


class ProfileChange(_Model):
    """One row of a profile diff (rnx/profile_diff.py): what moved between base and head."""

    kind: Literal["operator", "kernel", "host"]
    name: Annotated[str, Field(max_length=MAX_PROFILE_NAME)]
    delta_ns: float
    text: Annotated[str, Field(max_length=2000)]


class MemoryChange(_Model):
    """Peak memory base -> head (rnx/memory_gate.py); tier: what it asks of the gate."""

    base_bytes: int
    head_bytes: int
    growth: float | None  # (head - base) / base; None where base is 0
    tier: Tier
    base_launches: float | None = None
    head_launches: float | None = None


class Inconclusive(_Model):
    """A run that could not have seen a block-sized slowdown (rnx.verdict.inconclusive): its
    undecided configurations resolve only changes wider than the block threshold."""

    resolution: float  # the widest of them: changes under it cannot be seen
    block_threshold: float
    configurations: list[str]


class GateReport(_Model):
    tier: Tier
    reasons: list[str]
    comparisons: list[ConfigComparison]
    baseline_run_ids: list[uuid.UUID] = Field(default_factory=list)
    # Set on a PASS or WARN that could not have seen a block-sized slowdown: every surface
    # (the log's headline, the PR comment, the job summary, the run page) says so.
    inconclusive: Inconclusive | None = None


# ---- Reading documents: one place that turns bytes into a model or one clear error.


def _format_errors(err: ValidationError, limit: int = 5) -> str:
    parts = []
    for e in err.errors()[:limit]:
        loc = ".".join(str(x) for x in e["loc"]) or "(document)"
        parts.append(f"{loc}: {e['msg']}")
    more = len(err.errors()) - limit
    if more > 0:
        parts.append(f"... and {more} more")
    return "; ".join(parts)


def validation_details(err: ValidationError, limit: int = 20) -> list[dict[str, str]]:
    return [
        {"field": ".".join(str(x) for x in e["loc"]) or "(document)", "problem": e["msg"]}
        for e in err.errors()[:limit]
    ]


class InvalidDocument(InvalidData):
    """A results document that does not parse or validate; `details` name the fields."""


def parse_results(
    data: bytes | str | dict[str, Any], *, source: str = "document"
) -> ResultsDocument:
    """Parse and validate a results document, refusing versions this code does not know."""
    if isinstance(data, (bytes, str)):
        try:
            raw = json.loads(data, parse_constant=_refuse_constant)
        except (ValueError, RecursionError) as e:
            raise InvalidDocument(f"{source} is not valid JSON: {e}") from None
    else:
        raw = data
    if not isinstance(raw, dict):
        raise InvalidDocument(f"{source} must be a JSON object, got {type(raw).__name__}")
    version = raw.get("schema_version")
    if version not in SUPPORTED_VERSIONS:
        raise InvalidDocument(
            f"{source} has schema_version {version!r}; this rnx-benchmark reads version "
            f"{', '.join(map(str, SUPPORTED_VERSIONS))}. Upgrade rnx-benchmark (or write the "
            f"document with a matching version)."
        )
    try:
        return ResultsDocument.model_validate(raw)
    except ValidationError as e:
        raise InvalidDocument(
            f"{source} is not a valid results document: {_format_errors(e)}",
            validation_details(e),
        ) from None


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not allowed in a results document")


def load_results(path: str) -> ResultsDocument:
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise InvalidDocument(f"cannot read results file {path}: {e.strerror}") from None
    return parse_results(data, source=path)


def json_schema() -> dict[str, Any]:
    return ResultsDocument.model_json_schema()
