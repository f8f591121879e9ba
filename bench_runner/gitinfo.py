"""Defaults for a run's identity when no CI says it: the workload's git checkout, else local."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from rnx.schema import GitRef

ZERO_SHA = "0" * 40


def _git(cwd: str, *args: str) -> str | None:
    try:
        out = subprocess.run(
            ["git", "-C", cwd, *args], capture_output=True, text=True, timeout=10, check=True
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "-", name)[:100] or "workload"


def local_repository(cwd: str) -> str:
    """owner/name from the origin remote (GitHub style URLs), else local/<directory>."""
    url = _git(cwd, "remote", "get-url", "origin")
    if url:
        m = re.search(r"[:/]([A-Za-z0-9_.-]+)/([A-Za-z0-9_.-]+?)(?:\.git)?/?$", url)
        if m:
            return f"{m.group(1)}/{m.group(2)}"
    top = _git(cwd, "rev-parse", "--show-toplevel") or cwd
    return f"local/{_safe(Path(top).name)}"


def local_git(cwd: str) -> GitRef:
    sha = _git(cwd, "rev-parse", "HEAD")
    branch = _git(cwd, "rev-parse", "--abbrev-ref", "HEAD")
    if not sha or not re.fullmatch(r"[0-9a-f]{40}", sha):
        return GitRef(branch="local", sha=ZERO_SHA, event="local")
    if not branch or branch == "HEAD":
        branch = "detached"
    try:
        return GitRef(branch=branch, sha=sha, event="local")
    except ValueError:
        return GitRef(branch="local", sha=sha, event="local")
