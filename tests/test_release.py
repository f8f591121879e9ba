"""The release workflow: it is a valid GitHub workflow, publishes by trusted publishing on a
tag, and its steps (the tag check, `python -m build`, `twine check`) pass on this tree."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
WORKFLOWS = ROOT / ".github" / "workflows"
RELEASE = WORKFLOWS / "release.yml"


def _release() -> dict[Any, Any]:
    return yaml.safe_load(RELEASE.read_text())


def _step(job: dict[str, Any], named: str) -> dict[str, Any]:
    (step,) = [s for s in job["steps"] if named in s.get("name", "") + s.get("run", "")]
    return step


def test_every_workflow_is_valid_against_githubs_schema() -> None:
    # check-jsonschema's vendored copy of SchemaStore's github-workflow schema: offline.
    files = sorted(str(p) for p in WORKFLOWS.glob("*.yml"))
    assert str(RELEASE) in files
    done = subprocess.run(
        [sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.github-workflows"]
        + files,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_release_publishes_on_a_tag_by_trusted_publishing() -> None:
    release = _release()
    assert release[True] == {"push": {"tags": ["v*"]}}  # YAML 1.1 reads the key `on` as True
    assert release["permissions"] == {"contents": "read"}
    jobs = release["jobs"]
    # Only the publishing job may ask for an OIDC token, and it holds no PyPI secret.
    assert jobs["pypi"]["permissions"] == {"id-token": "write"}
    assert jobs["pypi"]["environment"]["name"] == "pypi"
    publish = jobs["pypi"]["steps"][-1]
    assert publish["uses"].startswith("pypa/gh-action-pypi-publish@")
    assert "with" not in publish and "secrets." not in RELEASE.read_text().replace(
        "secrets.GITHUB_TOKEN", ""
    )
    assert [j for j, job in jobs.items() if "id-token" in job.get("permissions", {})] == ["pypi"]
    # The image is built from the Dockerfile and pushed to the repository's own registry.
    image = jobs["image"]
    assert image["permissions"]["packages"] == "write"
    push = image["steps"][-1]
    assert push["uses"].startswith("docker/build-push-action@") and push["with"]["push"] is True
    assert (ROOT / push["with"]["context"] / "Dockerfile").is_file()
    assert jobs["pypi"]["needs"] == "dist" and image["needs"] == "dist"


def _tree(dest: Path) -> Path:
    """The files of this checkout that git would commit, copied (a build writes build/ and
    *.egg-info next to its sources)."""
    names = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    for name in filter(None, names):
        source = ROOT / os.fsdecode(name)
        if source.is_file():
            target = dest / os.fsdecode(name)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(source.read_bytes())
    return dest


def test_the_tag_check_refuses_a_tag_that_is_not_the_version(tmp_path: Path) -> None:
    script = _step(_release()["jobs"]["dist"], "does not match")["run"]
    (tmp_path / "pyproject.toml").write_bytes((ROOT / "pyproject.toml").read_bytes())
    match = re.search(r'^version = "([^"]+)"$', (ROOT / "pyproject.toml").read_text(), re.M)
    assert match is not None
    version = match[1]
    bin_dir = str(Path(sys.executable).parent)

    def run(tag: str) -> subprocess.CompletedProcess[str]:
        env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "TAG": tag}
        return subprocess.run(
            ["bash", "-e", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True
        )

    assert run(f"v{version}").returncode == 0
    refused = run("v99.0.0")
    assert refused.returncode == 1
    assert f"tag v99.0.0 does not match pyproject.toml's version {version}" in refused.stdout


def test_build_and_twine_check_pass_on_this_tree(tmp_path: Path) -> None:
    dist_job = _release()["jobs"]["dist"]
    assert _step(dist_job, "python -m build")["run"] == "python -m build"
    assert _step(dist_job, "twine check")["run"] == "python -m twine check --strict dist/*"
    tree = _tree(tmp_path / "tree")
    # --no-isolation: the setuptools of this venv instead of one fetched from an index.
    build = subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", "dist", "."],
        cwd=tree,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert build.returncode == 0, build.stdout[-2000:] + build.stderr[-2000:]
    dists = sorted((tree / "dist").iterdir(), key=lambda p: p.suffix)
    assert [p.suffix for p in dists] == [".gz", ".whl"]
    twine = subprocess.run(
        [sys.executable, "-m", "twine", "check", "--strict", *map(str, dists)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert twine.returncode == 0, twine.stdout + twine.stderr
    # The wheel is built from the sdist: what the server and the action read at run time is in.
    names = set(zipfile.ZipFile(dists[1]).namelist())
    for needed in (
        "bench_runner/peaks.yml",
        "gate_server/dashboard/templates/run.html",
        "gate_server/dashboard/static/dashboard.css",
    ):
        assert needed in names, f"{needed} is missing from the wheel"


@pytest.mark.parametrize("doc", ["README.md", "docs/server.md", "docs/action.md"])
def test_docs_install_only_what_exists_today(doc: str) -> None:
    # No release is published yet: a command installing rnx-benchmark from an index fails.
    commands = (ROOT / doc).read_text().split("```")[1::2]
    for line in "\n".join(commands).splitlines():
        if "pip install" in line and "rnx-benchmark" in line:
            assert "git+" in line or "pip install -e" in line or "pip install '.[" in line, line
