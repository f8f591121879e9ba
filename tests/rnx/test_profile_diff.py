"""The profile diff: what moved is named and ranked, and an unchanged profile shows nothing."""

from __future__ import annotations

import random
from typing import Any

from rnx.profile_diff import MIN_DELTA_NS, NOISE_SHARE_OF_TOTAL, diff_profiles
from rnx.schema import Profile


def _profile(ops: dict[str, tuple[float, float, list[str], float]], **kw: Any) -> Profile:
    """ops: name -> (calls, self ns, kernels, launches), all per call."""
    total = sum(v[1] for v in ops.values()) or 1.0
    kernels: dict[str, dict[str, float]] = {}
    for _calls, ns, names, launches in ops.values():
        for k in names:
            row = kernels.setdefault(k, {"launches": 0.0, "ns": 0.0})
            row["launches"] += launches / len(names)
            row["ns"] += ns / len(names)
    gpu = any(v[2] for v in ops.values())
    data: dict[str, Any] = {
        "source": "torch.profiler",
        "time_basis": "device" if gpu else "cpu",
        "calls": 5,
        "total_ns": total,
        "launches_per_call": sum(v[3] for v in ops.values()),
        "kernel_ns": total if gpu else None,
        "operators": [
            {
                "name": n,
                "calls": c,
                "self_ns": ns,
                "share": ns / total,
                "launches": la,
                "kernels": ks,
            }
            for n, (c, ns, ks, la) in ops.items()
        ],
        "kernels": [
            {"name": k, "launches": r["launches"], "ns": r["ns"], "share": r["ns"] / total}
            for k, r in kernels.items()
        ],
    }
    data.update(kw)
    return Profile(**data)


CPU_BASE = {
    "aten::addmm": (1, 400_000.0, [], 0),
    "aten::_softmax": (1, 120_000.0, [], 0),
    "aten::relu": (1, 30_000.0, [], 0),
    "aten::t": (1, 2_000.0, [], 0),
}


def test_an_extra_operator_is_ranked_first_with_its_calls():
    head = {**CPU_BASE, "aten::_softmax": (2, 240_000.0, [], 0)}
    changes = diff_profiles(_profile(CPU_BASE), _profile(head))
    assert changes[0].name == "aten::_softmax"
    assert changes[0].text == "+120 µs aten::_softmax (calls 1 → 2)"
    assert len(changes) == 1


def test_the_swapped_kernel_and_the_launches_are_named():
    base = {
        "aten::_softmax": (1, 300_000.0, ["softmax_warp_forward"], 1),
        "aten::mm": (1, 500_000.0, ["sm90_gemm"], 1),
    }
    head = {**base, "aten::_softmax": (1, 480_000.0, ["cunn_SoftMaxForward"], 2)}
    (change,) = diff_profiles(_profile(base), _profile(head))
    assert change.text == (
        "+180 µs aten::_softmax (kernel softmax_warp_forward → cunn_SoftMaxForward, 1 → 2 launches)"
    )


def test_a_new_kernel_without_an_operator_and_host_time():
    # ONNX Runtime on a GPU: kernels with no PyTorch operator above them.
    base = _profile(
        {"ort": (1, 0.0, [], 0)},
        time_basis="device",
        kernel_ns=200_000.0,
        total_ns=200_000.0,
        timed_median_ns=260_000.0,
        launches_per_call=9,
        kernels=[{"name": "gemm", "launches": 9, "ns": 200_000.0, "share": 1.0}],
    )
    head = base.model_copy(
        update={
            "kernel_ns": 295_000.0,
            "total_ns": 295_000.0,
            "timed_median_ns": 395_000.0,
            "launches_per_call": 14,
            "kernels": [
                *base.kernels,
                *_profile(
                    {"x": (1, 95_000.0, ["triton_red_fused_0"], 5)},
                ).kernels,
            ],
        }
    )
    texts = [c.text for c in diff_profiles(base, head)]
    assert texts == [
        "new kernel triton_red_fused_0 95 µs (5 launches)",
        "host-side time +40 µs (launches 9 → 14)",
    ]


def test_a_new_and_a_gone_operator():
    head = {k: v for k, v in CPU_BASE.items() if k != "aten::relu"}
    head["aten::gelu"] = (1, 60_000.0, [], 0)
    texts = [c.text for c in diff_profiles(_profile(CPU_BASE), _profile(head))]
    assert texts == ["new operator aten::gelu 60 µs", "operator aten::relu gone -30 µs"]


def _jittered(rng: random.Random, ops: dict, spread: float) -> dict:
    return {
        k: (c, ns * rng.uniform(1 - spread, 1 + spread), ks, la)
        for k, (c, ns, ks, la) in ops.items()
    }


def test_an_unchanged_profile_with_run_to_run_jitter_shows_nothing():
    """The noise floor: timings of the same structure that move by up to 20% per row never
    show, in 1000 pairs."""
    rng = random.Random(7)
    shown = [
        diff_profiles(
            _profile(_jittered(rng, CPU_BASE, 0.2)), _profile(_jittered(rng, CPU_BASE, 0.2))
        )
        for _ in range(1000)
    ]
    assert sum(bool(s) for s in shown) == 0


def test_the_floor_is_where_the_docstring_puts_it():
    # A change of time alone: shown once it is 50% of the row's base time and its share of
    # the profile moved by 20 points. aten::_softmax: 120 of 552 µs (21.7%).
    for delta, shown in ((150_000.0, False), (230_000.0, True)):  # 38.5%, 44.8%
        moved = {**CPU_BASE, "aten::_softmax": (1, 120_000.0 + delta, [], 0)}
        changes = diff_profiles(_profile(CPU_BASE), _profile(moved))
        assert [c.name for c in changes] == (["aten::_softmax"] if shown else [])
    # A whole profile twice as slow (a busy machine) moves no share: nothing to show.
    slow = {k: (c, 2 * ns, ks, la) for k, (c, ns, ks, la) in CPU_BASE.items()}
    assert diff_profiles(_profile(CPU_BASE), _profile(slow)) == []
    assert NOISE_SHARE_OF_TOTAL == 0.20
    # A structural change is shown from MIN_DELTA_NS on; below it, not.
    tiny = {**CPU_BASE, "aten::view": (1, MIN_DELTA_NS * 1.5, [], 0)}
    assert [c.name for c in diff_profiles(_profile(CPU_BASE), _profile(tiny))] == ["aten::view"]
    tinier = {**CPU_BASE, "aten::view": (1, MIN_DELTA_NS * 0.5, [], 0)}
    assert diff_profiles(_profile(CPU_BASE), _profile(tinier)) == []


def test_a_row_cut_by_the_cap_is_not_called_gone():
    base = _profile(CPU_BASE)
    head = _profile(
        {k: v for k, v in CPU_BASE.items() if k != "aten::t"}, other_rows=1, other_ns=2_000.0
    )
    assert diff_profiles(base, head) == []


def test_device_and_cpu_profiles_are_not_compared():
    gpu = _profile({"aten::mm": (1, 5e5, ["gemm"], 1)})
    assert diff_profiles(_profile(CPU_BASE), gpu) == []
