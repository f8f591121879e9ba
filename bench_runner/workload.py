"""Workloads: a KernelBench-style .py file or an .onnx file, each loaded in its own namespace."""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import itertools
import sys
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import torch

from bench_runner.errors import Unsupported, WorkloadError

TORCH_DTYPES: dict[str, torch.dtype] = {
    "float32": torch.float32,
    "tf32": torch.float32,  # float32 tensors, TF32 math (bench_runner/precision.py)
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "float64": torch.float64,
}
_counter = itertools.count()


def file_sha256(path: str | Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _failure(what: str, exc: BaseException) -> WorkloadError:
    tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return WorkloadError(f"{what}: {type(exc).__name__}: {exc}", details={"traceback": tb[-8000:]})


def round_to(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Floating tensors go to `dtype` (the rounding every side then shares); others stay."""
    return x.to(dtype) if x.is_floating_point() else x


def as_tensor_list(out: Any) -> list[torch.Tensor]:
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (list, tuple)) and all(isinstance(o, torch.Tensor) for o in out):
        return list(out)
    raise WorkloadError(
        f"the model returned {type(out).__name__}; return a tensor or a tuple/list of tensors"
    )


def _signed(x: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """Random signs for an all-non-negative float input: sign bugs must not hide behind rand()."""
    if not x.is_floating_point() or x.numel() == 0 or bool((x < 0).any()):
        return x
    signs = torch.randint(0, 2, x.shape, generator=gen).to(x.dtype) * 2 - 1
    return x * signs.to(x.device)


@dataclass
class PythonWorkload:
    """A KernelBench-style module: Model, get_inputs(), get_init_inputs(), optional ModelNew."""

    path: str
    module: ModuleType
    signed_inputs: bool = True
    kind: str = "python"
    notes: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def load(cls, path: str) -> PythonWorkload:
        # A unique module name per load: two workloads (base and head) never share globals.
        name = f"rnx_workload_{next(_counter)}_{Path(path).stem}"
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise WorkloadError(f"cannot load {path} as a Python module")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # dataclasses and pickling inside the workload look here
        try:
            spec.loader.exec_module(module)
        except BaseException as e:  # noqa: BLE001 - a workload may raise anything, even SystemExit
            raise _failure(f"importing {path} failed", e) from None
        for needed in ("Model", "get_inputs", "get_init_inputs"):
            if not hasattr(module, needed):
                raise WorkloadError(
                    f"{path} has no `{needed}`: a workload defines class Model(torch.nn.Module), "
                    f"get_inputs() and get_init_inputs() (KernelBench convention)"
                )
        return cls(path=path, module=module, signed_inputs=getattr(module, "signed_inputs", True))

    @property
    def has_new(self) -> bool:
        return hasattr(self.module, "ModelNew")

    def _init_args(self) -> tuple[list[Any], dict[str, Any]]:
        try:
            init = self.module.get_init_inputs()
        except BaseException as e:  # noqa: BLE001
            raise _failure("get_init_inputs() raised", e) from None
        if isinstance(init, dict):
            return [], init
        return list(init or []), {}

    def build_reference(self, seed: int) -> torch.nn.Module:
        """Model alone, built as build() builds it (the work of a call is counted on it)."""
        args, kwargs = self._init_args()
        try:
            torch.manual_seed(seed)
            return self.module.Model(*args, **kwargs).eval()
        except BaseException as e:  # noqa: BLE001
            raise _failure("building Model raised", e) from None

    def build(self, seed: int) -> tuple[torch.nn.Module, torch.nn.Module, str]:
        """(reference Model, candidate ModelNew or Model, how their weights were matched)."""
        args, kwargs = self._init_args()
        try:
            torch.manual_seed(seed)
            reference = self.module.Model(*args, **kwargs)
        except BaseException as e:  # noqa: BLE001
            raise _failure("building Model raised", e) from None
        if not self.has_new:
            return reference.eval(), reference.eval(), "candidate is Model itself"
        try:
            torch.manual_seed(seed)
            candidate = self.module.ModelNew(*args, **kwargs)
        except BaseException as e:  # noqa: BLE001
            raise _failure("building ModelNew raised", e) from None
        ref_state, new_state = reference.state_dict(), candidate.state_dict()
        same = ref_state.keys() == new_state.keys() and all(
            ref_state[k].shape == new_state[k].shape for k in ref_state
        )
        if same and ref_state:
            candidate.load_state_dict(ref_state)
            how = "ModelNew loaded Model's state_dict"
        else:
            how = "Model and ModelNew built from the same seed"
        return reference.eval(), candidate.eval(), how

    @property
    def batching(self) -> str:
        """How a batch size reaches the workload: "keyword" (get_inputs(batch_size=N)),
        "global" (a module-level batch_size) or "none" (it has no batch dimension)."""
        try:
            params = inspect.signature(self.module.get_inputs).parameters
        except (TypeError, ValueError):
            params = {}  # type: ignore[assignment]
        if "batch_size" in params:
            return "keyword"
        return "global" if hasattr(self.module, "batch_size") else "none"

    def _draw(self, batch_size: int | None) -> Any:
        fn = self.module.get_inputs
        if batch_size is None:  # the workload's own shapes
            return fn()
        if self.batching == "keyword":
            return fn(batch_size=batch_size)
        if self.batching == "global":
            setattr(self.module, "batch_size", batch_size)  # noqa: B010 - a workload global
            return fn()
        raise WorkloadError(
            f"{self.path} cannot take a batch size: give get_inputs a batch_size keyword or "
            f"define a module-level `batch_size`, or give no batch sizes to run it at its own "
            f"shapes"
        )

    def inputs(self, batch_size: int | None, seed: int) -> list[Any]:
        torch.manual_seed(seed)
        try:
            raw = self._draw(batch_size)
        except WorkloadError:
            raise
        except BaseException as e:  # noqa: BLE001
            at = "at its own shapes" if batch_size is None else f"at batch size {batch_size}"
            raise _failure(f"get_inputs() raised {at}", e) from None
        if isinstance(raw, torch.Tensor):
            raw = [raw]
        gen = torch.Generator().manual_seed(seed + 7919)
        out = list(raw)
        if self.signed_inputs:
            out = [_signed(x, gen) if isinstance(x, torch.Tensor) else x for x in out]
        return out


@dataclass
class OnnxWorkload:
    """An .onnx file; its first input dimension, when symbolic, is the batch size."""

    path: str
    model: Any  # onnx.ModelProto
    kind: str = "onnx"
    has_new: bool = False

    @classmethod
    def load(cls, path: str) -> OnnxWorkload:
        try:
            import onnx
        except ImportError as e:
            raise Unsupported(f"unavailable: reading .onnx workloads needs onnx ({e})") from None
        try:
            model = onnx.load(path)
            onnx.checker.check_model(model)
        except BaseException as e:  # noqa: BLE001
            raise _failure(f"{path} is not a valid ONNX model", e) from None
        return cls(path=path, model=model)

    def _graph_inputs(self) -> list[Any]:
        initializers = {i.name for i in self.model.graph.initializer}
        return [inp for inp in self.model.graph.input if inp.name not in initializers]

    @property
    def batching(self) -> str:
        """ "symbolic" when an input's first dimension is symbolic (the batch), else "none"."""
        for inp in self._graph_inputs():
            dims = inp.type.tensor_type.shape.dim
            if dims and not (dims[0].HasField("dim_value") and dims[0].dim_value > 0):
                return "symbolic"
        return "none"

    def input_specs(self, batch_size: int | None) -> list[tuple[str, list[int], torch.dtype]]:
        from onnx import helper

        specs = []
        for inp in self._graph_inputs():
            t = inp.type.tensor_type
            dims: list[int] = []
            for i, d in enumerate(t.shape.dim):
                if d.HasField("dim_value") and d.dim_value > 0:
                    dims.append(d.dim_value)
                elif i == 0 and batch_size is not None:
                    dims.append(batch_size)
                elif i == 0:
                    raise WorkloadError(
                        f"{self.path}: input {inp.name!r} has a symbolic batch dimension; give "
                        f"batch sizes"
                    )
                else:
                    raise WorkloadError(
                        f"{self.path}: input {inp.name!r} has a symbolic dimension {i}; only the "
                        f"first (batch) dimension may be symbolic"
                    )
            np_dtype = helper.tensor_dtype_to_np_dtype(t.elem_type)
            specs.append((inp.name, dims, torch.from_numpy(np.zeros(0, np_dtype)).dtype))
        return specs

    def inputs(self, batch_size: int | None, seed: int) -> list[Any]:
        gen = torch.Generator().manual_seed(seed)
        out: list[Any] = []
        for _, dims, dtype in self.input_specs(batch_size):
            if dtype.is_floating_point:
                out.append(torch.randn(dims, generator=gen, dtype=torch.float64).to(dtype))
            else:
                out.append(torch.randint(0, 8, dims, generator=gen).to(dtype))
        return out


def load_workload(path: str) -> PythonWorkload | OnnxWorkload:
    p = Path(path)
    if p.suffix == ".onnx":
        return OnnxWorkload.load(path)
    if p.suffix != ".py":
        raise WorkloadError(f"{path}: a workload is a .py (KernelBench convention) or .onnx file")
    return PythonWorkload.load(path)
