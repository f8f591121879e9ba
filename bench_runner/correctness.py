"""Correctness before speed: a candidate is checked against a float64 reference it cannot fool."""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

Tensors = list[torch.Tensor]
MAX_FAILURES = 20


@dataclass
class CorrectnessReport:
    passed: bool
    trials: int
    atol: float
    rtol: float
    max_abs_error: float | None = None
    max_rel_error: float | None = None
    failures: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@contextlib.contextmanager
def poisoned_memory(expected: Tensors) -> Iterator[None]:
    """Fresh output memory reads as NaN, so an element the kernel never writes is caught.

    torch.empty* fills with NaN under deterministic mode (fill_uninitialized_memory); on CUDA the
    caching allocator also hands back blocks we freed after filling them with NaN.
    """
    was_on = torch.are_deterministic_algorithms_enabled()
    was_warn = torch.is_deterministic_algorithms_warn_only_enabled()
    fill = torch.utils.deterministic.fill_uninitialized_memory  # type: ignore[attr-defined]
    torch.utils.deterministic.fill_uninitialized_memory = True  # type: ignore[attr-defined]
    for ref in expected:
        if ref.is_cuda:
            for _ in range(2):
                torch.full((ref.numel() * 2 + 64,), float("nan"), device=ref.device)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.use_deterministic_algorithms(True, warn_only=True)
        try:
            yield
        finally:
            torch.use_deterministic_algorithms(was_on, warn_only=was_warn)
            torch.utils.deterministic.fill_uninitialized_memory = fill  # type: ignore[attr-defined]


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bit-for-bit equality that treats NaN as equal to NaN."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.is_floating_point():
        both_nan = a.isnan() & b.isnan()
        return bool(((a == b) | both_nan).all())
    return bool(torch.equal(a, b))


def _all_same(xs: Tensors, ys: Tensors) -> bool:
    return len(xs) == len(ys) and all(_same(x, y.to(x.device)) for x, y in zip(xs, ys, strict=True))


@dataclass
class _Checker:
    atol: float
    rtol: float
    expected_dtype: torch.dtype
    failures: list[str] = field(default_factory=list)
    max_abs: float = 0.0
    max_rel: float = 0.0

    def fail(self, message: str) -> None:
        if message not in self.failures and len(self.failures) < MAX_FAILURES:
            self.failures.append(message)

    def compare(self, out: Tensors, ref: Tensors, where: str) -> None:
        if len(out) != len(ref):
            self.fail(f"{where}: {len(out)} outputs, the reference has {len(ref)}")
            return
        for k, (o, r) in enumerate(zip(out, ref, strict=True)):
            name = f"{where}: output {k}"
            if tuple(o.shape) != tuple(r.shape):
                self.fail(f"{name} has shape {tuple(o.shape)}, the reference {tuple(r.shape)}")
                continue
            if r.is_floating_point() and o.dtype != self.expected_dtype:
                self.fail(f"{name} is {o.dtype}, expected {self.expected_dtype}")
            o64 = o.detach().to(device=r.device, dtype=torch.float64)
            r64 = r.to(torch.float64)
            finite_ref = torch.isfinite(r64)
            bad_nonfinite = ~torch.isfinite(o64) & finite_ref
            n_nonfinite = int(bad_nonfinite.sum())
            if n_nonfinite:
                self.fail(
                    f"{name} has {n_nonfinite} NaN/Inf of {o.numel()} elements where the reference "
                    f"is finite (unwritten output memory reads as NaN)"
                )
            both = finite_ref & torch.isfinite(o64)
            if bool((~finite_ref).any()) and not _same(o64[~finite_ref], r64[~finite_ref]):
                self.fail(f"{name}: NaN/Inf elements differ from the reference's")
            if not bool(both.any()):
                continue
            err = (o64 - r64).abs().where(both, torch.zeros_like(o64))
            self.max_abs = max(self.max_abs, float(err.max()))
            significant = both & (r64.abs() >= self.atol)
            if bool(significant.any()):
                rel = (err / r64.abs().clamp_min(1e-300)).where(significant, torch.zeros_like(err))
                self.max_rel = max(self.max_rel, float(rel.max()))
            outside = both & (err > self.atol + self.rtol * r64.abs())
            n_out = int(outside.sum())
            if n_out:
                idx = int(torch.nonzero(outside.flatten())[0])
                self.fail(
                    f"{name}: {n_out} of {o.numel()} elements outside atol={self.atol:g}, "
                    f"rtol={self.rtol:g} (first at flat index {idx}: got "
                    f"{float(o64.flatten()[idx]):.6g}, expected {float(r64.flatten()[idx]):.6g})"
                )


def _moved(new: Tensors, old: Tensors, atol: float, rtol: float) -> bool:
    for a, b in zip(new, old, strict=True):
        if a.shape != b.shape:
            return True
        if not a.is_floating_point():
            if not torch.equal(a, b):
                return True
            continue
        diff = (a.double() - b.double()).abs()
        limit = atol + rtol * b.double().abs()
        if bool((diff > limit).any()):
            return True
    return False


def _fresh_like(x: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    values = torch.randn(x.shape, generator=gen, dtype=torch.float64)
    return values.to(dtype=x.dtype, device=x.device)


def check_correctness(
    *,
    run: Callable[[list[Any]], Tensors],
    reference: Callable[[list[Any]], Tensors],
    make_inputs: Callable[[int], list[Any]],
    expected_dtype: torch.dtype,
    atol: float,
    rtol: float,
    trials: int = 3,
    seed: int = 0,
) -> CorrectnessReport:
    """Run `trials` fresh-input trials plus one input-sensitivity probe per floating input.

    Exceptions from `run` propagate: the caller decides whether they mean unsupported or error.
    """
    c = _Checker(atol=atol, rtol=rtol, expected_dtype=expected_dtype)
    prev_out: Tensors | None = None
    prev_ref: Tensors | None = None
    inputs: list[Any] = []
    out: Tensors = []
    ref: Tensors = []
    for t in range(trials):
        inputs = make_inputs(seed + 1000 + t)
        ref = [r.detach() for r in reference(inputs)]
        before = [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]
        with poisoned_memory(ref):
            out = [o.detach().clone() for o in run(inputs)]
        where = f"trial {t + 1}"
        c.compare(out, ref, where)
        for i, (x, x0) in enumerate(zip(inputs, before, strict=True)):
            if isinstance(x, torch.Tensor) and not _same(x, x0):
                c.fail(f"input {i} was modified by the call (kernels must not write their inputs)")
        if (
            prev_out is not None
            and prev_ref is not None
            and _all_same(out, prev_out)
            and not _all_same(ref, prev_ref)
        ):
            c.fail(
                f"{where}: the output did not change with fresh inputs (a cached or stale result?)"
            )
        prev_out, prev_ref = out, ref
    # Each floating input alone is replaced: an output that ignores it is caught by name even
    # where the values happen to land inside the tolerance.
    gen = torch.Generator().manual_seed(seed + 4242)
    for i, x in enumerate(inputs):
        if not (isinstance(x, torch.Tensor) and x.is_floating_point() and x.numel()):
            continue
        probe = list(inputs)
        probe[i] = _fresh_like(x, gen)
        ref2 = [r.detach() for r in reference(probe)]
        with poisoned_memory(ref2):
            out2 = [o.detach().clone() for o in run(probe)]
        # Only a change of the reference beyond the tolerance must show in the output: in low
        # precision an honest kernel may round a tiny change away.
        if _all_same(out2, out) and _moved(ref2, ref, atol, rtol):
            c.fail(f"the output does not change when input {i} changes (input {i} is ignored)")
        c.compare(out2, ref2, f"probe of input {i}")
    return CorrectnessReport(
        passed=not c.failures,
        trials=trials,
        atol=atol,
        rtol=rtol,
        max_abs_error=c.max_abs,
        max_rel_error=c.max_rel,
        failures=c.failures,
    )
