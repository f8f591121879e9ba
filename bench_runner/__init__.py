"""The benchmark harness: workloads, runtimes, correctness, timing and the environment."""

from __future__ import annotations

from bench_runner.runner import plan_configurations, run_benchmark
from bench_runner.tolerances import DEFAULT_TOLERANCES

__all__ = ["DEFAULT_TOLERANCES", "plan_configurations", "run_benchmark"]
