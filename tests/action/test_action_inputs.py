"""Inputs and kernalin.yml merging: every malformed value is refused with what to write instead."""

from __future__ import annotations

from pathlib import Path

import pytest

from action.inputs import InputError, input_variable, read_inputs
from action.overlay import effective_config
from rnx.config import ConfigError


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "attention.py").write_text("class Model: pass\n")
    (tmp_path / "kernels" / "mlp.py").write_text("class Model: pass\n")
    return tmp_path


def test_product_page_step_is_accepted(repo: Path) -> None:
    env = {
        "INPUT_WORKLOAD": "kernels/attention.py",
        "INPUT_RUNTIMES": "pytorch_eager",
        "INPUT_BATCH_SIZES": "1,8",
        "INPUT_DTYPES": "float32",
        "KERNALIN_TOKEN": "rnx_ci_secret",
        "KERNALIN_URL": "https://gate.example.com/",
    }
    inputs = read_inputs(env, root=repo)
    assert inputs.workloads == ("kernels/attention.py",)
    assert inputs.batch_sizes == (1, 8)
    assert inputs.kernalin_url == "https://gate.example.com"
    config = effective_config(inputs, root=repo)
    (bench,) = config.benchmarks
    assert (bench.runtimes, bench.batch_sizes, bench.dtypes) == (
        ["pytorch_eager"],
        [1, 8],
        ["float32"],
    )
    assert config.gate.mode == "enforce"


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"INPUT_RUNTIMES": "pytorch"}, "did you mean 'pytorch_eager'"),
        ({"INPUT_RUNTIMES": "pytorch_eager;tensorrt"}, "write a comma-separated list"),
        ({"INPUT_DTYPES": "fp16"}, "dtypes: float32,float16"),
        ({"INPUT_BATCH_SIZES": "1,eight"}, "'eight' is not a positive whole number"),
        ({"INPUT_BATCH_SIZES": "0"}, 'batch-sizes: "1,8"'),
        ({"INPUT_MODE": "strict"}, "write one of enforce, soft-fail, report-only"),
        ({"INPUT_MODE": "accept"}, "not available in this version"),
        ({"KERNALIN_URL": "gate.example.com"}, "kernalin-url: https://gate.example.com"),
        ({"INPUT_ENVIRONMENT": "my gpu"}, "environment: a100-80gb"),
        ({"INPUT_WORKLOAD": "kernels/missing.py"}, "does not exist in the checkout"),
        ({"INPUT_WORKLOAD": "kernels/attention.cu"}, "neither a .py nor an .onnx"),
        ({"INPUT_WORKLOAD": "../outside.py"}, "must be a path inside the repository"),
        ({"INPUT_CONFIG": "ci/kernalin.yml"}, "rnx init writes a starter"),
    ],
)
def test_malformed_input_says_what_to_write(repo: Path, env: dict[str, str], expected: str) -> None:
    with pytest.raises(InputError, match="input '") as err:
        read_inputs({"INPUT_WORKLOAD": "kernels/attention.py", **env}, root=repo)
    assert expected in str(err.value)


def test_action_inputs_win_over_the_cli_variables_and_are_named_apart(repo: Path) -> None:
    env = {
        "INPUT_WORKLOAD": "kernels/attention.py",
        "INPUT_KERNALIN_URL": "https://action.example.com",
        "KERNALIN_URL": "https://cli.example.com",
        "INPUT_KERNALIN_TOKEN": "",  # an empty input: the job's KERNALIN_TOKEN counts
        "KERNALIN_TOKEN": "rnx_ci_job",
        "INPUT_GITHUB_TOKEN": "ghs_input",
        "GITHUB_TOKEN": "ghs_job",
    }
    inputs = read_inputs(env, root=repo)
    assert inputs.kernalin_url == "https://action.example.com"
    assert (inputs.kernalin_token, inputs.github_token) == ("rnx_ci_job", "ghs_input")
    assert input_variable("batch-sizes") == "INPUT_BATCH_SIZES"
    # The server's own settings (RNX_*) are never read as the action's inputs.
    assert read_inputs({"RNX_ROPE": "10%", **env}, root=repo) == inputs


def test_a_retired_variable_is_refused_with_the_flag_to_use(repo: Path) -> None:
    with pytest.raises(InputError, match="RNX_WORKLOAD is no longer read; pass --workload"):
        read_inputs({"RNX_WORKLOAD": "kernels/attention.py"}, root=repo)


def test_flags_win_over_environment(repo: Path) -> None:
    inputs = read_inputs(
        {"INPUT_WORKLOAD": "kernels/attention.py", "INPUT_MODE": "enforce"},
        root=repo,
        workloads=["kernels/mlp.py"],
        mode="report-only",
    )
    assert inputs.workloads == ("kernels/mlp.py",)
    assert inputs.mode == "report-only"


def test_inputs_override_kernalin_yml(repo: Path) -> None:
    (repo / "kernalin.yml").write_text(
        "version: 1\n"
        "gate: {mode: soft-fail, block-threshold: 10%, compare: paired}\n"
        "benchmarks:\n"
        "  - workload: kernels/attention.py\n"
        "    runtimes: [pytorch_eager, onnxruntime]\n"
        "    batch-sizes: [1, 8]\n"
        "    tolerances: {float32: {atol: 0.001, rtol: 0.001}}\n"
        "  - workload: kernels/mlp.py\n"
    )
    # No inputs: the file as written, both benchmarks.
    config = effective_config(read_inputs({}, root=repo), root=repo)
    assert [b.workload for b in config.benchmarks] == ["kernels/attention.py", "kernels/mlp.py"]
    assert config.gate.mode == "soft-fail" and config.gate.compare == "paired"
    assert config.gate.block_threshold == pytest.approx(0.10)

    inputs = read_inputs(
        {
            "INPUT_WORKLOAD": "kernels/attention.py",
            "INPUT_BATCH_SIZES": "4",
            "INPUT_MODE": "enforce",
        },
        root=repo,
    )
    config = effective_config(inputs, root=repo)
    (bench,) = config.benchmarks
    assert bench.batch_sizes == [4]
    assert bench.runtimes == ["pytorch_eager", "onnxruntime"]  # kept from the file
    assert bench.tolerances["float32"].atol == pytest.approx(0.001)  # kept from the file
    assert config.gate.mode == "enforce"


def test_bad_key_in_kernalin_yml_is_named(repo: Path) -> None:
    (repo / "kernalin.yml").write_text("version: 1\ngate: {block_treshold: 10%}\n")
    with pytest.raises(ConfigError, match="gate.block_treshold: unknown key"):
        effective_config(
            read_inputs({"INPUT_WORKLOAD": "kernels/attention.py"}, root=repo), root=repo
        )


def test_nothing_to_benchmark_says_how_to_fix(repo: Path) -> None:
    with pytest.raises(InputError, match="set the input 'workload'"):
        effective_config(read_inputs({}, root=repo), root=repo)


def test_too_many_configurations(repo: Path) -> None:
    inputs = read_inputs(
        {
            "INPUT_WORKLOAD": "kernels/attention.py",
            "INPUT_RUNTIMES": "pytorch_eager,torch_compile,onnxruntime",
            "INPUT_DTYPES": "float32,float16,bfloat16,float64",
            "INPUT_BATCH_SIZES": "1,2,4,8,16",
        },
        root=repo,
    )
    with pytest.raises(InputError, match="60 configurations"):
        effective_config(inputs, root=repo)
