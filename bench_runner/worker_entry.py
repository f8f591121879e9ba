"""The worker's entry point, importable without torch: the orchestrator names it as the target
of every worker process and so never imports torch (or pays its teardown at exit) itself."""

from __future__ import annotations

from typing import Any


def main(conn: Any, spec: dict[str, Any]) -> None:
    from bench_runner.worker import worker_main

    worker_main(conn, spec)
