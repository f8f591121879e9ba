"""environment_label: a name and the hardware for any environment the schema accepts."""

from __future__ import annotations

from typing import Any

import pytest

from rnx.environments import EnvironmentLabel, environment_label, hardware_summary
from rnx.schema import Environment

H200 = {
    "key": "env-5bf816ff0123456789ab",
    "name": "h200",
    "hardware": {
        "cpu_model": "AMD EPYC 9654",
        "cpu_count": 16,
        "gpus": [{"name": "NVIDIA H200", "compute_capability": "9.0"}],
        "nvidia_smi": ["550.54.15, 1980 MHz, 3201 MHz, 1980 MHz, 3201 MHz"],
    },
    "software": {"torch": "2.5.1"},
}


def test_a_named_gpu_environment_reads_as_its_name_and_hardware() -> None:
    label = environment_label(Environment.model_validate(H200))
    assert label.title == "h200"
    assert label.details == "NVIDIA H200 · driver 550.54.15 · torch 2.5.1"
    assert label.text == "h200 (NVIDIA H200 · driver 550.54.15 · torch 2.5.1)"
    assert label.hover == "environment key env-5bf816ff0123456789ab"


def test_without_a_name_the_hardware_is_the_title_and_not_repeated() -> None:
    env = Environment.model_validate({**H200, "name": None})
    label = environment_label(env)
    assert label.title == "NVIDIA H200"
    assert label.details == "driver 550.54.15 · torch 2.5.1"


def test_several_gpus_and_cpu_only_machines() -> None:
    two = {"gpus": [{"name": "NVIDIA H200"}, {"name": "NVIDIA H200"}]}
    assert hardware_summary(two) == "2× NVIDIA H200"
    assert hardware_summary({"cpu_model": "Intel Xeon", "cpu_count": 2}) == "Intel Xeon (2 CPUs)"
    assert hardware_summary({}) is None


@pytest.mark.parametrize(
    "hardware",
    [
        {"gpus": 3},
        {"gpus": True},
        {"gpus": "NVIDIA H200"},
        {"gpus": [1, None, {"name": {"nested": 1}}]},
        {"cpu_model": ["x"], "cpu_count": {"n": 1}, "nvidia_smi": 7},
        {"nvidia_smi": [None]},
        {"nvidia_smi": "550.1, 1 MHz"},
    ],
)
def test_any_shape_the_schema_accepts_gets_a_label(hardware: dict[str, Any]) -> None:
    env = Environment.model_validate(
        {"key": "env-x", "hardware": hardware, "software": {"torch": {"v": 1}}}
    )
    label = environment_label(env)
    assert isinstance(label.text, str) and label.title


def test_long_or_multiline_values_are_shortened_to_one_line() -> None:
    env = Environment.model_validate({"key": "env-x", "name": "a\nb  " + "c" * 150})
    label = environment_label(env)
    assert "\n" not in label.title and len(label.title) <= 80


def test_a_key_alone_is_the_key() -> None:
    assert environment_label(None, key="env-abc") == EnvironmentLabel(key="env-abc")
    assert environment_label(None, key="env-abc").text == "env-abc"
    with pytest.raises(ValueError):
        environment_label(None)
