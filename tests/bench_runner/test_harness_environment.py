"""The environment key: hardware and runner identity only; software recorded, not keyed."""

from __future__ import annotations

from bench_runner.environment import collect_environment, environment_key

HW = {
    "cpu_model": "AMD EPYC 7763",
    "cpu_count": 4,
    "machine": "x86_64",
    "gpus": [{"name": "NVIDIA H200", "compute_capability": "9.0", "uuid": "GPU-1"}],
}
RUNNER = {"os": "Linux", "ImageOS": "ubuntu24", "ImageVersion": "20250101.1.0"}


def test_key_ignores_software_and_image_version():
    a = environment_key(HW, RUNNER, None)
    b = environment_key({**HW, "memory_total_kib": 1}, {**RUNNER, "ImageVersion": "2"}, None)
    other_uuid = {**HW, "gpus": [{**HW["gpus"][0], "uuid": "GPU-2"}]}
    assert a == b == environment_key(other_uuid, RUNNER, None)


def test_key_changes_with_hardware_runner_identity_and_name():
    a = environment_key(HW, RUNNER, None)
    assert a != environment_key({**HW, "cpu_count": 8}, RUNNER, None)
    assert a != environment_key({**HW, "gpus": [{"name": "NVIDIA H100"}]}, RUNNER, None)
    assert a != environment_key(HW, {**RUNNER, "ImageOS": "ubuntu22"}, None)
    assert a != environment_key(HW, RUNNER, "pool-b")


def test_collected_environment_splits_hardware_runner_software():
    env = collect_environment(name="here", threads=2)
    assert env.hardware["cpu_count"] >= 1 and "cpu_model" in env.hardware
    assert env.runner["os"]
    assert env.software["torch"] and env.software["python"]
    assert env.software["harness_threads"] == 2
    assert env.key.startswith("env-")
