"""action/install.sh on a self-hosted runner without a package index (issue 14).

The runner here is built like the GPU machine we test on: its Python has numpy, scipy, pyyaml
and httpx but not pydantic or pyjwt. Wheels for what it lacks are downloaded once into a folder
(with this machine's pip configuration); every install then runs with pip's configuration
ignored and no index at all, so only that folder can supply packages.
"""

from __future__ import annotations

import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from testbed.act_harness import ACTION_FILES, REPO_ROOT, _ignore

pytestmark = pytest.mark.slow
RUNNER_HAS = ["numpy", "scipy", "pyyaml", "httpx"]
RUNNER_LACKS = ["pydantic>=2.6,<3", "pyjwt[crypto]>=2.8", "setuptools>=77"]


def _closure(names: list[str]) -> set[str]:
    """The distributions `names` need, as installed here (markers evaluated, extras not)."""
    from packaging.requirements import Requirement

    seen: set[str] = set()
    todo = list(names)
    while todo:
        name = todo.pop()
        key = name.lower().replace("_", "-")
        if key in seen:
            continue
        seen.add(key)
        for text in importlib.metadata.requires(name) or []:
            req = Requirement(text)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
    return seen


def _link(names: set[str], folder: Path) -> None:
    """Make `folder` hold these installed distributions (symlinks to their files)."""
    folder.mkdir()
    for name in names:
        dist = importlib.metadata.distribution(name)
        for top in {f.parts[0] for f in dist.files or [] if f.parts[0] not in ("..", "bin")}:
            target = folder / top
            if not target.exists():
                target.symlink_to(Path(str(dist.locate_file(top))))


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("wheels")
    found = subprocess.run(
        [sys.executable, "-m", "pip", "download", "--quiet", "--only-binary=:all:", "-d",
         str(folder), *RUNNER_LACKS],
        capture_output=True,
        text=True,
    )  # fmt: skip
    if found.returncode != 0:
        pytest.skip(f"cannot download wheels to build the offline folder: {found.stderr[-500:]}")
    return folder


@pytest.fixture(scope="module")
def runner_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A Python with numpy, scipy, pyyaml, httpx (and what they need), without pydantic."""
    root = tmp_path_factory.mktemp("runner")
    subprocess.run([sys.executable, "-m", "venv", str(root / "venv")], check=True)
    python = root / "venv" / "bin" / "python"
    _link(_closure(RUNNER_HAS), root / "site")
    site = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    (Path(site) / "runner_site.pth").write_text(f"{root / 'site'}\n")
    check = subprocess.run([python, "-c", "import numpy, scipy, yaml, httpx; import pydantic"])
    assert check.returncode != 0  # it really lacks pydantic
    return python


def _action(tmp_path: Path) -> Path:
    action = tmp_path / "action-src"
    action.mkdir()
    for name in ACTION_FILES:
        src = REPO_ROOT / name
        if src.is_dir():
            shutil.copytree(src, action / name, ignore=_ignore)
        else:
            shutil.copy2(src, action / name)
    return action


def _install(tmp_path: Path, python: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    action = _action(tmp_path)
    (tmp_path / "runner-temp").mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env.update(
        {
            "GITHUB_ACTION_PATH": str(action),
            "RUNNER_TEMP": str(tmp_path / "runner-temp"),
            "GITHUB_OUTPUT": str(tmp_path / "output"),
            "PATH": f"{python.parent}:{os.environ['PATH']}",
            "PIP_CONFIG_FILE": os.devnull,  # nothing from this machine's pip configuration
            "PIP_NO_INDEX": "1",
            **extra,
        }
    )
    return subprocess.run(
        ["bash", str(action / "action" / "install.sh")],
        env=env,
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )


def test_installs_from_a_wheel_folder_given_as_the_input(tmp_path, runner_python, wheels):
    (tmp_path / "ci-wheels").symlink_to(wheels)  # relative to the workspace, as users write it
    done = _install(tmp_path, runner_python, INPUT_WHEELS="ci-wheels")
    assert done.returncode == 0, done.stdout + done.stderr
    python = (tmp_path / "output").read_text().strip().split("=", 1)[1]
    where = subprocess.run(
        [python, "-c", "import rnx, pydantic, jwt, numpy; print(numpy.__file__)"],
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,
    ).stdout
    assert "/site/numpy/" in where  # the runner's numpy, not a reinstalled one


def test_installs_from_pip_find_links_in_the_environment(tmp_path, runner_python, wheels):
    done = _install(tmp_path, runner_python, PIP_FIND_LINKS=str(wheels))
    assert done.returncode == 0, done.stdout + done.stderr


def test_without_the_wheels_it_fails_naming_what_is_missing(tmp_path, runner_python):
    (tmp_path / "empty").mkdir()
    done = _install(tmp_path, runner_python, INPUT_WHEELS="empty")
    assert done.returncode == 1
    error = next(line for line in done.stdout.splitlines() if line.startswith("::error"))
    assert "lacks pydantic>=2.6,<3; pyjwt[crypto]>=2.8" in error
    assert "numpy" not in re.sub(r"\(.*", "", error.split("lacks", 1)[1])  # it has numpy
    assert "setuptools>=77" in error  # nothing to build rnx-benchmark with, either
    assert "input 'wheels'" in error and "PIP_NO_INDEX=1" in error


def test_a_wheels_input_that_is_not_a_folder_is_named(tmp_path, runner_python):
    done = _install(tmp_path, runner_python, INPUT_WHEELS="no/such/dir")
    assert done.returncode == 1
    assert "input wheels: 'no/such/dir' is not a folder" in done.stdout
