"""The kernels timer's arithmetic: profiler events to per-call kernel time (no GPU needed)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from bench_runner.kernel_time import CALL_RANGE, GpuActivity, attribute, from_profile


def event(name, start, end, *, id=0, device="CUDA", annotation=False):
    """A FunctionEvent-like record as torch.profiler's prof.events() gives (times in us)."""
    return SimpleNamespace(
        name=name,
        id=id,
        device_type=f"DeviceType.{device}",
        time_range=SimpleNamespace(start=start, end=end),
        is_user_annotation=annotation,
    )


def launch(name, at, id):
    return event(name, at, at + 1.0, id=id, device="CPU")


def two_calls_with_our_flush_and_spin():
    """Host: flush and spin launched before each call, the calls inside their ranges. GPU: our
    FillFunctor and spin before each call's kernels; call 2 has a memset and a memcpy too, and
    launches a FillFunctor of its own (the same name as our flush's)."""
    return [
        # call 1: host 100-130; our flush (id 1) and spin (id 2) launched before it
        launch("cudaLaunchKernel", 90, 1),
        launch("cudaLaunchKernel", 95, 2),
        event(CALL_RANGE, 100, 130, device="CPU", annotation=True),
        launch("cudaLaunchKernel", 105, 3),
        launch("cuLaunchKernelEx", 110, 4),  # a Triton kernel, through the driver API
        event("aten::addmm", 104, 109, id=3, device="CPU"),  # an op: same id, not a launch
        event("void at::native::FillFunctor<int>", 200, 230, id=1),
        event("spin_kernel", 230, 330, id=2),
        event("gemv_kernel", 331, 335, id=3),
        event("triton_poi_fused_gelu_0", 336.5, 338.5, id=4),
        event(CALL_RANGE, 330, 339, annotation=True),  # the range drawn on the GPU timeline
        # call 2: host 150-190
        launch("cudaLaunchKernel", 140, 5),
        launch("cudaLaunchKernel", 145, 6),
        event(CALL_RANGE, 150, 190, device="CPU", annotation=True),
        launch("cudaMemsetAsync", 152, 7),
        launch("cudaLaunchKernel", 160, 8),
        launch("cudaMemcpyAsync", 170, 9),
        launch("cudaStreamWaitEvent", 175, 10),
        event("void at::native::FillFunctor<int>", 400, 430, id=5),
        event("spin_kernel", 430, 530, id=6),
        event("Memset (Device)", 531, 532, id=7),
        event("void at::native::FillFunctor<float>", 533, 536, id=8),
        event("Memcpy DtoD (Device -> Device)", 537, 539, id=9),
        event("Stream Wait Event", 520, 540, id=10),  # a wait, not work
        event("unknown_kernel", 541, 542, id=99),  # no launch record
    ]


def test_two_calls_are_split_and_our_flush_and_spin_left_out():
    found = attribute(*from_profile(two_calls_with_our_flush_and_spin()))
    assert len(found.calls) == 2
    first, second = found.calls
    assert first.count == 2 and first.kernel_ns == pytest.approx(6_000)  # 4 + 2 us
    assert first.span_ns == pytest.approx(7_500)  # 331 to 338.5: the gap is not kernel time
    # The call's own FillFunctor counts; ours, launched outside the range, does not.
    assert second.count == 3 and second.kernel_ns == pytest.approx(6_000)  # 1 + 3 + 2 us
    assert found.outside == 4  # two flushes, two spins
    assert found.unattributed == 1
    assert found.mean_kernel_ns == pytest.approx(6_000)
    assert found.median_count == 2.5


def test_a_call_that_launched_nothing_has_no_kernel_time():
    calls = [(0.0, 10.0), (20.0, 30.0)]
    acts = [GpuActivity("k", 50.0, 55.0, launched_at_us=25.0)]
    found = attribute(acts, calls)
    assert [c.count for c in found.calls] == [0, 1]
    assert [c.kernel_ns for c in found.calls] == [0.0, 5_000.0]
    assert found.mean_kernel_ns == pytest.approx(2_500)


def test_launches_on_a_range_boundary_belong_to_it_and_between_ranges_to_none():
    calls = [(0.0, 10.0), (20.0, 30.0)]
    acts = [
        GpuActivity("a", 1, 2, launched_at_us=0.0),
        GpuActivity("b", 1, 2, launched_at_us=10.0),
        GpuActivity("c", 1, 2, launched_at_us=15.0),
        GpuActivity("d", 1, 2, launched_at_us=-1.0),
        GpuActivity("e", 1, 2, launched_at_us=31.0),
    ]
    found = attribute(acts, calls)
    assert [c.count for c in found.calls] == [2, 0]
    assert found.outside == 3


def test_overlapping_call_ranges_are_refused():
    with pytest.raises(ValueError, match="overlap"):
        attribute([], [(0.0, 10.0), (5.0, 20.0)])


def test_rnx_bench_takes_the_gpu_timer_and_refuses_others_naming_the_flag():
    from bench_runner.cli import _harness, _parser
    from rnx.config import ConfigError, parse_config

    config = parse_config({"harness": {"gpu-timer": "kernels"}})
    assert _harness(_parser().parse_args(["w.py"]), config).gpu_timer == "kernels"
    flag = _parser().parse_args(["w.py", "--gpu-timer", "events"])
    assert _harness(flag, config).gpu_timer == "events"  # the flag wins over the file
    with pytest.raises(ConfigError, match=r"--gpu-timer: 'cuda' is not allowed"):
        _harness(_parser().parse_args(["w.py", "--gpu-timer", "cuda"]), config)
