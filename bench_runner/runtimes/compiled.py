"""torch_compile: dynamo reset per configuration, compile time apart, graph breaks recorded."""

from __future__ import annotations

import itertools
import time
from typing import Any

import torch

from bench_runner.errors import ConfigFailure, Unsupported
from bench_runner.runtimes.base import Prepared, Subject
from bench_runner.runtimes.eager import module_runner

_ids = itertools.count()


def _next_id() -> int:
    return next(_ids)


def _fresh_entry_point(module: Any, n: int) -> Any:
    """A function calling `module` whose code object is new: dynamo caches per code object."""

    def entry(*args: Any) -> Any:
        return module(*args)

    entry.__code__ = entry.__code__.replace(co_name=f"rnx_config_{n}")
    return entry


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


class TorchCompile:
    name = "torch_compile"

    def unavailable(self) -> str | None:
        try:
            import torch._dynamo  # noqa: F401
        except Exception as e:  # noqa: BLE001 - any import problem makes it unavailable
            return f"torch._dynamo cannot be imported ({e})"
        return None

    def prepare(self, subject: Subject) -> Prepared:
        if subject.module is None:
            raise Unsupported(
                "an .onnx workload runs on onnxruntime or tensorrt, not torch_compile"
            )
        import torch._dynamo
        from torch._dynamo.utils import counters

        # Every configuration gets a fresh entry point (its own code object, so its own dynamo
        # cache and recompile budget) and a fresh counters window. A global
        # torch._dynamo.reset() here would also drop the configurations compiled before this
        # one in the same worker, and they are timed later, interleaved with this one.
        torch._dynamo.config.error_on_recompile = False
        for limit in ("recompile_limit", "cache_size_limit", "accumulated_recompile_limit"):
            if hasattr(torch._dynamo.config, limit):
                setattr(torch._dynamo.config, limit, max(getattr(torch._dynamo.config, limit), 256))
        counters.clear()
        compiled = torch.compile(_fresh_entry_point(subject.module, _next_id()))
        t0 = time.perf_counter_ns()
        try:
            compiled(*subject.example_inputs)
            _sync(subject.device)
        except Exception as e:
            raise ConfigFailure(f"torch.compile failed: {type(e).__name__}: {str(e)[:2000]}") from e
        compile_ns = time.perf_counter_ns() - t0
        breaks: dict[str, int] = {str(k): int(v) for k, v in counters["graph_break"].items()}
        graphs = int(counters["stats"].get("unique_graphs", 0))
        details: dict[str, Any] = {
            "graph_breaks": sum(breaks.values()),
            "graph_break_reasons": dict(list(breaks.items())[:20]),
            "graphs": graphs,
            # A hit means inductor reused code compiled earlier (another process or run), so
            # compile_ns is then a cache load, not a full compilation.
            "fx_graph_cache_hits": int(counters["inductor"].get("fxgraph_cache_hit", 0)),
        }

        def arm() -> None:
            # A recompile while timing would time the compiler: make it an error instead. Every
            # prepare disarms it first, so a later configuration can still compile.
            torch._dynamo.config.error_on_recompile = True

        run, bind = module_runner(compiled)
        timer = "cuda" if subject.device.type == "cuda" else "cpu"
        return Prepared(
            run=run,
            bind=bind,
            timer=timer,
            build={"compile_ns": compile_ns},
            details=details,
            before_timing=arm,
            # Captured graphs of inductor's own CUDA graphs would nest: launch it directly.
            graph_capturable=False,
            deterministic_fill=False,
        )
