"""The one small protocol every runtime implements, and what a prepared configuration offers."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import torch

from bench_runner.profiling import OwnProfile
from bench_runner.workload import OnnxWorkload, PythonWorkload


@dataclass
class Subject:
    """What a runtime builds from for one (dtype, batch size): everything already rounded/placed."""

    workload: PythonWorkload | OnnxWorkload
    dtype: str
    torch_dtype: torch.dtype
    device: torch.device
    batch_size: int | None  # None: the workload's own shapes
    threads: int
    example_inputs: list[Any]
    module: torch.nn.Module | None = None  # Python workloads: the candidate, in dtype, on device
    onnx_model: Any | None = None  # .onnx workloads: the graph retyped to dtype
    notes: dict[str, Any] = field(default_factory=dict)  # recorded in the configuration's details


@dataclass
class Prepared:
    """A built configuration.

    run(inputs) -> outputs is used by the correctness checks (conversions allowed, not timed);
    bind(inputs) returns a zero-argument call with every conversion done ahead, which is what
    the timer measures. timer names the clock: "cpu" (perf_counter_ns) or "cuda" (events on the
    current stream: a runtime working on a stream of its own joins it to the current one).
    """

    run: Callable[[list[Any]], list[torch.Tensor]]
    bind: Callable[[list[Any]], Callable[[], object]]
    timer: str
    build: dict[str, int] = field(default_factory=dict)
    details: dict[str, Any] = field(default_factory=dict)
    before_timing: Callable[[], None] | None = None
    # The checks poison fresh memory through deterministic mode's NaN fill; a program guarded on
    # that mode (torch.compile) would be recompiled by it, and the checked program would not be
    # the timed one: such a runtime sets False and relies on recycled NaN blocks (CUDA) alone.
    deterministic_fill: bool = True
    # Graph capture is only safe for pure PyTorch work on the current stream.
    graph_capturable: bool = False
    # A runtime whose operators torch.profiler cannot see offers its own profiler:
    # own_profiler(inputs, calls, trace_path) profiles `calls` calls of the bound call on these
    # inputs (bench_runner/profiling.py: OwnProfile), its raw Chrome trace kept at trace_path.
    own_profiler: Callable[[list[Any], int, Path | None], OwnProfile] | None = None


class Runtime(Protocol):
    name: str

    def unavailable(self) -> str | None:
        """None when the runtime can run here, else why not (missing package, no GPU...)."""

    def prepare(self, subject: Subject) -> Prepared:
        """Build the configuration; raise Unsupported for a combination it cannot do."""
