"""The compiler's modules imported in the background while a spawned worker checks eager code.

torch.compile and the ONNX exporter import torch._dynamo and inductor on first use: 2-4 s per
process on the H200 machine (session 1 of issue 14: 5.8 s for a worker's first compiled
configuration, of which 1.9 s compiling). A CPU run's workers fork from a server that imported
them already (bench_runner.worker_pool); a spawned worker (a GPU run) starts this thread right after
it said hello, and a build that needs the compiler waits for it first, so the two threads never
import the compiler's modules at the same time.
"""

from __future__ import annotations

import contextlib
import importlib
import sys
import threading
import time

_thread: threading.Thread | None = None


def start(modules: list[str]) -> None:
    """Import `modules` in a daemon thread, unless they are imported already (a fork)."""
    global _thread
    missing = [m for m in modules if m not in sys.modules]
    if not missing or _thread is not None:
        return

    def run() -> None:
        for name in missing:
            # A module that fails here fails again, with its message, where it is needed.
            with contextlib.suppress(Exception):
                importlib.import_module(name)

    _thread = threading.Thread(target=run, name="rnx-preload-compiler", daemon=True)
    _thread.start()


def wait() -> int:
    """Wait for the background imports; the nanoseconds waited (0 when none were running)."""
    if _thread is None or not _thread.is_alive():
        return 0
    t0 = time.perf_counter_ns()
    _thread.join()
    return time.perf_counter_ns() - t0
