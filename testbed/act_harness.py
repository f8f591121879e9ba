"""Run a workflow with the real Actions runner `act` (host mode) in a throwaway git repository.

The repository holds a vendored copy of this action (`uses: ./rnx-benchmark`), a kernel and a
workflow; each scenario is a real commit, fed to act with a GitHub event payload built from
recorded ones. act cannot reach GitHub: actions/checkout is act's local copy, nothing is pulled.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
DATA = REPO_ROOT / "tests" / "data"
ACT = Path(sys.executable).parent / "act"
ACTION_FILES = (
    "action.yml",
    "pyproject.toml",
    "README.md",
    "action",
    "rnx",
    "rnx_github",
    "rnx_cli",
    "stats",
    "bench_runner",
)
REPOSITORY = "Codertocat/Hello-World"


@dataclass
class ActRun:
    returncode: int
    output: str
    summary: str

    @property
    def succeeded(self) -> bool:
        return self.returncode == 0 and "🏁  Job succeeded" in self.output


def git(repo: Path, *args: str, env: dict[str, str] | None = None) -> str:
    """git `args` in a test's throwaway `repo`, committing as t; its output, stripped."""
    done = subprocess.run(
        ["git", "-c", "user.email=t@example.com", "-c", "user.name=t", *args],
        cwd=repo,
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
    )
    if done.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)} failed: {done.stderr}")
    return done.stdout.strip()


# The act scenarios' repository commits as one fixed author.
_CODERTOCAT = {
    "GIT_AUTHOR_NAME": "Codertocat",
    "GIT_AUTHOR_EMAIL": "codertocat@example.com",
    "GIT_COMMITTER_NAME": "Codertocat",
    "GIT_COMMITTER_EMAIL": "codertocat@example.com",
}


def _git(repo: Path, *args: str) -> str:
    return git(repo, *args, env=_CODERTOCAT)


def _ignore(directory: str, names: list[str]) -> set[str]:
    return {n for n in names if n in ("__pycache__", "build") or n.endswith(".egg-info")}


def _summary(output: str) -> str:
    """The job summary as act prints it (act removes its SUMMARY.md when the job ends)."""
    blocks: list[str] = []
    lines = output.splitlines()
    for i, line in enumerate(lines):
        if "⚙  Summary - " in line:
            block = [line.split("⚙  Summary - ", 1)[1]]
            for follow in lines[i + 1 :]:
                if follow.startswith("["):
                    break
                block.append(follow)
            blocks.append("\n".join(block))
    return blocks[-1] if blocks else ""


class Workspace:
    """A user's repository: kernels/kernel.py, kernalin.yml, the workflow, the vendored action."""

    def __init__(self, root: Path, workflow: str, kernalin_yml: str) -> None:
        self.root = root
        self.repo = root / "repo"
        self.repo.mkdir(parents=True)
        for name in ACTION_FILES:
            src = REPO_ROOT / name
            dst = self.repo / "rnx-benchmark" / name
            if src.is_dir():
                shutil.copytree(src, dst, ignore=_ignore)
            else:
                dst.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, dst)
        (self.repo / ".github" / "workflows").mkdir(parents=True)
        (self.repo / ".github" / "workflows" / "kernalin.yml").write_text(workflow)
        (self.repo / "kernalin.yml").write_text(kernalin_yml)
        (self.repo / "kernels").mkdir()
        (self.repo / ".gitignore").write_text("__pycache__/\n*.egg-info/\nbuild/\n")
        _git(self.repo, "init", "-q", "-b", "main")
        _git(self.repo, "remote", "add", "origin", f"https://github.com/{REPOSITORY}.git")

    def clone(self, root: Path) -> Workspace:
        """A second checkout of the same repository, for a job that runs at the same time."""
        other = object.__new__(Workspace)
        other.root, other.repo = root, root / "repo"
        root.mkdir(parents=True, exist_ok=True)
        _git(root, "clone", "-q", str(self.repo), str(other.repo))
        _git(other.repo, "remote", "set-url", "origin", f"https://github.com/{REPOSITORY}.git")
        return other

    def commit(
        self, kernel: str, message: str, *, branch: str = "main", parent: str | None = None
    ) -> str:
        if parent is not None:
            _git(self.repo, "checkout", "-q", "-B", branch, parent)
        shutil.copy2(DATA / kernel, self.repo / "kernels" / "kernel.py")
        _git(self.repo, "add", "-A")
        _git(self.repo, "commit", "-q", "--allow-empty", "-m", message)
        return _git(self.repo, "rev-parse", "HEAD")

    def checkout(self, sha: str) -> None:
        _git(self.repo, "checkout", "-q", "--detach", sha)

    def push_event(self, sha: str) -> Path:
        event = json.loads((DATA / "action-push.payload.json").read_text())
        event.update(ref="refs/heads/main", after=sha, base_ref=None)
        event["head_commit"] = {**(event.get("head_commit") or {}), "id": sha}
        return self._write_event("push", event)

    def pull_request_event(self, number: int, head: str, base: str) -> Path:
        payload = json.loads((DATA / "action-pull_request.synchronize.payload.json").read_text())
        event = copy.deepcopy(payload)
        event["number"] = number
        pr = event["pull_request"]
        pr["number"] = number
        pr["head"].update(sha=head, ref="faster-kernel")
        pr["base"].update(sha=base, ref="main")
        return self._write_event(f"pull_request-{number}-{head[:7]}", event)

    def _write_event(self, name: str, event: dict[str, Any]) -> Path:
        path = self.root / f"{name}.json"
        path.write_text(json.dumps(event))
        return path

    def act(
        self,
        event_name: str,
        event_path: Path,
        *,
        env: dict[str, str],
        secrets: dict[str, str],
        variables: dict[str, str] | None = None,
        timeout: float = 240,
    ) -> ActRun:
        cache = self.root / "act-cache"
        args = [
            str(ACT),
            event_name,
            "-e",
            str(event_path),
            "-P",
            "ubuntu-latest=-self-hosted",
            "-W",
            ".github/workflows/kernalin.yml",
            "--action-cache-path",
            str(cache),
            "--no-cache-server",
            "--env-file",
            "/dev/null",
            "--secret-file",
            "/dev/null",
            "--var-file",
            "/dev/null",
        ]
        for k, v in env.items():
            args += ["--env", f"{k}={v}"]
        for k, v in secrets.items():
            args += ["-s", f"{k}={v}"]
        for k, v in (variables or {}).items():
            args += ["--var", f"{k}={v}"]
        # The runner's Python is this venv's: it has torch, as a GPU runner's image would.
        host_env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
        host_env = {k: v for k, v in host_env.items() if not k.startswith(("RNX_", "KERNALIN_"))}
        out = subprocess.run(
            args, cwd=self.repo, env=host_env, capture_output=True, text=True, timeout=timeout
        )
        return ActRun(out.returncode, out.stdout + out.stderr, _summary(out.stdout))
