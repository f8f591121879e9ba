"""ONNX graphs for the ONNX-based runtimes: export of a module, retyping of an .onnx workload."""

from __future__ import annotations

import io
import time
from typing import Any

import torch

from bench_runner.errors import ConfigFailure
from bench_runner.runtimes.base import Subject

ONNX_FLOAT_TYPES = {1, 10, 11, 16}  # FLOAT, FLOAT16, DOUBLE, BFLOAT16


def onnx_elem_type(dtype: torch.dtype) -> int:
    from onnx import TensorProto

    return {
        torch.float32: TensorProto.FLOAT,
        torch.float16: TensorProto.FLOAT16,
        torch.bfloat16: TensorProto.BFLOAT16,
        torch.float64: TensorProto.DOUBLE,
    }[dtype]


def retype(model: Any, round_to: torch.dtype, store_as: torch.dtype) -> Any:
    """A copy of `model` whose float tensors are rounded to `round_to` and stored as `store_as`.

    retype(m, float16, float16) makes the float16 graph a runtime runs; retype(m, float16,
    float64) makes the float64 reference with exactly the same rounded weights.
    """
    import onnx
    from onnx import numpy_helper

    out = onnx.ModelProto()
    out.CopyFrom(model)
    target = onnx_elem_type(store_as)

    def convert_tensor(t: Any) -> None:
        if t.data_type not in ONNX_FLOAT_TYPES:
            return
        arr = torch.from_numpy(numpy_helper.to_array(t).astype("float64"))
        rounded = arr.to(round_to).to(store_as)
        new = (
            numpy_helper.from_array(rounded.view(torch.int16).numpy(), t.name)
            if store_as == torch.bfloat16
            else numpy_helper.from_array(rounded.numpy(), t.name)
        )
        if store_as == torch.bfloat16:
            new.data_type = target
        t.CopyFrom(new)

    g = out.graph
    for init in g.initializer:
        convert_tensor(init)
    for vi in list(g.input) + list(g.output) + list(g.value_info):
        if vi.type.tensor_type.elem_type in ONNX_FLOAT_TYPES:
            vi.type.tensor_type.elem_type = target
    for node in g.node:
        for attr in node.attribute:
            if node.op_type == "Constant" and attr.name == "value":
                convert_tensor(attr.t)
            if node.op_type == "Cast" and attr.name == "to" and attr.i in ONNX_FLOAT_TYPES:
                attr.i = target
    return out


def onnx_bytes(subject: Subject) -> tuple[bytes, dict[str, Any], int]:
    """The configuration's ONNX graph: (serialized model, details, export time in ns)."""
    if subject.onnx_model is not None:
        return subject.onnx_model.SerializeToString(), {"export": "workload is ONNX"}, 0
    assert subject.module is not None
    args = tuple(subject.example_inputs)
    t0 = time.perf_counter_ns()
    details: dict[str, Any] = {}
    try:
        program = torch.onnx.export(subject.module, args, dynamo=True, verbose=False)
        assert program is not None
        data = program.model_proto.SerializeToString()
        details["export"] = "torch.onnx dynamo exporter"
    except Exception as dynamo_error:  # noqa: BLE001 - any exporter failure gets the fallback
        # The fallback is recorded: a graph from another exporter is a different program.
        buf = io.BytesIO()
        try:
            torch.onnx.export(subject.module, args, buf, dynamo=False)  # type: ignore[arg-type]
        except Exception as e:
            raise ConfigFailure(
                f"ONNX export failed with the dynamo exporter ({type(dynamo_error).__name__}: "
                f"{str(dynamo_error)[:500]}) and the TorchScript exporter ({type(e).__name__}: "
                f"{str(e)[:500]})"
            ) from e
        data = buf.getvalue()
        details["export"] = "torch.onnx TorchScript exporter (fallback)"
        details["export_fallback_reason"] = (
            f"{type(dynamo_error).__name__}: {str(dynamo_error)[:500]}"
        )
    return data, details, time.perf_counter_ns() - t0
