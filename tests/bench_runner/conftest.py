"""Fixtures for the harness tests: run one configuration in-process, fast."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from bench_runner.worker_process import Side, configure_process
from tests.bench_runner.harness_helpers import prepare_cmd


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
        batch_size: int | None = 8,
        **over: Any,
    ) -> dict[str, Any]:
        side = Side(path=str(path), device=torch.device("cpu"), threads=1, seed=0)
        side.load()
        return side.prepare(prepare_cmd(runtime, dtype, batch_size, **over))

    return run
