"""Running git in a checkout: the one helper the action and the local commands share."""

from __future__ import annotations

import subprocess
from pathlib import Path

from rnx.errors import UserError


def git(root: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """`git ARGS` in root, its output captured; the caller reads the return code."""
    return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, timeout=timeout)


def git_output(root: Path, *args: str) -> str:
    """`git ARGS`'s output, stripped; a failure is the command's error, with git's words."""
    done = git(root, *args, timeout=60)
    if done.returncode != 0:
        raise UserError(f"git {' '.join(args)}: {done.stderr.strip() or 'failed'}")
    return done.stdout.strip()
