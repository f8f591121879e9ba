"""Correctness before speed: a candidate is checked against a float64 reference it cannot fool."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

from bench_runner.references import Case, ReferenceCases, max_error

Tensors = list[torch.Tensor]
MAX_FAILURES = 20
# Above this many input elements per output element, a failure message explains the reduction
# allowance and how to widen the tolerance (a loss over millions of elements, say).
LONG_REDUCTION = 10_000
HINT_WITHIN = 4.0
# The precision audit: a candidate whose largest error is more than this many times the honest
# runtime's (the workload's Model, eager, in the same dtype, on the same inputs) computed in
# less precision than it claims, even inside the tolerance. Honest rewrites stay well under it:
# on the H200, torch_compile's and ONNX Runtime's errors on gelu_linear are 0.9-1.4x eager's in
# float32/float16/bfloat16, a float16 kernel computed in bfloat16 about 8x (docs/harness.md).
AUDIT_RATIO = 4.0
# Rounding of a sum grows with the square root of its length (the probabilistic bound of
# Higham and Mary: about sqrt(n) units in the last place). Low-precision kernels accumulate in
# float32 (torch, ONNX Runtime, TensorRT do), so float32's epsilon is the unit for them too; a
# kernel that accumulates in float16 or bfloat16 errs by far more and still fails.
ACCUMULATION_EPS = {
    torch.float64: float(torch.finfo(torch.float64).eps),
    torch.float32: float(torch.finfo(torch.float32).eps),
    torch.float16: float(torch.finfo(torch.float32).eps),
    torch.bfloat16: float(torch.finfo(torch.float32).eps),
}


@dataclass
class CorrectnessReport:
    passed: bool
    trials: int
    atol: float
    rtol: float
    max_abs_error: float | None = None
    max_rel_error: float | None = None
    failures: list[str] = field(default_factory=list)
    # Not part of the results schema's `correctness`: the worker files it under details.
    notes: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "notes"}


def _set_deterministic(on: bool, warn_only: bool) -> None:
    # The public torch.use_deterministic_algorithms also imports torch._inductor to flip its
    # config: 2-3 s in a fresh process, for a flag only the eager fill needs.
    setter = getattr(torch._C, "_set_deterministic_algorithms", None)
    if setter is None:
        torch.use_deterministic_algorithms(on, warn_only=warn_only)
    else:
        setter(on, warn_only=warn_only)


@contextlib.contextmanager
def poisoned_memory(expected: Tensors, *, fill: bool = True) -> Iterator[None]:
    """Fresh output memory reads as NaN, so an element the kernel never writes is caught.

    fill: torch.empty* fills with NaN under deterministic mode (fill_uninitialized_memory). A
    compiled program is guarded on that mode: switching it would check a recompiled program, not
    the one that is timed, so torch_compile passes fill=False. On CUDA the caching allocator also
    hands back blocks freed here after being filled with NaN, in both cases.
    """
    for ref in expected:
        if ref.is_cuda:
            for _ in range(2):
                torch.full((ref.numel() * 2 + 64,), float("nan"), device=ref.device)
    if not fill:
        yield
        return
    was_on = torch.are_deterministic_algorithms_enabled()
    was_warn = torch.is_deterministic_algorithms_warn_only_enabled()
    deterministic: Any = torch.utils.deterministic
    was_fill = deterministic.fill_uninitialized_memory
    deterministic.fill_uninitialized_memory = True
    _set_deterministic(True, warn_only=True)
    try:
        yield
    finally:
        _set_deterministic(was_on, warn_only=was_warn)
        deterministic.fill_uninitialized_memory = was_fill


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


def _rounded(refs: Tensors, dtype: torch.dtype) -> Tensors:
    """The references as the output's dtype can hold them: what an honest output can show."""
    return [r.to(dtype) if r.is_floating_point() else r for r in refs]


def reduction_length(inputs: list[Any], output: torch.Tensor) -> int:
    """How many input elements each output element combines, estimated from the sizes: the
    largest floating input's element count over the output's (exact for a full reduction)."""
    sizes = [x.numel() for x in inputs if isinstance(x, torch.Tensor) and x.is_floating_point()]
    if not sizes or output.numel() == 0:
        return 1
    return max(1, max(sizes) // output.numel())


def reduction_allowance(length: int, dtype: torch.dtype) -> float:
    """What rtol grows by for rounding in a reduction of `length` elements."""
    return ACCUMULATION_EPS.get(dtype, ACCUMULATION_EPS[torch.float32]) * math.sqrt(length)


@dataclass
class _Checker:
    atol: float
    rtol: float
    expected_dtype: torch.dtype
    dtype_name: str
    failures: list[str] = field(default_factory=list)
    max_abs: float = 0.0
    max_rel: float = 0.0
    mismatches: list[dict[str, Any]] = field(default_factory=list)
    allowance: float = 0.0
    length: int = 1

    def fail(self, message: str) -> None:
        if message not in self.failures and len(self.failures) < MAX_FAILURES:
            self.failures.append(message)

    def compare(self, out: Tensors, case: Case) -> None:
        ref = case.reference
        if len(out) != len(ref):
            self.fail(f"{case.name}: {len(out)} outputs, the reference has {len(ref)}")
            return
        for k, (o, r) in enumerate(zip(out, ref, strict=True)):
            name = f"{case.name}: output {k}"
            if tuple(o.shape) != tuple(r.shape):
                self.fail(f"{name} has shape {tuple(o.shape)}, the reference {tuple(r.shape)}")
                continue
            if r.is_floating_point() and o.dtype != self.expected_dtype:
                self.fail(f"{name} is {o.dtype}, expected {self.expected_dtype}")
            length = reduction_length(case.inputs, r)
            self.length = max(self.length, length)
            o64 = o.detach().to(device=r.device, dtype=torch.float64)
            self._values(name, case, k, o64, r, length)
            # Over a long reduction the summation order alone moves the error by more than the
            # dtype does (ONNX Runtime's CPU mean over 16.7M float32 elements errs 1.8e-3
            # relative, eager far less): there the widened tolerance and its advice decide.
            if case.honest_errors is not None and r.is_floating_point() and length < LONG_REDUCTION:
                self._audit(name, max_error(o64, r), case.honest_errors[k], r)

    def _audit(self, name: str, error: float, honest: float, r: torch.Tensor) -> None:
        """Error far beyond what the dtype costs the honest runtime: lower precision inside.
        The yardstick is never below one unit of rounding at the output's largest magnitude
        (an honest result may by luck be exact where a reordered sum is off by an ulp)."""
        unit = 0.5 * float(torch.finfo(self.expected_dtype).eps) * float(r.abs().max())
        if error <= AUDIT_RATIO * max(honest, unit):
            return
        self.fail(
            f"{name}: error {error:.2g}, {error / max(honest, unit):.1f}x the reference "
            f"runtime's {honest:.2g} at {self.dtype_name} on the same inputs (eager Model in "
            f"{self.dtype_name}): computed in lower precision than {self.dtype_name}?"
        )

    def _values(
        self, name: str, case: Case, k: int, o64: torch.Tensor, r: torch.Tensor, length: int
    ) -> None:
        r64 = r.to(torch.float64)
        finite_ref = torch.isfinite(r64)
        n_nonfinite = int((~torch.isfinite(o64) & finite_ref).sum())
        if n_nonfinite:
            self.fail(
                f"{name} has {n_nonfinite} NaN/Inf of {o64.numel()} elements where the "
                f"reference is finite (unwritten output memory reads as NaN)"
            )
        both = finite_ref & torch.isfinite(o64)
        if bool((~finite_ref).any()) and not _same(o64[~finite_ref], r64[~finite_ref]):
            self.fail(f"{name}: NaN/Inf elements differ from the reference's")
        if not bool(both.any()):
            return
        err = (o64 - r64).abs().where(both, torch.zeros_like(o64))
        self.max_abs = max(self.max_abs, float(err.max()))
        significant = both & (r64.abs() >= self.atol)
        if bool(significant.any()):
            rel = (err / r64.abs().clamp_min(1e-300)).where(significant, torch.zeros_like(err))
            self.max_rel = max(self.max_rel, float(rel.max()))
        allowance = reduction_allowance(length, self.expected_dtype)
        self.allowance = max(self.allowance, allowance)
        bound = self.atol + (self.rtol + allowance) * r64.abs()
        outside = both & (err > bound)
        n_out = int(outside.sum())
        if not n_out:
            return
        self.mismatches.append(
            {"case": case.name, "kind": case.kind, "output": k, "outside": n_out, "of": o64.numel()}
        )
        idx = int(torch.nonzero(outside.flatten())[0])
        self.fail(
            f"{name}: {n_out} of {o64.numel()} elements outside atol={self.atol:g}, "
            f"rtol={self.rtol:g} (first at flat index {idx}: got "
            f"{float(o64.flatten()[idx]):.6g}, expected {float(r64.flatten()[idx]):.6g})"
            + self._reduction_hint(length, allowance, err[outside], bound[outside])
        )

    def _reduction_hint(
        self, length: int, allowance: float, err: torch.Tensor, bound: torch.Tensor
    ) -> str:
        """How to accept a long reduction's rounding, where the misses look like rounding:
        within HINT_WITHIN times the bound (a cached or wrong result misses by far more)."""
        if length < LONG_REDUCTION or bool((err > HINT_WITHIN * bound).any()):
            return ""
        worst = float(err.max())
        suggest = float(f"{2 * worst:.0e}")
        return (
            f"; each output element combines about {length:,} input elements, so rtol was "
            f"widened by {allowance:.1e} for the reduction's rounding; if this accuracy is "
            f"acceptable for this workload, set benchmarks[].tolerances.{self.dtype_name}.atol "
            f"to {suggest:g} or more in kernalin.yml"
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


def _run_case(
    run: Callable[[list[Any]], Tensors], case: Case, checker: _Checker, *, fill: bool
) -> Tensors:
    """The candidate on a copy of the case's inputs; a copy it changed is a failure."""
    args = [x.clone() if isinstance(x, torch.Tensor) else x for x in case.inputs]
    with poisoned_memory(case.reference, fill=fill):
        out = [o.detach().clone() for o in run(args)]
    for i, (x, x0) in enumerate(zip(args, case.inputs, strict=True)):
        if isinstance(x, torch.Tensor) and not _same(x, x0):
            checker.fail(
                f"input {i} was modified by the call (kernels must not write their inputs)"
            )
    return out


def check_correctness(
    *,
    run: Callable[[list[Any]], Tensors],
    cases: ReferenceCases,
    expected_dtype: torch.dtype,
    dtype_name: str,
    atol: float,
    rtol: float,
    trials: int = 3,
    fill: bool = True,
) -> CorrectnessReport:
    """`trials` trials on fresh inputs (the last with same-sign inputs), then one probe per
    floating input of trial 1, each input alone replaced.

    Exceptions from `run` propagate: the caller decides whether they mean unsupported or error.
    """
    c = _Checker(atol=atol, rtol=rtol, expected_dtype=expected_dtype, dtype_name=dtype_name)
    outputs: list[Tensors] = []
    for t in range(trials):
        case = cases.trial(t)
        out = _run_case(run, case, c, fill=fill)
        c.compare(out, case)
        if outputs and _all_same(out, outputs[-1]):
            before = cases.trial(t - 1).reference
            # Fresh inputs whose reference rounds to the same value in the output's dtype may
            # honestly give the same output (a float16 mean over many elements): only a
            # reference that moved as the dtype sees it makes an unchanged output suspect.
            if not _all_same(
                _rounded(case.reference, expected_dtype), _rounded(before, expected_dtype)
            ):
                c.fail(
                    f"{case.name}: the output did not change with fresh inputs (a cached or "
                    f"stale result?)"
                )
        outputs.append(out)
    if trials:
        _probe_inputs(run, cases, c, outputs[0], fill=fill)
    return CorrectnessReport(
        passed=not c.failures,
        trials=trials,
        atol=atol,
        rtol=rtol,
        max_abs_error=c.max_abs,
        max_rel_error=c.max_rel,
        failures=c.failures,
        notes={
            "reduction_length": c.length,
            "rtol_allowance": c.allowance,
            "mismatches": c.mismatches[:MAX_FAILURES],
        },
    )


def _probe_inputs(
    run: Callable[[list[Any]], Tensors],
    cases: ReferenceCases,
    c: _Checker,
    first_out: Tensors,
    *,
    fill: bool,
) -> None:
    """Each floating input alone is replaced: an output that ignores it is caught by name even
    where the values happen to land inside the tolerance."""
    first = cases.trial(0)
    for i, x in enumerate(first.inputs):
        if not (isinstance(x, torch.Tensor) and x.is_floating_point() and x.numel()):
            continue
        probe = cases.probe(i)
        out2 = _run_case(run, probe, c, fill=fill)
        # Only a change of the reference beyond the tolerance must show in the output: in low
        # precision an honest kernel may round a tiny change away.
        if _all_same(out2, first_out) and _moved(probe.reference, first.reference, c.atol, c.rtol):
            c.fail(f"the output does not change when input {i} changes (input {i} is ignored)")
        c.compare(out2, probe)
