"""The worker's entry point, importable without torch: the orchestrator names it as the target
of every worker process and so never imports torch (or pays its teardown at exit) itself."""

from __future__ import annotations

import contextlib
import os
import sys
import time
import traceback
from typing import Any


def main(conn: Any, spec: dict[str, Any]) -> None:
    t0 = time.perf_counter()
    from bench_runner.worker_process import worker_main

    code = 0
    try:
        worker_main(conn, {**spec, "import_s": time.perf_counter() - t0})
    except BaseException:  # noqa: BLE001 - shown as it would be without os._exit below
        traceback.print_exc()
        code = 1
    finally:
        # Leave at once: an interpreter that imported torch, held a CUDA context and maybe a
        # pool of inductor compile workers takes seconds to tear down, and the run waits for
        # each worker to be gone before the next one times (benchmarks/harness/harness_budget.py
        # prints how long closing takes). Nothing of the worker's needs finalising: it writes
        # no files, and the driver releases the GPU when the process ends.
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):
                stream.flush()
        os._exit(code)
