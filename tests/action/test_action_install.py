"""action/install.sh: the action installs itself next to the runner's torch, replacing nothing."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from testbed.act_harness import ACTION_FILES, REPO_ROOT, _ignore


@pytest.mark.slow
def test_install_uses_the_runners_torch_and_adds_only_the_package(tmp_path: Path) -> None:
    action = tmp_path / "action-src"
    for name in ACTION_FILES:
        src = REPO_ROOT / name
        if src.is_dir():
            shutil.copytree(src, action / name, ignore=_ignore)
        else:
            action.mkdir(exist_ok=True)
            shutil.copy2(src, action / name)
    runner_python_dir = Path(sys.executable).parent
    # A runner's Python finds the action only where install.sh put it: no PYTHONPATH (a
    # worktree's test run sets one to this checkout).
    env = {
        **{k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
        "GITHUB_ACTION_PATH": str(action),
        "RUNNER_TEMP": str(tmp_path / "runner-temp"),
        "GITHUB_OUTPUT": str(tmp_path / "output"),
        "PATH": f"{runner_python_dir}:{os.environ['PATH']}",
    }
    (tmp_path / "runner-temp").mkdir()
    subprocess.run(["bash", str(action / "action" / "install.sh")], env=env, check=True)
    python = (tmp_path / "output").read_text().strip().split("=", 1)[1]
    assert python.startswith(str(tmp_path / "runner-temp"))

    where = subprocess.run(
        [
            python,
            "-c",
            "import torch, numpy, rnx, action; "
            "print(torch.__file__); print(numpy.__file__); print(rnx.__file__)",
        ],
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,  # not this checkout: `python -c` puts the working directory first
        env=env,
    ).stdout.splitlines()
    runner_site = subprocess.run(
        [sys.executable, "-c", "import torch; print(torch.__file__)"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert where[0] == runner_site  # the runner's own torch, not a copy
    venv = Path(python).parent.parent
    assert not where[1].startswith(str(venv))  # numpy too: nothing already there is replaced
    assert where[2].startswith(str(venv))  # the action's package is the one installed
    installed = {p.name.split("-")[0] for p in venv.glob("lib/python*/site-packages/*")}
    assert "torch" not in installed and "numpy" not in installed

    # A second step of the same job reuses the environment.
    again = subprocess.run(
        ["bash", "-x", str(action / "action" / "install.sh")],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    commands = [line for line in again.stderr.splitlines() if line.startswith("+")]
    assert commands and not any(" install " in line for line in commands), commands
