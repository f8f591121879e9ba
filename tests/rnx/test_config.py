"""kernalin.yml: defaults, overrides, and errors that name the bad key."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import stats
from rnx.config import ConfigError, HarnessSettings, KernalinConfig, load_config, parse_config
from rnx.schema import (
    MAX_PROCESSES,
    MAX_SAMPLES,
    MAX_TIME_BUDGET_S,
    MAX_WARMUP,
    MIN_SAMPLES,
    InvalidDocument,
    parse_results,
)

DESIGN_EXAMPLE = """
version: 1
gate:
  mode: enforce
  block-threshold: 25%
  rope: 2%
  probability: 0.95
  compare: baseline
  baseline-branches: [main]
benchmarks:
  - workload: kernels/attention.py
    runtimes: [pytorch_eager, torch_compile]
    batch-sizes: [1, 8]
    dtypes: [float32]
"""


def test_design_example_parses(tmp_path: Path) -> None:
    path = tmp_path / "kernalin.yml"
    path.write_text(DESIGN_EXAMPLE)
    config = load_config(path)
    assert config.gate.block_threshold == pytest.approx(0.25)
    assert config.gate.rope == pytest.approx(0.02)
    assert config.benchmarks[0].runtimes == ["pytorch_eager", "torch_compile"]
    assert config.benchmarks[0].batch_sizes == [1, 8]


def test_missing_default_file_means_defaults(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert load_config(None) == KernalinConfig()


def test_missing_named_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read config file"):
        load_config(tmp_path / "nope.yml")


def test_comma_separated_inputs_are_lists() -> None:
    config = parse_config(
        {"benchmarks": [{"workload": "a.py", "batch-sizes": "1, 8,8", "dtypes": "float16"}]}
    )
    assert config.benchmarks[0].batch_sizes == [1, 8]
    assert config.benchmarks[0].dtypes == ["float16"]


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({"gate": {"blok-threshold": "25%"}}, r"gate\.blok-threshold: unknown key"),
        (
            {"gate": {"block-threshold": "lots"}},
            r"gate\.block-threshold: .*'lots' is not a percentage",
        ),
        ({"gate": {"mode": "strict"}}, r"gate\.mode: 'strict' is not allowed"),
        (
            {"benchmarks": [{"workload": "a.py", "runtimes": ["jax"]}]},
            r"runtimes\.0: 'jax' is not allowed",
        ),
        ({"benchmarks": [{"workload": "a.py", "batch-sizes": [0]}]}, r"batch-sizes\.0"),
        ({"harness": {"samples": 3}}, r"harness\.samples"),
        ({"gate": {"baseline-branches": ["main", "a b"]}}, r"baseline-branches\.1: 'a b' is not a"),
        ({"version": 2}, r"version 2 is not supported"),
        (
            {"harness": {"gpu-timer": "cupti"}},
            r"harness\.gpu-timer: 'cupti' is not allowed; input should be 'events' or 'kernels'",
        ),
    ],
)
def test_bad_values_name_the_key(data: dict, expected: str) -> None:
    with pytest.raises(ConfigError, match=expected):
        parse_config(data)


def test_invalid_yaml_is_one_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "kernalin.yml"
    path.write_text("gate: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(path)


def test_top_level_must_be_a_mapping() -> None:
    with pytest.raises(ConfigError, match="must be a mapping"):
        parse_config(["a"])  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("key", "field", "values"),
    [
        ("samples", "samples", [MIN_SAMPLES - 1, MIN_SAMPLES, MAX_SAMPLES, MAX_SAMPLES + 1]),
        ("processes", "processes", [0, 1, MAX_PROCESSES, MAX_PROCESSES + 1]),
        ("warmup", "warmup", [-1, 0, MAX_WARMUP, MAX_WARMUP + 1]),
        ("time-budget", "time_budget_s", [0, 0.5, MAX_TIME_BUDGET_S, MAX_TIME_BUDGET_S + 1]),
        ("gpu-timer", "gpu_timer", ["events", "kernels", "cupti", "Events"]),
    ],
)
def test_a_document_records_exactly_what_kernalin_yml_may_ask_for(
    key: str, field: str, values: list[float | str]
) -> None:
    """One set of bounds: what the file may ask for is what a results document may record."""
    golden = json.loads((Path(__file__).parents[1] / "data" / "results-v1-single.json").read_text())
    for value in values:
        try:
            parse_config({"harness": {key: value}})
            asked = True
        except ConfigError:
            asked = False
        try:
            parse_results(golden | {"settings": golden["settings"] | {field: value}})
            recorded = True
        except InvalidDocument:
            recorded = False
        assert asked == recorded, (key, value, asked, recorded)
    assert MIN_SAMPLES == stats.MIN_SAMPLES  # the statistics' own minimum, not a copy


def test_the_gpu_timer_defaults_to_events_and_takes_kernels() -> None:
    # events: the gate's calibrations were recorded with it.
    assert KernalinConfig().harness.gpu_timer == "events"
    assert parse_config({"harness": {"gpu-timer": "kernels"}}).harness.gpu_timer == "kernels"


def test_docs_list_every_harness_key() -> None:
    """docs/configuration.md's example and table name every `harness:` key kernalin.yml takes."""
    text = (Path(__file__).parents[2] / "docs" / "configuration.md").read_text()
    for name, field in HarnessSettings.model_fields.items():
        key = field.alias or name
        assert f"| `harness.{key}` |" in text, key
        assert f"\n  {key}: " in text, key


def test_auto_sync_follows_the_benchmarks_or_its_own_list() -> None:
    data = {"benchmarks": [{"workload": "./kernels//a.py"}], "auto-sync": {"branch": "main"}}
    config = parse_config(data)
    assert config.synced_workloads() == ["kernels/a.py"] and config.auto_sync is not None
    assert config.auto_sync.every is None
    own = parse_config({"auto-sync": {"branch": "main", "workloads": ["b.py"], "every": 10}})
    assert own.synced_workloads() == ["b.py"]
    assert parse_config({}).synced_workloads() == []


@pytest.mark.parametrize(
    ("auto_sync", "says"),
    [
        ({"branch": "release/*"}, "is not a branch name; write one branch like main"),
        ({"branch": "main", "workloads": ["../x.py"]}, "is not a path inside the repository"),
        ({"branch": "main", "workloads": ["/abs.py"]}, "is not a path inside the repository"),
        ({"branch": "main", "every": 251}, "auto-sync.every"),
        ({"workloads": ["a.py"]}, "auto-sync.branch: Field required"),
        ({"branch": "main", "evry": 3}, "auto-sync.evry: unknown key"),
    ],
)
def test_a_bad_auto_sync_key_names_itself_and_the_fix(
    auto_sync: dict[str, object], says: str
) -> None:
    with pytest.raises(ConfigError, match=None) as e:
        parse_config({"auto-sync": auto_sync})
    assert says in str(e.value)
