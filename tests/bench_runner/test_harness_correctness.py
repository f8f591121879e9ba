"""The correctness gate against deliberately bad kernels: each is caught, an honest one passes."""

from __future__ import annotations

import pytest

from tests.bench_runner.harness_helpers import WORKLOADS


def _failures(result: dict) -> str:
    return " | ".join(result["correctness"]["failures"])


def test_ignored_input_is_caught_by_name(prepare):
    r = prepare(WORKLOADS / "ignores_input.py")
    assert r["status"] == "diverged"
    assert "input 1 is ignored" in _failures(r)


def test_partial_write_is_caught_through_poisoned_memory(prepare):
    r = prepare(WORKLOADS / "partial_write.py")
    assert r["status"] == "diverged"
    assert "NaN/Inf" in _failures(r)


def test_mutated_input_is_caught_even_when_values_are_right(prepare):
    r = prepare(WORKLOADS / "mutates_input.py")
    assert r["status"] == "diverged"
    failures = _failures(r)
    assert "input 0 was modified" in failures
    assert "outside atol" not in failures  # the values alone would have passed


def test_cached_tensor_is_caught(prepare):
    r = prepare(WORKLOADS / "cached_output.py")
    assert r["status"] == "diverged"
    assert "did not change with fresh inputs" in _failures(r)


def test_kernel_right_at_one_batch_size_only(prepare):
    assert prepare(WORKLOADS / "one_batch_size.py", batch_size=8)["status"] == "ok"
    r = prepare(WORKLOADS / "one_batch_size.py", batch_size=2)
    assert r["status"] == "diverged"
    assert "outside atol" in _failures(r)


def test_silent_lower_precision_is_caught_in_float32(prepare):
    r = prepare(WORKLOADS / "lower_precision.py", dtype="float32")
    assert r["status"] == "diverged"
    assert r["correctness"]["max_rel_error"] > 1e-4


@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16", "float16"])
def test_honest_fused_rewrite_passes(prepare, dtype):
    r = prepare(WORKLOADS / "honest_fused.py", dtype=dtype)
    assert r["status"] == "ok", r.get("reason")
    c = r["correctness"]
    assert c["passed"] and c["trials"] >= 3 and not c["failures"]
    assert 0 <= c["max_abs_error"] <= c["atol"] + c["rtol"] * 10


def test_tighter_tolerance_from_config_turns_honest_into_diverged(prepare):
    # Tolerances come from the caller (kernalin.yml): a bound below bfloat16's rounding fails.
    r = prepare(WORKLOADS / "honest_fused.py", dtype="bfloat16", atol=1e-6, rtol=1e-6)
    assert r["status"] == "diverged"
    assert r["correctness"]["atol"] == 1e-6


def test_diverged_configuration_is_not_timed(prepare):
    r = prepare(WORKLOADS / "partial_write.py")
    assert "timing_method" not in r["details"]
    assert "estimate_ns" not in r
