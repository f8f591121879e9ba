"""The work a configuration does: FLOPs and the bytes that must move at least once.

Counted once per configuration in the process that checks it, on the eager reference `Model`
(never on ModelNew, whose custom kernels a counter cannot see into):
- FLOPs: torch.utils.flop_counter.FlopCounterMode over one forward call. It counts matrix
  products, convolutions and attention (2 per multiply-add); elementwise ops and reductions
  count 0, so such a kernel is held to its memory bound alone.
- bytes: a lower bound, every input tensor read once, every parameter and buffer read once and
  every output written once, at the dtypes the candidate runs in.
The call runs on meta tensors first (no memory, no time); a model that cannot run there (it
reads a value, say) runs once for real on the configuration's device.
A workload may declare either figure with module-level `get_flops(batch_size)` /
`get_bytes(batch_size)` (a `dtype` keyword, the dtype's name, is passed when they take one):
a declared figure overrides the counted one and is recorded as "declared".
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch.utils.flop_counter import FlopCounterMode

COUNTED = "counted"
DECLARED = "declared"


def tensor_bytes(values: Sequence[Any]) -> int:
    return sum(x.numel() * x.element_size() for x in values if isinstance(x, torch.Tensor))


def _outputs(out: Any) -> list[torch.Tensor]:
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (list, tuple)):
        return [o for o in out if isinstance(o, torch.Tensor)]
    return []


def _state_bytes(model: torch.nn.Module) -> int:
    return tensor_bytes(list(model.parameters()) + list(model.buffers()))


def _on_meta(x: Any) -> Any:
    return torch.empty_like(x, device="meta") if isinstance(x, torch.Tensor) else x


def count_call(model: torch.nn.Module, inputs: Sequence[Any]) -> tuple[int, int]:
    """(FLOPs, bytes) of one forward call of `model` (already in the dtype) on `inputs`."""
    counter = FlopCounterMode(display=False)
    with torch.no_grad(), counter:
        out = model(*inputs)
    moved = tensor_bytes(inputs) + _state_bytes(model) + tensor_bytes(_outputs(out))
    return int(counter.get_total_flops()), moved


def count_work(
    model: torch.nn.Module, inputs: Sequence[Any], dtype: torch.dtype
) -> tuple[int, int, str]:
    """(FLOPs, bytes, where it ran) of the eager model in `dtype` on `inputs` (already rounded
    and placed): on meta tensors when the model allows, else for real on the inputs' device."""
    device = next((x.device for x in inputs if isinstance(x, torch.Tensor)), torch.device("cpu"))
    try:
        meta = copy.deepcopy(model).to(dtype=dtype).to(device="meta")
        flops, moved = count_call(meta, [_on_meta(x) for x in inputs])
        return flops, moved, "meta"
    except Exception:  # noqa: BLE001 - any op without a meta kernel: count on the real device
        pass
    real = copy.deepcopy(model).to(dtype=dtype).to(device=device)
    flops, moved = count_call(real, list(inputs))
    return flops, moved, str(device.type)


def _declared(fn: Callable[..., Any] | None, batch_size: int | None, dtype: str) -> int | None:
    if fn is None:
        return None
    try:
        takes_dtype = "dtype" in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        takes_dtype = False
    value = fn(batch_size, dtype=dtype) if takes_dtype else fn(batch_size)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
        raise ValueError(f"{fn.__name__}({batch_size}) returned {value!r}; return a number >= 0")
    return int(value)


def measure_work(
    module: Any,
    model: torch.nn.Module | None,
    inputs: Sequence[Any],
    *,
    dtype: str,
    torch_dtype: torch.dtype,
    batch_size: int | None,
) -> dict[str, Any]:
    """The configuration's work for the results document: flops, bytes and their sources.

    module: the workload's module (for get_flops/get_bytes), None for an .onnx workload;
    model: its eager reference Model, None for an .onnx workload (then only bytes of the
    inputs are known, unless declared)."""
    flops = _declared(getattr(module, "get_flops", None), batch_size, dtype)
    moved = _declared(getattr(module, "get_bytes", None), batch_size, dtype)
    work: dict[str, Any] = {
        "flops": flops,
        "bytes": moved,
        "flops_source": DECLARED if flops is not None else None,
        "bytes_source": DECLARED if moved is not None else None,
    }
    if flops is not None and moved is not None:
        return work
    if model is None:
        if moved is None:
            work.update(bytes=tensor_bytes(inputs), bytes_source=COUNTED)
            work["note"] = "an .onnx workload: bytes are its inputs alone, FLOPs are not counted"
        return work
    counted_flops, counted_bytes, where = count_work(model, inputs, torch_dtype)
    if flops is None:
        work.update(flops=counted_flops, flops_source=COUNTED)
    if moved is None:
        work.update(bytes=counted_bytes, bytes_source=COUNTED)
    work["counted_on"] = where
    return work
