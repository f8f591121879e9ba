"""Git LFS pointer files: what a checkout holds in place of a file it did not fetch. The
harness refuses to time one (a pointer is ~130 bytes of text, never the workload)."""

from __future__ import annotations

from pathlib import Path

from rnx.errors import UserError

# Every pointer starts with this line (the Git LFS spec, "version" key first); pointers are
# under 1 KiB, so a larger file is never one.
POINTER_START = b"version https://git-lfs.github.com/spec/v1"
MAX_POINTER_BYTES = 1024


def is_lfs_pointer(path: Path) -> bool:
    try:
        if path.stat().st_size > MAX_POINTER_BYTES:
            return False
        with path.open("rb") as f:
            return f.read(len(POINTER_START)) == POINTER_START
    except OSError:
        return False


def fix_for(path: str) -> str:
    """How to get the real file: the words every pointer error ends with."""
    return (
        f"fetch it with `git lfs pull --include {path}` (git-lfs: `apt-get install git-lfs` "
        "or https://git-lfs.com), or check out with actions/checkout's `lfs: true`"
    )


def refuse_pointer(path: Path) -> None:
    if is_lfs_pointer(path):
        raise UserError(
            f"{path} is a Git LFS pointer, not the file it stands for: {fix_for(str(path))}"
        )
