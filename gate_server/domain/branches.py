"""Branch names and renames: which name a branch has now, the names it had, following a rename.

The rename log (gate_server/db/renames.py) only records; the rules that read it are here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy.engine import Connection

from gate_server.db import audit, autosync, change_points, renames, repositories, runs, tokens
from gate_server.db.engine import BRANCH_LOCK, advisory_lock
from gate_server.db.renames import BranchRename
from gate_server.errors import InvalidInput, NotFound
from rnx.branches import branch_name_problem


@dataclass(frozen=True)
class BranchRenameResult:
    repository: str
    old: str
    new: str
    changed: bool  # False: this rename was followed before (a redelivery, a repeated command)
    runs_moved: int  # baseline runs that count for `new` now
    tokens_widened: list[int]  # CI tokens whose branches named `old` and now also name `new`


def check_branch_name(value: str, what: str) -> str:
    """A branch name as git allows it and as uploads must name it (rnx/branches.py)."""
    if not isinstance(value, str) or not value:
        raise InvalidInput(f"{what} is empty; name a branch, e.g. main")
    problem = branch_name_problem(value)
    if problem is not None:
        raise InvalidInput(f"{what}: {problem}")
    return value


def follow_renames(log: Sequence[BranchRename], name: str) -> tuple[str, list[BranchRename]]:
    """The name that a branch uploaded as `name` has now, and the renames that led there.

    `log` is a repository's renames, oldest first. The first step is the newest rename that
    mentions `name`: when it renamed another branch *to* `name`, `name` is a live branch's
    name and stays. Each later step is the first rename of the name reached that came after
    the step before (a later rename of that name is of a branch that took the name since).
    Ids grow with every step, so a cycle (a->b, then b->a) ends, at the live name."""
    newest = None
    for r in log:
        if name in (r.from_branch, r.to_branch):
            newest = r
    if newest is None or newest.from_branch != name:
        return name, []
    path = [newest]
    while True:
        step = path[-1]
        later = next((r for r in log if r.id > step.id and r.from_branch == step.to_branch), None)
        if later is None:
            return step.to_branch, path
        path.append(later)


def former_names(log: Sequence[BranchRename], name: str) -> list[str]:
    """The names that now lead to the branch called `name` (not `name` itself), oldest first."""
    seen = dict.fromkeys(n for r in log for n in (r.from_branch, r.to_branch))
    return [n for n in seen if n != name and follow_renames(log, n)[0] == name]


def current_name(conn: Connection, repository_id: int, branch: str) -> str:
    """What `branch` of this repository is called now (itself unless it was renamed)."""
    return follow_renames(renames.log(conn, repository_id), branch)[0]


def all_names(conn: Connection, repository_id: int, branch: str) -> list[str]:
    """The branch's name now, then every name it had: what its history is recorded under."""
    log = renames.log(conn, repository_id)
    current = follow_renames(log, branch)[0]
    return [current, *former_names(log, current)]


def hold_names(conn: Connection, repository_id: int) -> None:
    """Order this transaction after any rename of the repository's branches in progress, and
    keep new ones out until it ends: an upload or accept takes this just before it writes a
    baseline branch, so it cannot store a name a rename committing at that moment moved away."""
    advisory_lock(conn, BRANCH_LOCK, repository_id, shared=True)


def rename_branch(
    conn: Connection, repository_id: int, old: str, new: str, *, actor: str, via: str
) -> BranchRenameResult:
    """Follow a rename of branch `old` to `new`: its baseline history counts for `new`.

    Only the server's own lookup key moves (runs.baseline_branch). What was uploaded stays
    as it was: runs.branch and runs.base_branch keep the names the documents carry, so they
    agree with the stored bytes and the signed receipts, and the rename log keeps which
    name became which. Uploads that still name `old` (CI jobs already running) find the
    new name through that log. CI tokens whose branches list `old` also get `new`, so the
    renamed branch's pushes keep becoming baselines.

    Idempotent: when `old` already leads to `new` through the log, nothing changes (a
    webhook redelivery, one event per retargeted pull request, a repeated command)."""
    old = check_branch_name(old, "the old branch name")
    new = check_branch_name(new, "the new branch name")
    if old == new:
        raise InvalidInput(f"the old and new branch names are the same ({old!r}); nothing to do")
    repository = repositories.by_id(conn, repository_id)
    if repository is None:
        raise NotFound(f"no repository with id {repository_id} is registered")
    advisory_lock(conn, BRANCH_LOCK, repository_id)
    current, path = follow_renames(renames.log(conn, repository_id), old)
    if current != old and new in {r.to_branch for r in path}:
        return BranchRenameResult(repository.name, old, new, False, 0, [])
    moved = runs.move_baselines(conn, repository_id, old, new)
    change_points.move_branch(conn, repository_id, old, new)
    autosync.move_branch(conn, repository_id, old, new)
    renames.append(conn, repository_id, old, new, actor=actor, via=via)
    widened = _widen_tokens(conn, repository_id, old, new)
    audit.record(
        conn,
        actor=actor,
        action="branch.rename",
        subject=f"repository:{repository.name}",
        details={
            "from": old,
            "to": new,
            "via": via,
            "baseline_runs_moved": moved,
            "tokens_widened": widened,
        },
    )
    return BranchRenameResult(repository.name, old, new, True, moved, widened)


def _widen_tokens(conn: Connection, repository_id: int, old: str, new: str) -> list[int]:
    # Only a pattern naming `old` exactly: a glob like release/* said nothing about `new`.
    widened = []
    for token in tokens.active_ci(conn, repository_id):
        if old in token.branches and new not in token.branches:
            tokens.set_branches(conn, token.id, [*token.branches, new])
            widened.append(token.id)
    return widened
