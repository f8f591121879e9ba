"""Git LFS in the gate: a workload the checkout holds as an LFS pointer, and the model files
(.onnx, .pt) in its folder that it loads, are fetched with `git lfs pull --include` before
anything is measured; without git-lfs, one error that names the fix."""

from __future__ import annotations

import shutil
from pathlib import Path

from action.git import git
from bench_runner.lfs_pointer import fix_for, is_lfs_pointer
from rnx.errors import UserError

# The inputs a workload loads that repositories keep in LFS (the seeds name .onnx and .pt).
MODEL_SUFFIXES = (".onnx", ".pt", ".pth", ".bin", ".safetensors")


def lfs_pointers(root: Path, workload: str) -> list[str]:
    """The workload and the model files tracked in its folder that are pointers, as paths
    relative to root."""
    try:
        relative = (root / workload).resolve().relative_to(root.resolve())
    except ValueError:  # outside the checkout: the harness still refuses a pointer
        return []
    listed = git(root, "ls-files", "-z", "--", relative.parent.as_posix())
    tracked = [p for p in listed.stdout.split("\0") if p] if listed.returncode == 0 else []
    candidates = {relative.as_posix(), *(p for p in tracked if p.endswith(MODEL_SUFFIXES))}
    return sorted(p for p in candidates if is_lfs_pointer(root / p))


def _have_git_lfs(root: Path) -> bool:
    return shutil.which("git-lfs") is not None and git(root, "lfs", "version").returncode == 0


def fetch_lfs(root: Path, workload: str) -> list[str]:
    """Fetch what lfs_pointers finds; returns the paths fetched. Refuses, naming the fix, when
    git-lfs is missing or a file is still a pointer afterwards."""
    pointers = lfs_pointers(root, workload)
    if not pointers:
        return []
    listed = ", ".join(pointers)
    if not _have_git_lfs(root):
        raise UserError(
            f"{listed}: stored with Git LFS and this checkout holds only the pointer, and "
            f"git-lfs is not installed: install it (`apt-get install git-lfs`, "
            f"https://git-lfs.com) and run `git lfs pull --include {','.join(pointers)}`, "
            "or check out with actions/checkout's `lfs: true`"
        )
    pulled = git(root, "lfs", "pull", f"--include={','.join(pointers)}", "--exclude=", timeout=600)
    left = [p for p in pointers if is_lfs_pointer(root / p)]
    if pulled.returncode != 0 or left:
        why = pulled.stderr.strip().splitlines()[-1:] or ["the files are still pointers"]
        raise UserError(
            f"git lfs pull --include {','.join(left or pointers)} failed ({why[0]}): "
            f"{fix_for(','.join(left or pointers))}"
        )
    return pointers
