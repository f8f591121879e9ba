"""pytorch_eager: the candidate module called as is."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from bench_runner.errors import Unsupported
from bench_runner.runtimes.base import Prepared, Subject
from bench_runner.workload import as_tensor_list


def module_runner(
    module: Any,
) -> tuple[Callable[[list[Any]], list[torch.Tensor]], Callable[[list[Any]], Callable[[], object]]]:
    def run(inputs: list[Any]) -> list[torch.Tensor]:
        return as_tensor_list(module(*inputs))

    def bind(inputs: list[Any]) -> Callable[[], object]:
        args = tuple(inputs)
        return lambda: module(*args)

    return run, bind


class PytorchEager:
    name = "pytorch_eager"

    def unavailable(self) -> str | None:
        return None

    def prepare(self, subject: Subject) -> Prepared:
        if subject.module is None:
            raise Unsupported(
                "an .onnx workload runs on onnxruntime or tensorrt, not pytorch_eager"
            )
        run, bind = module_runner(subject.module)
        timer = "cuda" if subject.device.type == "cuda" else "cpu"
        return Prepared(run=run, bind=bind, timer=timer, graph_capturable=True)
