"""Real recorded GitHub payloads (tests/data/github-webhooks), and PR comments made from them."""

from __future__ import annotations

import copy
import itertools
import json
from pathlib import Path
from typing import Any

PAYLOADS = Path(__file__).resolve().parents[1] / "data" / "github-webhooks"


def load_payload(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((PAYLOADS / f"{name}.payload.json").read_text())
    return data


_COMMENT_IDS = itertools.count(1_000_000_001)


def make_pr_comment(
    body: str,
    *,
    user: str = "Codertocat",
    number: int | None = None,
    action: str = "created",
    installation_id: int | None = None,
    organization: bool = False,
    comment_id: int | None = None,
) -> dict[str, Any]:
    """GitHub's recorded issue_comment payload, made a PR comment the way GitHub sends one.

    Every comment GitHub creates has its own id, so each call gets a new one unless given."""
    name = "issue_comment.created.with-organization" if organization else "issue_comment.created"
    payload = copy.deepcopy(load_payload(name))
    issue = payload["issue"]
    if number is not None:
        issue["number"] = number
    repo_url = payload["repository"]["html_url"]
    api_url = payload["repository"]["url"]
    issue["pull_request"] = {
        "url": f"{api_url}/pulls/{issue['number']}",
        "html_url": f"{repo_url}/pull/{issue['number']}",
        "diff_url": f"{repo_url}/pull/{issue['number']}.diff",
        "patch_url": f"{repo_url}/pull/{issue['number']}.patch",
        "merged_at": None,
    }
    payload["action"] = action
    payload["comment"]["body"] = body
    payload["comment"]["id"] = comment_id if comment_id is not None else next(_COMMENT_IDS)
    payload["comment"]["user"]["login"] = user
    payload["sender"]["login"] = user
    if installation_id is not None:
        payload["installation"] = {
            "id": installation_id,
            "node_id": "MDIzOkludGVncmF0aW9uSW5zdGFsbGF0aW9uMQ==",
        }
    return payload


def make_base_branch_edited(
    old: str,
    new: str,
    *,
    number: int = 7,
    installation_id: int | None = None,
    sender: str = "Codertocat",
) -> dict[str, Any]:
    """GitHub's pull_request "edited" event for a PR whose base branch changed from `old` to
    `new`, made from the recorded "opened" payload. GitHub sends it to every open PR when their
    base branch is renamed, and for one PR when a person changes its base by hand."""
    payload = copy.deepcopy(load_payload("pull_request.opened"))
    pr = payload["pull_request"]
    payload["action"] = "edited"
    payload["number"] = pr["number"] = number
    # What GitHub lists for a base change: the old ref, and the old base's commit.
    payload["changes"] = {"base": {"ref": {"from": old}, "sha": {"from": pr["base"]["sha"]}}}
    owner = payload["repository"]["owner"]["login"]
    pr["base"]["ref"], pr["base"]["label"] = new, f"{owner}:{new}"
    payload["sender"]["login"] = sender
    _installation(payload, installation_id)
    return payload


def make_default_branch_edited(
    old: str, new: str, *, installation_id: int | None = None, sender: str = "Codertocat"
) -> dict[str, Any]:
    """GitHub's repository "edited" event after the default branch changed from `old` to
    `new` (renaming the default branch does that too), made from the recorded payload's
    repository, sender and installation."""
    recorded = copy.deepcopy(load_payload("pull_request.opened"))
    payload = {
        "action": "edited",
        "changes": {"default_branch": {"from": old}},
        "repository": recorded["repository"],
        "sender": recorded["sender"],
        "installation": recorded["installation"],
    }
    payload["repository"]["default_branch"] = new
    payload["sender"]["login"] = sender
    _installation(payload, installation_id)
    return payload


def _installation(payload: dict[str, Any], installation_id: int | None) -> None:
    if installation_id is not None:
        payload["installation"] = {
            "id": installation_id,
            "node_id": "MDIzOkludGVncmF0aW9uSW5zdGFsbGF0aW9uMQ==",
        }


def make_push(
    repository: str,
    github_id: int,
    before: str,
    changed: list[tuple[str, dict[str, str]]],
    *,
    branch: str = "main",
    installation_id: int = 77,
) -> dict[str, Any]:
    """GitHub's push event of `changed` ((sha, {path: added|modified|removed}), oldest first)
    on `branch`, made from the recorded (tag) push payload. Each commit is shaped as GitHub's
    webhook reference documents it; like GitHub, at most 20 commits are listed (which 20 does
    not matter to the server: it asks compare-commits for all of them)."""
    payload = copy.deepcopy(load_payload("push.1"))
    listed = []
    for sha, files in changed:
        person = {"name": "Octo Cat", "email": "octocat@example.com", "username": "octocat"}
        listed.append(
            {
                "id": sha,
                "tree_id": sha[::-1],
                "distinct": True,
                "message": f"change {sha[:7]}",
                "timestamp": "2026-12-01T09:00:00Z",
                "url": f"https://github.com/{repository}/commit/{sha}",
                "author": person,
                "committer": person,
                **{
                    kind: sorted(p for p, s in files.items() if s == kind)
                    for kind in ("added", "removed", "modified")
                },
            }
        )
    after = changed[-1][0]
    payload.update(
        ref=f"refs/heads/{branch}",
        before=before,
        after=after,
        created=False,
        deleted=False,
        compare=f"https://github.com/{repository}/compare/{before[:12]}...{after[:12]}",
        commits=listed[:20],
        head_commit=listed[-1],
        installation={"id": installation_id, "node_id": "MDIzOkludGVncmF0aW9uSW5zdGFsbGF0aW9uNzc="},
    )
    payload["repository"].update(id=github_id, full_name=repository, name=repository.split("/")[1])
    return payload
