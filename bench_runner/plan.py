"""What a run measures: its configurations, sides, samples and worker processes."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, replace
from typing import Any

from rnx.config import Benchmark, HarnessSettings, Tolerance
from rnx.errors import UserError
from rnx.schema import MAX_CONFIGURATIONS, config_id

CORRECTNESS_TRIALS = 3


@dataclass(frozen=True)
class ConfigSpec:
    runtime: str
    dtype: str
    batch_size: int | None  # None: the workload's own shapes (it has no batch dimension)

    @property
    def id(self) -> str:
        return config_id(self.runtime, self.dtype, self.batch_size)


def build_command(spec: ConfigSpec, tol: Tolerance, *, check: bool) -> dict[str, Any]:
    """The command that has a worker build one configuration (and check it when asked)."""
    return {
        "op": "build",
        "id": spec.id,
        "runtime": spec.runtime,
        "dtype": spec.dtype,
        "batch_size": spec.batch_size,
        "check": check,
        "atol": tol.atol,
        "rtol": tol.rtol,
        "trials": CORRECTNESS_TRIALS,
    }


def warm_command(
    config: str,
    *,
    warmup: int,
    warmup_budget_ns: float,
    target_sample_ns: float,
    max_sample_ns: float,
) -> dict[str, Any]:
    """The command that has a worker warm a built configuration up and size its samples."""
    return {
        "op": "warm",
        "id": config,
        "warmup": warmup,
        "warmup_budget_ns": warmup_budget_ns,
        "target_sample_ns": target_sample_ns,
        "max_sample_ns": max_sample_ns,
    }


def plan_configurations(benchmark: Benchmark, *, native: bool = False) -> list[ConfigSpec]:
    """runtimes x dtypes x batch sizes; native=True: runtimes x dtypes at the workload's shapes."""
    sizes: list[int | None] = [None] if native else list(benchmark.batch_sizes)
    configs = [
        ConfigSpec(r, d, b)
        for r, d, b in itertools.product(benchmark.runtimes, benchmark.dtypes, sizes)
    ]
    if len(configs) > MAX_CONFIGURATIONS:
        raise UserError(
            f"{benchmark.workload}: {len(benchmark.runtimes)} runtimes x {len(benchmark.dtypes)} "
            f"dtypes x {len(sizes)} batch sizes = {len(configs)} configurations; "
            f"at most {MAX_CONFIGURATIONS} per run. Drop some runtimes, dtypes or batch sizes, "
            f"or split the benchmark into several entries"
        )
    return configs


@dataclass(frozen=True)
class Plan:
    configs: list[ConfigSpec]
    sides: dict[str, str]  # side -> workload path
    samples: int  # rounds: one sample per configuration and side in each
    processes: int
    harness: HarnessSettings
    benchmark: Benchmark
    device: str  # "cpu", "cuda[:N]" or "auto" (the worker resolves it)
    threads: int

    def slot_rounds(self, slot: int) -> range:
        """Contiguous blocks of rounds per worker process, as even as possible."""
        lo = slot * self.samples // self.processes
        hi = (slot + 1) * self.samples // self.processes
        return range(lo, hi)

    def at_native_shapes(self) -> Plan:
        """The same plan for a workload without a batch dimension: one shape per runtime x dtype."""
        return replace(self, configs=plan_configurations(self.benchmark, native=True))

    def with_samples(self, samples: int) -> Plan:
        return replace(self, samples=samples)
