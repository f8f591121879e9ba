"""Profile summaries stay small: the worst case the schema allows (every row filled, every name
at its longest, base and head profiles) on 48 configurations fits the server's upload limit."""

from __future__ import annotations

from rnx.schema import MAX_OPERATOR_KERNELS, MAX_PROFILE_NAME, MAX_PROFILE_ROWS, Profile
from testbed.factories import body, make_results

CONFIGS = tuple(
    (runtime, dtype, bs)
    for runtime in ("pytorch_eager", "torch_compile", "onnxruntime", "tensorrt")
    for dtype in ("float32", "float16", "bfloat16")
    for bs in (1, 8, 32, 128)
)


def _worst_profile() -> Profile:
    name = "k" * MAX_PROFILE_NAME
    rows = range(MAX_PROFILE_ROWS)
    return Profile(
        source="torch.profiler",
        time_basis="device",
        calls=7,
        total_ns=1e9,
        launches_per_call=1e3,
        kernel_ns=1e9,
        timed_median_ns=1e9,
        host_share=0.123456789,
        operators=[
            {
                "name": f"{i:03d}{name}"[:MAX_PROFILE_NAME],
                "calls": 1.123456789,
                "self_ns": 123456789.123,
                "share": 0.0123456789,
                "launches": 1.5,
                "kernels": [name] * MAX_OPERATOR_KERNELS,
            }
            for i in rows
        ],
        kernels=[
            {
                "name": f"{i:03d}{name}"[:MAX_PROFILE_NAME],
                "launches": 1.5,
                "ns": 123456789.123,
                "share": 0.0123456789,
            }
            for i in rows
        ],
        other_rows=999,
        other_ns=1e6,
    )


def test_48_configurations_of_worst_case_profiles_fit_the_upload_limit() -> None:
    from gate_server.settings import ServerSettings

    plain = make_results(configs=CONFIGS)
    worst = _worst_profile()
    configurations = [
        c.model_copy(update={"profile": worst, "base_profile": worst}) for c in plain.configurations
    ]
    profiled = plain.model_copy(update={"configurations": configurations})
    added = len(body(profiled)) - len(body(plain))
    print(f"48 configurations, worst-case profiles (base and head): +{added:,} bytes")
    assert 0 < added < ServerSettings().max_body_bytes // 4
