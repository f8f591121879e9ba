"""Paired mode: a git worktree of the PR's base commit, so base and head run in one job."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from action.git import git
from rnx.errors import UserError


def _have_commit(root: Path, sha: str) -> bool:
    return git(root, "cat-file", "-e", f"{sha}^{{commit}}").returncode == 0


@contextmanager
def base_worktree(root: Path, base_sha: str) -> Iterator[Path]:
    """Check out `base_sha` next to the checkout, fetching it when a shallow clone lacks it."""
    if git(root, "rev-parse", "--git-dir").returncode != 0:
        raise UserError(f"paired mode needs a git checkout; {root} is not one")
    if not _have_commit(root, base_sha):
        # actions/checkout clones one commit deep by default: fetch just the base commit.
        git(root, "fetch", "--no-tags", "--depth=1", "origin", base_sha)
    if not _have_commit(root, base_sha):
        raise UserError(
            f"paired mode needs the base commit {base_sha[:12]}, which is not in the checkout "
            f"and could not be fetched; use actions/checkout with fetch-depth: 0"
        )
    holder = Path(tempfile.mkdtemp(prefix="rnx-base-"))
    path = holder / "base"
    added = git(root, "worktree", "add", "--detach", str(path), base_sha)
    if added.returncode != 0:
        shutil.rmtree(holder, ignore_errors=True)
        raise UserError(f"could not check out the base commit: {added.stderr.strip()}")
    try:
        yield path
    finally:
        git(root, "worktree", "remove", "--force", str(path))
        shutil.rmtree(holder, ignore_errors=True)
        git(root, "worktree", "prune")
