"""Git LFS: a workload the checkout holds as an LFS pointer (a real `git lfs` repository,
cloned without smudging, as actions/checkout does by default) is fetched by `rnx gate` and
measured as the real file; without git-lfs on PATH the error names the fix; the harness
never times a pointer."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from action.gate import main
from action.lfs import lfs_pointers
from bench_runner.lfs_pointer import is_lfs_pointer
from rnx.errors import UserError
from rnx.schema import load_results
from testbed.act_harness import git

ROOT = Path(__file__).resolve().parents[2]
GIT_LFS = shutil.which("git-lfs")
needs_git_lfs = pytest.mark.skipif(
    GIT_LFS is None, reason="git-lfs is not installed: apt-get install -y git-lfs"
)
ENV = {"CI": "true", "GITLAB_CI": "true", "CI_PROJECT_PATH": "acme/models"}


@pytest.fixture
def pointer_checkout(tmp_path: Path) -> Path:
    """upstream: models/tiny_mlp.onnx and models/weights.pt tracked with Git LFS; the
    checkout: cloned with GIT_LFS_SKIP_SMUDGE=1, so both are pointer files."""
    upstream = tmp_path / "upstream"
    (upstream / "models").mkdir(parents=True)
    git(upstream, "init", "-q", "-b", "main")
    git(upstream, "lfs", "install", "--local")
    git(upstream, "lfs", "track", "*.onnx", "*.pt")
    shutil.copy(ROOT / "examples" / "tiny_mlp.onnx", upstream / "models" / "tiny_mlp.onnx")
    (upstream / "models" / "weights.pt").write_bytes(bytes(range(256)) * 8)
    git(upstream, "add", ".")
    git(upstream, "commit", "-qm", "models in LFS")
    checkout = tmp_path / "checkout"
    git(tmp_path, "clone", "-q", upstream.as_uri(), str(checkout), env={"GIT_LFS_SKIP_SMUDGE": "1"})
    assert is_lfs_pointer(checkout / "models" / "tiny_mlp.onnx")
    return checkout


@needs_git_lfs
def test_rnx_gate_fetches_an_lfs_workload_and_measures_the_real_file(
    pointer_checkout: Path, tmp_path: Path, monkeypatch, capsys
) -> None:
    monkeypatch.chdir(pointer_checkout)
    kept = tmp_path / "kept"
    # Few samples and processes (a push on main gets 9 by default): the file is what is tested.
    config = tmp_path / "kernalin.yml"
    config.write_text(
        "version: 1\nharness: {samples: 8, processes: 2, baseline-processes: 2, warmup: 1}\n"
    )
    argv = [
        "--config",
        str(config),
        "--workload",
        "models/tiny_mlp.onnx",
        "--runtimes",
        "onnxruntime",
        "--repository",
        "acme/models",
        "--branch",
        "main",
        "--sha",
        "a" * 40,
        "--results-dir",
        str(kept),
    ]
    assert main(argv, env=ENV) == 0
    log = "".join(capsys.readouterr())
    assert "fetched from Git LFS: models/tiny_mlp.onnx, models/weights.pt" in log, log
    real = (ROOT / "examples" / "tiny_mlp.onnx").read_bytes()
    assert (pointer_checkout / "models" / "tiny_mlp.onnx").read_bytes() == real
    assert not is_lfs_pointer(pointer_checkout / "models" / "weights.pt")
    (document,) = [load_results(p) for p in kept.glob("*.json")]
    assert [c.status for c in document.configurations] == ["ok"]


@needs_git_lfs  # to make the repository; the gate then runs without it
def test_without_git_lfs_the_error_names_the_fix(
    pointer_checkout: Path, monkeypatch, capsys
) -> None:
    # PATH holds git and nothing else: git-lfs is missing as on a runner without it.
    bare = pointer_checkout.parent / "bin"
    bare.mkdir()
    (bare / "git").symlink_to(shutil.which("git") or "/usr/bin/git")
    monkeypatch.setenv("PATH", str(bare))
    monkeypatch.chdir(pointer_checkout)
    assert lfs_pointers(pointer_checkout, "models/tiny_mlp.onnx") == [
        "models/tiny_mlp.onnx",
        "models/weights.pt",
    ]
    argv = ["--workload", "models/tiny_mlp.onnx", "--repository", "acme/models"]
    assert main(argv, env=ENV) == 2
    log = "".join(capsys.readouterr())
    assert "git-lfs is not installed" in log, log
    assert "apt-get install git-lfs" in log
    assert "git lfs pull --include models/tiny_mlp.onnx,models/weights.pt" in log
    assert "lfs: true" in log and "Traceback" not in log
    assert is_lfs_pointer(pointer_checkout / "models" / "tiny_mlp.onnx")  # nothing measured


@needs_git_lfs
def test_the_harness_refuses_to_time_a_pointer(pointer_checkout: Path) -> None:
    from bench_runner import run_benchmark
    from rnx.config import Benchmark, HarnessSettings

    pointer = pointer_checkout / "models" / "tiny_mlp.onnx"
    with pytest.raises(UserError, match="is a Git LFS pointer, not the file it stands for"):
        run_benchmark(Benchmark(workload=str(pointer)), HarnessSettings(), progress=None)


def test_a_file_that_is_no_pointer_is_left_alone(tmp_path: Path) -> None:
    plain = tmp_path / "kernel.py"
    plain.write_text("version = 'https://git-lfs.github.com/spec/v1'\n")
    assert not is_lfs_pointer(plain)
    assert not is_lfs_pointer(tmp_path / "missing.onnx")
