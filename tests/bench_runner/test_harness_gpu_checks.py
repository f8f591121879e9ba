"""Hidden work versus a shared GPU, clocks and NVML: the decisions, on the CPU.

The numbers are the issue's H200 observations; the GPU halves of these checks run in
test_harness_gpu.py and benchmarks/gpu_contention.py.
"""

from __future__ import annotations

import sys

import pytest

from bench_runner.gpu_checks import ContentionSigns, StreamCheck
from bench_runner.plan import ConfigSpec
from bench_runner.state import ConfigState
from bench_runner.telemetry import is_throttled, open_telemetry, reason_names


def test_a_call_that_waited_for_other_processes_is_not_hidden_work():
    # Four `rnx bench` runs on one GPU: events 9.6 us, synchronised wall 2368.9 us. After the
    # timed stream is done, this process has nothing left to wait for.
    shared = StreamCheck(event_ns=9_600, wall_ns=2_368_900, after_stream_ns=6_000)
    assert not shared.hidden_work
    assert shared.waited_for_gpu


def test_work_left_on_a_side_stream_is_hidden_work():
    # The side-stream workload: 2203.4 us of events, 10886.0 us of wall, most of it after.
    hidden = StreamCheck(event_ns=2_203_400, wall_ns=10_886_000, after_stream_ns=8_600_000)
    assert hidden.hidden_work and not hidden.waited_for_gpu
    assert "leaves work on another stream" in hidden.hidden_reason()


def test_an_honest_call_on_an_idle_gpu_is_neither():
    quiet = StreamCheck(event_ns=1_100_000, wall_ns=1_160_000, after_stream_ns=8_000)
    assert not quiet.hidden_work and not quiet.waited_for_gpu


def test_other_processes_on_the_gpu_are_contention_the_runs_own_are_not():
    run_pids = {100, 101, 102}
    signs = ContentionSigns(
        gpu_pids=[100, 101, 102, 555], own_pid=100, calibration_spread=1.02, waited_for_gpu=False
    )
    assert signs.others(run_pids) == [555]
    assert signs.seen(run_pids)
    assert "1 other process(es) present on the GPU (pid 555)" in signs.note(run_pids)
    alone = ContentionSigns(
        gpu_pids=[100, 101], own_pid=100, calibration_spread=1.01, waited_for_gpu=False
    )
    assert not alone.seen(run_pids)


def test_a_process_that_only_holds_a_context_is_not_contention():
    run_pids = {100}
    idle = ContentionSigns(
        gpu_pids=[100, 555], own_pid=100, calibration_spread=1.0, waited_for_gpu=False,
        active_pids=[100],
    )  # fmt: skip
    assert idle.others(run_pids) == [] and not idle.seen(run_pids)
    busy = ContentionSigns(
        gpu_pids=[100, 555], own_pid=100, calibration_spread=1.0, waited_for_gpu=False,
        active_pids=[100, 555],
    )  # fmt: skip
    assert busy.seen(run_pids) and "running kernels on the GPU (pid 555)" in busy.note(run_pids)
    assert ContentionSigns.from_message(busy.as_message()) == busy


def test_pids_from_another_namespace_are_unknown_not_foreign():
    # In a container NVML lists host pids: this worker is not among them, so no pid is "other".
    signs = ContentionSigns(
        gpu_pids=[40001, 40002], own_pid=7, calibration_spread=None, waited_for_gpu=False
    )
    assert signs.others({7}) is None and not signs.seen({7})
    slow_kernel = ContentionSigns(
        gpu_pids=None, own_pid=7, calibration_spread=3.2, waited_for_gpu=False
    )
    assert slow_kernel.seen({7}) and "3.2x its fastest" in slow_kernel.note({7})


def test_samples_below_75_percent_of_the_default_clock_are_flagged_throttled():
    assert is_throttled(1400, 1980) and not is_throttled(1500, 1980)
    assert not is_throttled(None, 1980) and not is_throttled(1400, None)
    st = ConfigState(ConfigSpec("pytorch_eager", "float16", 8))
    st.details["default_sm_mhz"] = 1980
    for i, mhz in enumerate([1980, 1410, 1755, 1200]):
        telemetry = {"sm_mhz": mhz, "power_w": 650.0, "temp_c": 70}
        st.add_sample({"ns": 1000 + i, "telemetry": telemetry}, i, 0)
    found = st.telemetry_details()
    assert found is not None
    assert found["sm_mhz"] == [1980, 1410, 1755, 1200]
    assert found["throttled"] == [1, 3]


def test_no_telemetry_on_a_cpu_run_means_no_telemetry_details():
    st = ConfigState(ConfigSpec("pytorch_eager", "float32", 8))
    st.add_sample({"ns": 5}, 0, 0)
    assert st.telemetry_details() is None


def test_clock_event_reasons_are_named():
    assert reason_names(0x4 | 0x40) == ["sw_power_cap", "hw_thermal_slowdown"]


def test_without_nvidia_ml_py_telemetry_is_off_with_its_reason(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml raises ImportError
    t = open_telemetry("abc", 0)
    assert not t.available
    assert "nvidia-ml-py is not installed" in (t.reason or "")
    assert t.read() == {"sm_mhz": None, "power_w": None, "temp_c": None}
    assert t.compute_pids() is None and t.clock_reasons() is None
    assert t.describe() == {"nvml": False, "nvml_reason": t.reason}


def test_when_nvml_fails_here_it_is_recorded_not_raised():
    pytest.importorskip("pynvml", reason="nvidia-ml-py is not installed in this environment")
    t = open_telemetry(None, 0)
    if t.available:
        pytest.skip("NVML works on this machine (it has an NVIDIA driver)")
    assert "NVML is not usable here" in (t.reason or "")
    assert t.read()["sm_mhz"] is None
