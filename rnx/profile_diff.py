"""What moved between a configuration's base and head profiles, ranked: the diff that explains.

`diff_profiles` matches operators and kernels by their normalised names
(bench_runner/profiling.py) and returns the changes above the noise floor, largest first:

    +180 µs aten::_softmax (kernel softmax_warp_forward → cunn_SoftMaxForward, 1 → 2 launches)
    new kernel triton_red_fused_0 95.0 µs
    host-side time +40.0 µs (launches 9 → 14)

The noise floor. A profile's times come from a few calls and move from run to run; its
structure (which operators and kernels, how many calls and launches) does not. So:

- a structural change (an operator or kernel new or gone, its calls, launches or kernels
  changed) is shown when it moved at least MIN_DELTA_NS;
- a change of time alone is shown only when it is at least NOISE_SHARE_OF_ROW of the row's
  own base time and its share of the profiled time moved by NOISE_SHARE_OF_TOTAL: shares,
  because a busy machine slows every operator of a profile at once (up to 2x between
  profiles on a shared 2-core runner), which moves times but not shares.

Structural changes rank first (they are certain), then changes of time, largest first.

An unchanged workload has the same structure on both sides, so only a time swing past both
shares shows (tests/rnx/test_profile_diff.py and benchmarks/harness/profile_diff.py measure how
often: never in their replays). A diff explains; the verdict stays the statistics'.
"""

from __future__ import annotations

from collections.abc import Sequence

from rnx.formatting import format_ns
from rnx.schema import KernelProfile, OperatorProfile, Profile, ProfileChange

MIN_DELTA_NS = 1_000.0
NOISE_SHARE_OF_TOTAL = 0.20
NOISE_SHARE_OF_ROW = 0.50
# Calls and launches are per call of the configuration (averages over the profiled calls).
COUNT_CHANGE = 0.5
MAX_CHANGES = 10


def _signed(ns: float) -> str:
    return ("+" if ns >= 0 else "-") + format_ns(abs(ns))


def _count(value: float) -> str:
    return f"{value:.0f}" if abs(value - round(value)) < 0.05 else f"{value:.1f}"


def _launches(value: float) -> str:
    return f"{_count(value)} launch{'' if abs(value - 1) < 0.05 else 'es'}"


def _hidden_by_cap(missing_side: Profile, ns: float, rows: Sequence[float]) -> bool:
    """A row absent from a side whose rows were capped may only have been cut: unknown, not
    gone, unless it is larger than every row that side kept."""
    return missing_side.other_rows > 0 and (not rows or ns <= min(rows))


def _time_only_shown(delta: float, base_ns: float, base_share: float, head_share: float) -> bool:
    return (
        abs(delta) >= max(MIN_DELTA_NS, NOISE_SHARE_OF_ROW * base_ns)
        and abs(head_share - base_share) >= NOISE_SHARE_OF_TOTAL
    )


def _structural(change: ProfileChange) -> bool:
    return "(" in change.text or change.text.startswith(("new ", "operator ", "kernel "))


def _operator_changes(base: Profile, head: Profile, total: float) -> list[ProfileChange]:
    b = {o.name: o for o in base.operators}
    h = {o.name: o for o in head.operators}
    out = []
    for name in sorted(b.keys() | h.keys()):
        bo, ho = b.get(name), h.get(name)
        if bo is None and ho is not None:
            if _hidden_by_cap(base, ho.self_ns, [o.self_ns for o in base.operators]):
                continue
            change = _new_operator(ho)
        elif ho is None and bo is not None:
            if _hidden_by_cap(head, bo.self_ns, [o.self_ns for o in head.operators]):
                continue
            change = _gone_operator(bo)
        elif bo is not None and ho is not None:
            change = _changed_operator(bo, ho, total)
        else:
            change = None
        if change is not None:
            out.append(change)
    return out


def _kernels_text(kernels: Sequence[str]) -> str:
    return ", ".join(kernels) if kernels else "none"


def _new_operator(o: OperatorProfile) -> ProfileChange | None:
    if o.self_ns < MIN_DELTA_NS:
        return None
    extra = f" (kernel {_kernels_text(o.kernels)}, {_launches(o.launches)})" if o.kernels else ""
    text = f"new operator {o.name} {format_ns(o.self_ns)}{extra}"
    return ProfileChange(kind="operator", name=o.name, delta_ns=o.self_ns, text=text)


def _gone_operator(o: OperatorProfile) -> ProfileChange | None:
    if o.self_ns < MIN_DELTA_NS:
        return None
    text = f"operator {o.name} gone {_signed(-o.self_ns)}"
    return ProfileChange(kind="operator", name=o.name, delta_ns=-o.self_ns, text=text)


def _changed_operator(
    bo: OperatorProfile, ho: OperatorProfile, total: float
) -> ProfileChange | None:
    delta = ho.self_ns - bo.self_ns
    notes = []
    if set(bo.kernels) != set(ho.kernels):
        notes.append(f"kernel {_kernels_text(bo.kernels)} → {_kernels_text(ho.kernels)}")
    if abs(ho.calls - bo.calls) >= COUNT_CHANGE:
        notes.append(f"calls {_count(bo.calls)} → {_count(ho.calls)}")
    if abs(ho.launches - bo.launches) >= COUNT_CHANGE:
        notes.append(f"{_count(bo.launches)} → {_launches(ho.launches)}")
    if notes and abs(delta) < MIN_DELTA_NS:
        return None
    if not notes and not _time_only_shown(delta, bo.self_ns, bo.share, ho.share):
        return None
    extra = f" ({', '.join(notes)})" if notes else ""
    text = f"{_signed(delta)} {ho.name}{extra}"
    return ProfileChange(kind="operator", name=ho.name, delta_ns=delta, text=text)


def _kernel_changes(
    base: Profile, head: Profile, total: float, explained: set[str]
) -> list[ProfileChange]:
    """Kernels no operator row already names: new, gone, or launched a different number of
    times (ONNX Runtime's and TensorRT's kernels have no PyTorch operator above them)."""
    b = {k.name: k for k in base.kernels}
    h = {k.name: k for k in head.kernels}
    out = []
    for name in sorted((b.keys() | h.keys()) - explained):
        bk, hk = b.get(name), h.get(name)
        change = _kernel_change(base, head, bk, hk, total)
        if change is not None:
            out.append(change)
    return out


def _kernel_change(
    base: Profile,
    head: Profile,
    bk: KernelProfile | None,
    hk: KernelProfile | None,
    total: float,
) -> ProfileChange | None:
    if bk is None and hk is not None:
        if hk.ns < MIN_DELTA_NS or _hidden_by_cap(base, hk.ns, [k.ns for k in base.kernels]):
            return None
        text = f"new kernel {hk.name} {format_ns(hk.ns)} ({_launches(hk.launches)})"
        return ProfileChange(kind="kernel", name=hk.name, delta_ns=hk.ns, text=text)
    if hk is None and bk is not None:
        if bk.ns < MIN_DELTA_NS or _hidden_by_cap(head, bk.ns, [k.ns for k in head.kernels]):
            return None
        text = f"kernel {bk.name} gone {_signed(-bk.ns)}"
        return ProfileChange(kind="kernel", name=bk.name, delta_ns=-bk.ns, text=text)
    if bk is None or hk is None:
        return None
    delta = hk.ns - bk.ns
    launched = abs(hk.launches - bk.launches) >= COUNT_CHANGE
    if launched and abs(delta) < MIN_DELTA_NS:
        return None
    if not launched and not _time_only_shown(delta, bk.ns, bk.share, hk.share):
        return None
    extra = f" ({_count(bk.launches)} → {_launches(hk.launches)})" if launched else ""
    text = f"{_signed(delta)} kernel {hk.name}{extra}"
    return ProfileChange(kind="kernel", name=hk.name, delta_ns=delta, text=text)


def _host_change(base: Profile, head: Profile) -> ProfileChange | None:
    """The timed median less the kernels' time (GPU profiles): launch overhead and gaps."""
    if None in (base.timed_median_ns, head.timed_median_ns, base.kernel_ns, head.kernel_ns):
        return None
    base_host = max(0.0, (base.timed_median_ns or 0.0) - (base.kernel_ns or 0.0))
    head_host = max(0.0, (head.timed_median_ns or 0.0) - (head.kernel_ns or 0.0))
    delta = head_host - base_host
    base_share = base_host / (base.timed_median_ns or 1.0)
    head_share = head_host / (head.timed_median_ns or 1.0)
    launched = abs(head.launches_per_call - base.launches_per_call) >= COUNT_CHANGE
    if launched and abs(delta) < MIN_DELTA_NS:
        return None
    if not launched and not _time_only_shown(delta, base_host, base_share, head_share):
        return None
    extra = (
        f" (launches {_count(base.launches_per_call)} → {_count(head.launches_per_call)})"
        if launched
        else ""
    )
    text = f"host-side time {_signed(delta)}{extra}"
    return ProfileChange(kind="host", name="host-side time", delta_ns=delta, text=text)


def diff_profiles(base: Profile, head: Profile, *, limit: int = MAX_CHANGES) -> list[ProfileChange]:
    """The changes from base to head above the noise floor, largest |time| first, at most
    `limit`. Profiles of different bases (device time against CPU time) are not compared."""
    if base.time_basis != head.time_basis:
        return []
    total = max(base.total_ns, head.total_ns)
    changes = _operator_changes(base, head, total)
    explained = {
        k
        for c in changes
        for o in (*base.operators, *head.operators)
        if o.name == c.name
        for k in o.kernels
    }
    changes += _kernel_changes(base, head, total, explained)
    host = _host_change(base, head)
    if host is not None:
        changes.append(host)
    changes.sort(key=lambda c: (not _structural(c), -abs(c.delta_ns), c.text))
    return changes[:limit]


__all__ = ["MIN_DELTA_NS", "NOISE_SHARE_OF_ROW", "NOISE_SHARE_OF_TOTAL", "diff_profiles"]
