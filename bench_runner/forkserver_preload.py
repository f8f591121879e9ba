"""Imported only by the fork server that CPU runs fork their workers from
(bench_runner.worker_pool).

It brings torch and the worker code into the server once, so every worker starts without
importing them. And it makes the server's own exit immediate: a server that imported torch
spends about a second tearing it down when its parent exits, while still holding the parent's
stdout and stderr, so whoever waits for those (a CI step, subprocess.run) waits for it too.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import sys

import bench_runner.worker_process  # noqa: F401 - the point of this module


def _exit_now() -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(0)


atexit.register(_exit_now)
