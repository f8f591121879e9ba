"""What a runtime builds from (the candidate, rounded and placed) and what it is checked against."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import torch

from bench_runner.references import ReferenceCases, ReferenceStore, Tensors
from bench_runner.runtimes.base import Subject
from bench_runner.workload import (
    TORCH_DTYPES,
    OnnxWorkload,
    PythonWorkload,
    as_tensor_list,
    round_to,
)


def _is_float(x: Any) -> bool:
    return isinstance(x, torch.Tensor) and x.is_floating_point()


def _python_reference(
    model: torch.nn.Module, dtype: torch.dtype, device: torch.device
) -> Callable[[list[Any]], Tensors]:
    # Same dtype-rounded weights as the candidate, computed in float64.
    ref64 = copy.deepcopy(model).to(dtype=dtype).to(device=device, dtype=torch.float64)

    def reference(inputs: list[Any]) -> Tensors:
        up = [x.to(torch.float64) if _is_float(x) else x for x in inputs]
        return as_tensor_list(ref64(*up))

    return reference


def _honest_runtime(
    model: torch.nn.Module, dtype: torch.dtype, device: torch.device
) -> Callable[[list[Any]], Tensors] | None:
    """The workload's own Model, eager, in the dtype: the precision audit's yardstick (float64
    has none: its reference is the same computation)."""
    if dtype == torch.float64:
        return None
    honest = copy.deepcopy(model).to(device=device, dtype=dtype)

    def run(inputs: list[Any]) -> Tensors:
        with torch.no_grad():
            return as_tensor_list(honest(*inputs))

    return run


def _onnx_reference(
    wl: OnnxWorkload, dtype: torch.dtype, device: torch.device, batch_size: int | None
) -> Callable[[list[Any]], Tensors]:
    from onnx.reference import ReferenceEvaluator

    from bench_runner.runtimes.onnx_export import retype

    evaluator = ReferenceEvaluator(retype(wl.model, dtype, torch.float64))
    names = [n for n, _, _ in wl.input_specs(batch_size)]

    def reference(inputs: list[Any]) -> Tensors:
        feeds = {
            n: (x.to(torch.float64) if _is_float(x) else x).cpu().numpy()
            for n, x in zip(names, inputs, strict=True)
        }
        return [torch.from_numpy(o).to(device) for o in evaluator.run(None, feeds)]

    return reference


def build_subject(
    wl: PythonWorkload | OnnxWorkload,
    *,
    dtype: str,
    batch_size: int | None,
    device: torch.device,
    threads: int,
    seed: int,
    trials: int,
    store: ReferenceStore | None,
) -> tuple[Subject, ReferenceCases | None]:
    """The configuration's subject and, with a store (the checking process), its reference
    cases: shared by every runtime of the same dtype and batch size."""
    tdtype = TORCH_DTYPES[dtype]

    def make_inputs(s: int) -> list[Any]:
        raw = wl.inputs(batch_size, s)
        return [round_to(x, tdtype).to(device) if isinstance(x, torch.Tensor) else x for x in raw]

    subject = Subject(
        workload=wl,
        dtype=dtype,
        torch_dtype=tdtype,
        device=device,
        batch_size=batch_size,
        threads=threads,
        example_inputs=make_inputs(seed),
    )
    if isinstance(wl, PythonWorkload):
        ref_model, cand_model, how = wl.build(seed)
        subject.module = copy.deepcopy(cand_model).to(device=device, dtype=tdtype)
        subject.notes["weights"] = how

        def reference() -> Callable[[list[Any]], Tensors]:
            return _python_reference(ref_model, tdtype, device)

        honest = _honest_runtime(ref_model, tdtype, device)

    else:
        from bench_runner.runtimes.onnx_export import retype

        subject.onnx_model = retype(wl.model, tdtype, tdtype)

        def reference() -> Callable[[list[Any]], Tensors]:
            return _onnx_reference(wl, tdtype, device, batch_size)

        honest = None

    if store is None:
        return subject, None
    cases = store.get(
        (dtype, batch_size),
        lambda: ReferenceCases(
            reference=reference(),
            make_inputs=make_inputs,
            seed=seed,
            trials=trials,
            honest=honest,
        ),
    )
    return subject, cases
