"""Regenerates examples/tiny_mlp.onnx: 16 -> 32 (ReLU) -> 8, with a symbolic batch dimension.

Run: python examples/make_onnx.py
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def build() -> onnx.ModelProto:
    rng = np.random.default_rng(0)
    w1 = (rng.standard_normal((16, 32)) / 4).astype(np.float32)
    b1 = (rng.standard_normal(32) / 4).astype(np.float32)
    w2 = (rng.standard_normal((32, 8)) / 4).astype(np.float32)
    b2 = (rng.standard_normal(8) / 4).astype(np.float32)
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["h0"]),
        helper.make_node("Add", ["h0", "b1"], ["h1"]),
        helper.make_node("Relu", ["h1"], ["h2"]),
        helper.make_node("MatMul", ["h2", "w2"], ["y0"]),
        helper.make_node("Add", ["y0", "b2"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "tiny_mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 8])],
        initializer=[
            numpy_helper.from_array(a, name)
            for name, a in (("w1", w1), ("b1", b1), ("w2", w2), ("b2", b2))
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


if __name__ == "__main__":
    out = Path(__file__).with_name("tiny_mlp.onnx")
    onnx.save(build(), out)
    print(f"wrote {out}")
