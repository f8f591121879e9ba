"""The benchmark harness: workloads, runtimes, correctness, timing and the environment."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bench_runner.runner import plan_configurations, run_benchmark
    from bench_runner.tolerances import DEFAULT_TOLERANCES

__all__ = ["DEFAULT_TOLERANCES", "plan_configurations", "run_benchmark"]


def __getattr__(name: str) -> Any:
    # Imported on first use, so a module of the harness that needs no results document
    # (bench_runner.work, bench_runner.peak_probe, the GPU scripts) does not import pydantic.
    if name in ("plan_configurations", "run_benchmark"):
        from bench_runner import runner

        return getattr(runner, name)
    if name == "DEFAULT_TOLERANCES":
        from bench_runner.tolerances import DEFAULT_TOLERANCES

        return DEFAULT_TOLERANCES
    raise AttributeError(f"module 'bench_runner' has no attribute {name!r}")
