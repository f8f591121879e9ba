"""Paths and command builders shared by the harness tests (unique name: not conftest)."""

from __future__ import annotations

from pathlib import Path

from bench_runner.worker_process import in_process_command as prepare_cmd

WORKLOADS = Path(__file__).parent / "workloads"
EXAMPLES = Path(__file__).parents[2] / "examples"

__all__ = ["EXAMPLES", "WORKLOADS", "prepare_cmd"]
