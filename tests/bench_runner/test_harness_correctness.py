"""The correctness gate against deliberately bad kernels: each is caught, an honest one passes."""

from __future__ import annotations

import re

import pytest

from tests.bench_runner.harness_helpers import WORKLOADS

ADVICE = re.compile(r"atol to (\S+) or more")


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


def test_a_kernel_computing_in_bfloat16_behind_float16_is_caught_by_the_precision_audit(prepare):
    # Its error (1.3e-2 to 1.5e-2) is inside float16's default tolerance but about 7x what the
    # workload's Model, eager in float16, errs on the same inputs: `ok` before the audit.
    r = prepare(WORKLOADS / "bfloat16_inside.py", dtype="float16", batch_size=64)
    assert r["status"] == "diverged"
    failure = _failures(r)
    assert "outside atol" not in failure
    assert re.search(r"error 0\.01\d*, \d+\.\dx the reference runtime's \S+ at float16", failure)
    assert "computed in lower precision than float16?" in failure


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


# ---- Low-precision outputs, shape special-casing and long reductions (issue 14) ----


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("batch_size", [4096, 1024])
def test_scalar_loss_in_low_precision_is_not_called_cached(prepare, dtype, batch_size):
    # Before: `diverged` ("did not change with fresh inputs") in float16/bfloat16, because two
    # draws' losses round to the same value. The reference, rounded to the dtype, decides now.
    r = prepare(WORKLOADS / "hinge_loss.py", dtype=dtype, batch_size=batch_size)
    assert r["status"] == "ok", r.get("reason")


@pytest.mark.slow  # inductor compiles on 2 cores
def test_scalar_loss_compiled_in_bfloat16_is_not_called_cached(prepare):
    r = prepare(WORKLOADS / "hinge_loss.py", runtime="torch_compile", dtype="bfloat16")
    assert r["status"] == "ok", r.get("reason")


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_a_cached_scalar_loss_is_still_caught(prepare, dtype):
    r = prepare(WORKLOADS / "cached_loss.py", dtype=dtype, batch_size=4096)
    assert r["status"] == "diverged"
    assert "did not change with fresh inputs" in _failures(r)


def test_shape_special_casing_is_wrong_in_many_elements(prepare):
    """Right at batch 8 only: on drawn inputs a handful of the 9 x 4096 bfloat16 elements miss
    (caught by luck before); the same-sign trial makes hundreds miss."""
    assert prepare(WORKLOADS / "batch_eight_only.py", dtype="bfloat16")["status"] == "ok"
    r = prepare(WORKLOADS / "batch_eight_only.py", dtype="bfloat16", batch_size=9)
    assert r["status"] == "diverged"
    misses = r["details"]["correctness_notes"]["mismatches"]
    drawn = [m["outside"] for m in misses if m["kind"] == "drawn" and m["case"].startswith("trial")]
    same_sign = [m["outside"] for m in misses if m["kind"] == "same sign"]
    assert max(drawn, default=0) < 50  # about 1 in 3,000 elements: a lucky catch
    assert same_sign and same_sign[0] > 400  # over 1% of the elements, every time
    assert same_sign[0] > 20 * max(drawn, default=1)


def _long_mean(error: float):
    """check_correctness on a mean of squares over 4M float32 elements, answered with a
    relative error `error`."""
    import torch

    from bench_runner.correctness import check_correctness
    from bench_runner.references import ReferenceCases

    def make_inputs(seed: int) -> list:
        return [torch.randn(1 << 22, generator=torch.Generator().manual_seed(seed))]

    def reference(xs: list) -> list:
        return [(xs[0].double() ** 2).mean()]

    def run(xs: list) -> list:
        return [((xs[0].double() ** 2).mean() * (1 + error)).float()]

    cases = ReferenceCases(reference=reference, make_inputs=make_inputs, seed=0, trials=3)
    return check_correctness(
        run=run,
        cases=cases,
        expected_dtype=torch.float32,
        dtype_name="float32",
        atol=1e-4,
        rtol=1e-4,
    )


def test_a_long_reduction_gets_a_tolerance_that_grows_with_its_length():
    import torch

    from bench_runner.correctness import reduction_allowance

    # 4M elements: rtol grows by float32 eps x sqrt(4M) = 2.4e-4.
    assert abs(reduction_allowance(1 << 22, torch.float32) - 2.44e-4) < 1e-6
    ok = _long_mean(2.5e-4)  # outside the plain 1e-4 + 1e-4 bound, inside the widened one
    assert ok.passed, ok.failures
    assert ok.notes["reduction_length"] == 1 << 22
    off = _long_mean(1e-3)
    assert not off.passed
    assert "combines about 4,194,304 input elements" in off.failures[0]
    assert "tolerances.float32.atol" in off.failures[0]
    way_off = _long_mean(1e-2)  # far beyond rounding: no advice to widen the tolerance
    assert not way_off.passed and "kernalin.yml" not in way_off.failures[0]


@pytest.mark.slow  # two float32 tensors of 16.7M elements, an ONNX export, float64 references
def test_onnxruntime_on_a_mean_over_16_million_elements_passes_or_says_what_to_set(cpu_process):
    """Issue 14's ONNX Runtime row: a mean over 16.7M float32 elements. ONNX Runtime's CPU
    provider (1.32 here) errs by up to 1.8e-3 relative on it (benchmarks/gpu/gpu_correctness.py
    --parts long), more than the widened rtol: it must then say which tolerance to set."""
    import torch

    from bench_runner.worker_process import Side
    from tests.bench_runner.harness_helpers import prepare_cmd

    # One worker side for both tries, as one process runs a workload's configurations: the
    # second reuses the inputs and float64 references the first drew (the same seed draws the
    # same ones in a fresh process), so only the tolerance differs.
    side = Side(path=str(WORKLOADS / "long_mean.py"), device=torch.device("cpu"), threads=1, seed=0)
    side.load()

    def prepare(**over: float) -> dict:
        return side.prepare(prepare_cmd("onnxruntime", "float32", 4096, **over))

    r = prepare()
    notes = r["details"]["correctness_notes"]
    assert notes["reduction_length"] == 4096 * 4096
    assert abs(notes["rtol_allowance"] - 4.88e-4) < 1e-6
    if r["status"] != "ok":
        assert r["status"] == "diverged", r.get("reason")
        for failure in r["correctness"]["failures"]:
            assert "combines about 16,777,216 input elements" in failure
            assert "set benchmarks[].tolerances.float32.atol to" in failure
        # The advice, taken, is enough: the largest atol advised passes the same run.
        advised = max(float(a) for f in r["correctness"]["failures"] for a in ADVICE.findall(f))
        again = prepare(atol=advised)
        assert again["status"] == "ok", again.get("reason")


def test_float16_accumulation_behind_float32_is_caught_over_a_long_reduction(prepare):
    # The allowance is float32's rounding: a sum done in float16 errs by far more.
    r = prepare(WORKLOADS / "half_sum.py", dtype="float32", batch_size=1)
    assert r["status"] == "diverged"


def test_references_are_computed_once_per_dtype_and_batch_size(cpu_process):
    import torch

    from bench_runner.worker_process import Side
    from tests.bench_runner.harness_helpers import prepare_cmd

    side = Side(path=str(WORKLOADS / "tiny.py"), device=torch.device("cpu"), threads=1, seed=0)
    side.load()
    assert side.build(prepare_cmd("pytorch_eager", "float32", 2))["status"] == "ok"
    assert side.references is not None
    (cases,) = side.references._sets.values()
    computed = cases.computed
    assert computed == 4  # 3 trials and 1 probe
    assert side.build(prepare_cmd("onnxruntime", "float32", 2))["status"] == "ok"
    assert cases.computed == computed  # the second runtime reused them


@pytest.mark.slow  # one inductor compilation
def test_checks_run_the_compiled_program_that_is_timed(prepare):
    # Deterministic mode is part of torch.compile's guards: switching it on for the checks would
    # compile (and check) a second program. The checks now leave it alone.
    from torch._dynamo.utils import counters

    r = prepare(WORKLOADS / "tiny.py", runtime="torch_compile", batch_size=2)
    assert r["status"] == "ok", r.get("reason")
    assert int(counters["stats"].get("unique_graphs", 0)) == 1
