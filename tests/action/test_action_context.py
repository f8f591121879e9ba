"""The run's identity from GitHub's variables and recorded event payloads, or from flags."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from action.context import read_context
from rnx.errors import UserError

DATA = Path(__file__).resolve().parents[1] / "data"


def test_pull_request_event_uses_the_head_commit_and_base_branch(tmp_path: Path) -> None:
    event = DATA / "action-pull_request.synchronize.payload.json"
    payload = json.loads(event.read_text())
    env = {
        "GITHUB_REPOSITORY": "Codertocat/Hello-World",
        "GITHUB_EVENT_NAME": "pull_request",
        "GITHUB_EVENT_PATH": str(event),
        "GITHUB_SHA": "1" * 40,  # GitHub's merge commit: not what the status belongs on
        "GITHUB_HEAD_REF": "changes",
        "GITHUB_BASE_REF": "master",
        "GITHUB_API_URL": "http://127.0.0.1:9/",
        "GITHUB_RUN_ID": "77",
    }
    ctx = read_context(env, root=tmp_path)
    assert ctx.git.pr_number == payload["number"]
    assert ctx.git.sha == payload["pull_request"]["head"]["sha"] == ctx.status_sha
    assert ctx.git.base_sha == payload["pull_request"]["base"]["sha"]
    assert (ctx.git.branch, ctx.git.base_branch) == ("changes", "master")
    assert ctx.git.is_pull_request
    assert ctx.api_url == "http://127.0.0.1:9"
    assert ctx.run_url == "https://github.com/Codertocat/Hello-World/actions/runs/77"


def test_push_event(tmp_path: Path) -> None:
    event = DATA / "action-push.payload.json"
    env = {
        "GITHUB_REPOSITORY": "Codertocat/Hello-World",
        "GITHUB_EVENT_NAME": "push",
        "GITHUB_EVENT_PATH": str(event),
        "GITHUB_SHA": "a" * 40,
        "GITHUB_REF_NAME": "main",
    }
    ctx = read_context(env, root=tmp_path)
    assert (ctx.git.branch, ctx.git.sha, ctx.git.pr_number) == ("main", "a" * 40, None)
    assert not ctx.git.is_pull_request


def test_schedule_event_is_a_run_of_the_default_branch(tmp_path: Path) -> None:
    # What GitHub sets for `on: schedule` (rnx init --schedule): the default branch's newest
    # commit; the server stores such a run as a baseline, like a push.
    env = {
        "GITHUB_REPOSITORY": "Codertocat/Hello-World",
        "GITHUB_EVENT_NAME": "schedule",
        "GITHUB_SHA": "b" * 40,
        "GITHUB_REF_NAME": "main",
    }
    ctx = read_context(env, root=tmp_path)
    assert (ctx.git.branch, ctx.git.sha, ctx.git.event) == ("main", "b" * 40, "schedule")
    assert ctx.git.pr_number is None and not ctx.git.is_pull_request


def test_flags_for_other_ci_systems(tmp_path: Path) -> None:
    ctx = read_context(
        {},
        root=tmp_path,
        repository="acme/kernels",
        branch="feature/x",
        sha="b" * 40,
        base_branch="main",
        pr=12,
    )
    assert ctx.repository == "acme/kernels"
    assert (ctx.git.pr_number, ctx.git.base_branch, ctx.git.branch) == (12, "main", "feature/x")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"repository": "not-a-repo", "branch": "m", "sha": "b" * 40}, "--repository OWNER/NAME"),
        ({"repository": "a/b", "branch": "x..y", "sha": "b" * 40}, "not a valid git branch"),
        ({"repository": "a/b", "branch": "m", "sha": "b" * 40, "pr": 3}, "--base-branch"),
    ],
)
def test_bad_identity_is_a_clear_error(tmp_path: Path, kwargs: dict, message: str) -> None:
    with pytest.raises(UserError, match=message):
        read_context({}, root=tmp_path, **kwargs)
