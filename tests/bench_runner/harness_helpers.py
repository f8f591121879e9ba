"""Paths and command builders shared by the harness tests (unique name: not conftest)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench_runner.tolerances import DEFAULT_TOLERANCES
from rnx.schema import config_id

WORKLOADS = Path(__file__).parent / "workloads"
EXAMPLES = Path(__file__).parents[2] / "examples"


def prepare_cmd(runtime: str, dtype: str, batch_size: int | None, **over: Any) -> dict[str, Any]:
    tol = DEFAULT_TOLERANCES[dtype]
    cmd = {
        "op": "prepare",
        "id": config_id(runtime, dtype, batch_size),
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
