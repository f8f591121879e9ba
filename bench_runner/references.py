"""The inputs a candidate is checked on and their float64 references, computed once per run.

A reference depends on the dtype and batch size (the inputs and weights are rounded to the
dtype), never on the runtime: the float64 eager Model gives the same answer whether the
candidate is eager, compiled or exported. The worker that checks keeps one `ReferenceCases` per
(dtype, batch size) and every runtime of that pair is checked against the same cases.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

Tensors = list[torch.Tensor]

# Kinds of trial inputs. "drawn": as the workload's get_inputs() draws them. "same sign": every
# floating input made non-negative, so sums over any dimension add up instead of cancelling: a
# kernel whose reduction is wrong for this shape (a hard-coded batch size, a dropped tail) is then
# wrong in most elements, not in the few where random signs happen not to cancel.
DRAWN = "drawn"
SAME_SIGN = "same sign"


def trial_kinds(trials: int) -> list[str]:
    """The last trial (of two or more) uses same-sign inputs; the others are drawn."""
    if trials < 2:
        return [DRAWN] * trials
    return [DRAWN] * (trials - 1) + [SAME_SIGN]


@dataclass(frozen=True)
class Case:
    """Pristine inputs (callers hand the candidate a copy) and the reference's outputs."""

    name: str
    kind: str
    inputs: list[Any]
    reference: Tensors
    # The largest error of the honest runtime (the workload's Model, eager, in the dtype) on
    # these inputs, per output: what the dtype itself costs (None: no honest runtime).
    honest_errors: list[float] | None = None

    @property
    def nbytes(self) -> int:
        tensors = [x for x in self.inputs if isinstance(x, torch.Tensor)] + self.reference
        return sum(t.numel() * t.element_size() for t in tensors)


def _same_sign(inputs: list[Any]) -> list[Any]:
    return [x.abs() if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in inputs]


def _settle(tensors: list[Any]) -> None:
    """Wait for the GPU work behind these tensors, so the timers above see its cost."""
    if any(isinstance(x, torch.Tensor) and x.is_cuda for x in tensors):
        torch.cuda.synchronize()


def max_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    """The largest absolute error over the elements finite in both (0.0 for non-floats)."""
    if not ref.is_floating_point() or out.shape != ref.shape:
        return 0.0
    o, r = out.detach().to(ref.device, torch.float64), ref.to(torch.float64)
    both = torch.isfinite(o) & torch.isfinite(r)
    return float((o - r).abs()[both].max()) if bool(both.any()) else 0.0


def _fresh_like(x: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    values = torch.randn(x.shape, generator=gen, dtype=torch.float64)
    return values.to(dtype=x.dtype, device=x.device)


class ReferenceCases:
    """Trials and probes for one (dtype, batch size), each computed on first use and kept."""

    def __init__(
        self,
        *,
        reference: Callable[[list[Any]], Tensors],
        make_inputs: Callable[[int], list[Any]],
        seed: int,
        trials: int,
        honest: Callable[[list[Any]], Tensors] | None = None,
    ):
        self._reference = reference
        self._honest = honest
        self._make_inputs = make_inputs
        self._seed = seed
        self._kinds = trial_kinds(trials)
        self._cases: dict[tuple[str, int], Case] = {}
        self.computed = 0  # reference calls made: the tests check reuse with it
        # Where the time goes (benchmarks/harness/harness_budget.py prints it): drawing and
        # placing the inputs, and the float64 reference on them.
        self.inputs_ns = 0
        self.reference_ns = 0

    def _compute(self, name: str, kind: str, inputs: list[Any]) -> Case:
        self.computed += 1
        t0 = time.perf_counter_ns()
        ref = [r.detach() for r in self._reference(inputs)]
        honest = None
        if self._honest is not None:
            outs = self._honest([x.clone() if isinstance(x, torch.Tensor) else x for x in inputs])
            honest = [max_error(o, r) for o, r in zip(outs, ref, strict=True)]
        _settle(ref)
        self.reference_ns += time.perf_counter_ns() - t0
        return Case(name=name, kind=kind, inputs=inputs, reference=ref, honest_errors=honest)

    def trial(self, t: int) -> Case:
        key = ("trial", t)
        if key not in self._cases:
            kind = self._kinds[t] if t < len(self._kinds) else DRAWN
            t0 = time.perf_counter_ns()
            inputs = self._make_inputs(self._seed + 1000 + t)
            if kind == SAME_SIGN:
                inputs = _same_sign(inputs)
            _settle(inputs)
            self.inputs_ns += time.perf_counter_ns() - t0
            self._cases[key] = self._compute(f"trial {t + 1}", kind, inputs)
        return self._cases[key]

    def probe(self, i: int) -> Case:
        """Trial 1's inputs with input i alone replaced by fresh values."""
        key = ("probe", i)
        if key not in self._cases:
            base = self.trial(0).inputs
            t0 = time.perf_counter_ns()
            gen = torch.Generator().manual_seed(self._seed + 4242 + i)
            probe = list(base)
            probe[i] = _fresh_like(base[i], gen)
            _settle(probe)
            self.inputs_ns += time.perf_counter_ns() - t0
            self._cases[key] = self._compute(f"probe of input {i}", DRAWN, probe)
        return self._cases[key]

    @property
    def nbytes(self) -> int:
        return sum(c.nbytes for c in self._cases.values())


class ReferenceStore:
    """The cases of recent (dtype, batch size) pairs, within a memory budget (oldest go first)."""

    def __init__(self, budget_bytes: int):
        self.budget_bytes = budget_bytes
        self._sets: OrderedDict[tuple[str, int | None], ReferenceCases] = OrderedDict()

    def get(
        self, key: tuple[str, int | None], build: Callable[[], ReferenceCases]
    ) -> ReferenceCases:
        found = self._sets.get(key)
        if found is None:
            found = build()
            self._sets[key] = found
        self._sets.move_to_end(key)
        return found

    def trim(self) -> None:
        """Forget the oldest pairs until what is kept fits the budget (the newest always stays)."""
        while len(self._sets) > 1 and sum(s.nbytes for s in self._sets.values()) > (
            self.budget_bytes
        ):
            self._sets.popitem(last=False)
