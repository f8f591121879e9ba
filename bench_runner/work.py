"""The work a configuration does: FLOPs and the bytes that must move at least once.

Counted once per configuration in the process that checks it, on the eager reference `Model`
(never on ModelNew, whose custom kernels a counter cannot see into):
- FLOPs: torch.utils.flop_counter.FlopCounterMode over one forward call. It counts matrix
  products, convolutions and attention (2 per multiply-add); elementwise ops and reductions
  count 0, so such a kernel is held to its memory bound alone.
- bytes: a lower bound, every input tensor read once, every parameter and buffer read once and
  every output written once, at the dtypes the candidate runs in.
The call runs once for real on the configuration's device and inputs (the check runs the
candidate several times more); where that fails it runs on meta tensors (shapes only).
A workload may declare either figure with module-level `get_flops(batch_size)` /
`get_bytes(batch_size)` (a `dtype` keyword, the dtype's name, is passed when they take one):
a declared figure overrides the counted one and is recorded as "declared".
"""

from __future__ import annotations

import copy
import functools
import inspect
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch.utils import flop_counter
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


@functools.cache
def _skip_dynamo_import() -> None:
    """torch wraps every dispatch mode's __torch_dispatch__ so that dynamo never compiles
    inside it, and that wrapper imports torch._dynamo on its first call: 6 s on the H200
    machine, 7-13 s on the shared CPU, in each worker process that counts and would otherwise
    never import it (pytorch_eager alone). Nothing is compiled while a call is counted, so the
    wrapper may call the counter's own function at once; the wrapper looks for it under
    `__dynamo_disable` before it imports anything. A torch without that wrapper is left as is."""
    mode = getattr(flop_counter, "_FlopCounterMode", None)
    dispatch = vars(mode).get("__torch_dispatch__") if mode is not None else None
    raw = getattr(dispatch, "__wrapped__", None)
    if callable(raw) and not hasattr(raw, "__dynamo_disable"):
        setattr(raw, "__dynamo_disable", raw)  # noqa: B010 - the wrapper's own attribute name


@functools.cache
def _extra_formulas() -> dict[Any, Any]:
    """Attention on the CPU runs an op the counter has no formula for; it does the work of the
    GPU's flash attention, whose formula the counter has."""
    aten = torch.ops.aten
    cpu_attention = getattr(aten, "_scaled_dot_product_flash_attention_for_cpu", None)
    flash = flop_counter.flop_registry.get(aten._scaled_dot_product_flash_attention)
    if cpu_attention is None or flash is None:
        return {}

    def formula(*args: Any, out_val: Any = None, **kwargs: Any) -> int:
        return int(flash(*args, out_val=out_val, **kwargs))

    formula._get_raw = True  # type: ignore[attr-defined] # flash's entry takes tensors already
    return {cpu_attention: formula}


def count_call(model: torch.nn.Module, inputs: Sequence[Any]) -> tuple[int, int]:
    """(FLOPs, bytes) of one forward call of `model` (already in the dtype) on `inputs`."""
    _skip_dynamo_import()
    counter = FlopCounterMode(display=False, custom_mapping=_extra_formulas())
    with torch.no_grad(), counter:
        out = model(*inputs)
    moved = tensor_bytes(inputs) + _state_bytes(model) + tensor_bytes(_outputs(out))
    return int(counter.get_total_flops()), moved


def count_work(
    model: torch.nn.Module, inputs: Sequence[Any], dtype: torch.dtype
) -> tuple[int, int, str]:
    """(FLOPs, bytes, where it ran) of the eager model in `dtype` on `inputs` (already rounded
    and placed): one call on the inputs' device or, when that fails (out of memory, say), on
    meta tensors (shapes only; most ops' meta kernels import torch._dynamo on first use, seconds
    in a process that would not otherwise import it)."""
    device = next((x.device for x in inputs if isinstance(x, torch.Tensor)), torch.device("cpu"))
    try:
        real = copy.deepcopy(model).to(dtype=dtype).to(device=device)
        # Copies: a model that writes into its inputs must not change the ones timed later.
        fresh = [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]
        flops, moved = count_call(real, fresh)
        return flops, moved, str(device.type)
    except Exception:  # noqa: BLE001 - whatever stops a real call, shapes alone may count
        pass
    meta = copy.deepcopy(model).to(dtype=dtype).to(device="meta")
    flops, moved = count_call(meta, [_on_meta(x) for x in inputs])
    return flops, moved, "meta"


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
