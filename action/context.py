"""Who is being gated: repository, commit, branch and pull request (GitHub variables or flags)."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from rnx.errors import UserError
from rnx.schema import GitRef

_REPOSITORY = re.compile(r"^[A-Za-z0-9_.-]{1,100}/[A-Za-z0-9_.-]{1,100}$")
PULL_REQUEST_EVENTS = ("pull_request", "pull_request_target")


@dataclass(frozen=True)
class RunContext:
    repository: str
    git: GitRef
    # Where the commit status goes: the PR's head commit, not the merge commit GitHub checks out.
    status_sha: str
    api_url: str
    server_url: str
    job: str
    run_url: str | None


def event_payload(env: Mapping[str, str]) -> dict[str, Any]:
    """The workflow's event (GITHUB_EVENT_PATH), or {} when there is none or it is unreadable."""
    path = env.get("GITHUB_EVENT_PATH")
    if not path:
        return {}
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _git_head(root: Path) -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def _git_branch(root: Path) -> str | None:
    try:
        out = subprocess.run(
            ["git", "symbolic-ref", "--short", "-q", "HEAD"],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None


def _dig(data: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(data, dict):
            return None
        data = data.get(key)
    return data


def read_context(
    env: Mapping[str, str],
    *,
    root: Path,
    repository: str | None = None,
    branch: str | None = None,
    sha: str | None = None,
    base_branch: str | None = None,
    pr: int | None = None,
) -> RunContext:
    """Flags win; then GitHub's variables and event payload; then the local git checkout."""
    event = event_payload(env)
    event_name = env.get("GITHUB_EVENT_NAME") or ("pull_request" if pr else "push")
    pull = _dig(event, "pull_request") if event_name in PULL_REQUEST_EVENTS else None

    repo = repository or env.get("GITHUB_REPOSITORY") or _dig(event, "repository", "full_name")
    if not repo or not _REPOSITORY.fullmatch(str(repo)):
        raise UserError(
            f"repository {repo!r} is not OWNER/NAME; outside GitHub Actions pass "
            f"--repository OWNER/NAME (GitHub sets GITHUB_REPOSITORY itself)"
        )

    pr_number = (
        pr or (_dig(pull, "number") if pull else None) or (event.get("number") if pull else None)
    )
    # A dispatched run checks out the commit it was asked for (the server's bisection), not
    # the branch head GITHUB_SHA names: the checkout is what is measured.
    dispatched = _git_head(root) if event_name == "workflow_dispatch" else None
    head_sha = sha or (_dig(pull, "head", "sha") if pull else None) or dispatched
    head_sha = head_sha or env.get("GITHUB_SHA")
    head_sha = head_sha or _git_head(root)
    if not head_sha:
        raise UserError("cannot tell which commit this is; pass --sha COMMIT (or set GITHUB_SHA)")

    if pull or pr_number:
        head_branch = branch or env.get("GITHUB_HEAD_REF") or _dig(pull, "head", "ref")
        base = base_branch or env.get("GITHUB_BASE_REF") or _dig(pull, "base", "ref")
        base_sha = _dig(pull, "base", "sha") if pull else None
    else:
        head_branch = branch or env.get("GITHUB_REF_NAME")
        base = base_branch
        base_sha = None
    head_branch = head_branch or _git_branch(root)
    if not head_branch:
        raise UserError("cannot tell the branch; pass --branch NAME (or set GITHUB_REF_NAME)")
    if (pull or pr_number) and not base:
        raise UserError("a pull request needs its base branch; pass --base-branch NAME")

    git_event = event_name if re.fullmatch(r"[a-z_]{1,64}", event_name) else "push"
    try:
        git = GitRef(
            branch=head_branch,
            sha=head_sha,
            event=git_event,
            pr_number=int(pr_number) if pr_number else None,
            base_branch=base or None,
            base_sha=base_sha,
        )
    except ValidationError as e:
        problem = "; ".join(f"{'.'.join(map(str, x['loc']))}: {x['msg']}" for x in e.errors())
        raise UserError(f"the commit's identity is malformed: {problem}") from None

    server_url = env.get("GITHUB_SERVER_URL", "https://github.com").rstrip("/")
    run_id = env.get("GITHUB_RUN_ID")
    return RunContext(
        repository=str(repo),
        git=git,
        status_sha=head_sha,
        api_url=env.get("GITHUB_API_URL", "https://api.github.com").rstrip("/"),
        server_url=server_url,
        job=env.get("GITHUB_JOB", "gate"),
        run_url=f"{server_url}/{repo}/actions/runs/{run_id}" if run_id else None,
    )
