"""The runtime registry: name -> runtime, each implementing bench_runner.runtimes.base.Runtime."""

from __future__ import annotations

from bench_runner.runtimes.base import Prepared, Runtime, Subject
from bench_runner.runtimes.compiled import TorchCompile
from bench_runner.runtimes.eager import PytorchEager
from bench_runner.runtimes.onnxrt import OnnxRuntime
from bench_runner.runtimes.tensorrt import TensorRT

REGISTRY: dict[str, Runtime] = {}


def register(runtime: Runtime) -> None:
    REGISTRY[runtime.name] = runtime


def get_runtime(name: str) -> Runtime:
    try:
        return REGISTRY[name]
    except KeyError:
        raise KeyError(f"unknown runtime {name!r}; known: {', '.join(REGISTRY)}") from None


for _rt in (PytorchEager(), TorchCompile(), OnnxRuntime(), TensorRT()):
    register(_rt)

__all__ = ["REGISTRY", "Prepared", "Runtime", "Subject", "get_runtime", "register"]
