"""Helpers for the harness tests: run one configuration in-process, fast."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from bench_runner.tolerances import DEFAULT_TOLERANCES
from bench_runner.worker import Side, configure_process

WORKLOADS = Path(__file__).parent / "workloads"
EXAMPLES = Path(__file__).parents[2] / "examples"


def prepare_cmd(runtime: str, dtype: str, batch_size: int, **over: Any) -> dict[str, Any]:
    tol = DEFAULT_TOLERANCES[dtype]
    cmd = {
        "op": "prepare",
        "id": f"{runtime}/{dtype}/bs{batch_size}",
        "runtime": runtime,
        "dtype": dtype,
        "batch_size": batch_size,
        "check": True,
        "atol": tol.atol,
        "rtol": tol.rtol,
        "trials": 3,
        "warmup": 1,
        "warmup_budget_ns": 2e7,
        "target_sample_ns": 1e5,
        "max_sample_ns": 1e6,
    }
    cmd.update(over)
    return cmd


@pytest.fixture(scope="session")
def cpu_process() -> None:
    configure_process(1, torch.device("cpu"))


@pytest.fixture
def prepare(cpu_process: None):
    """prepare(path, runtime, dtype, batch_size) -> the worker's answer, run in this process."""

    def run(
        path: str | Path,
        runtime: str = "pytorch_eager",
        dtype: str = "float32",
        batch_size: int = 8,
        **over: Any,
    ) -> dict[str, Any]:
        side = Side(path=str(path), device=torch.device("cpu"), threads=1, seed=0)
        side.load()
        return side.prepare(prepare_cmd(runtime, dtype, batch_size, **over))

    return run
