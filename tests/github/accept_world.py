"""A repository as "/kernalin accept" finds it, on the gate server and on the GitHub fake.

Registered with the gate server (GitHub id known), a baseline on master, a PR run twice as slow
(BLOCK) with the action's sticky comment and failing status on GitHub (the fake), and a workflow
token for the GitHub fake."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx

from gate_server.db import Database, repositories
from rnx.schema import ConfigComparison
from rnx_github.client import ACTIONS_BOT
from rnx_github.comment import PartResult, combine
from testbed.factories import body, make_results
from testbed.fakes import fake_github
from testbed.fakes.github_endpoints import add_pull, extras
from testbed.gate_helpers import create_token, signed_headers

REPO = "Codertocat/Hello-World"
GITHUB_ID = 186853002
PR = 7
HEAD = "ec26c3e57ca3a959ca5aad62de7213c562f8c821"
GITHUB_TOKEN = "ghs_workflow_token_of_the_accept_job"


@dataclass
class AcceptWorld:
    ci_token: str
    run_id: str
    state: fake_github.State

    def sticky(self) -> list[str]:
        return self.state.comment_bodies(REPO, PR, login=ACTIONS_BOT)


def register(database_url: str) -> str:
    token = create_token(database_url, workspace="octo", repository=REPO, branches=("master",))
    s = Database(database_url)
    try:
        with s.write() as conn:
            repositories.bind_github_id(conn, GITHUB_ID, REPO)
    finally:
        s.close()
    return token.secret


def upload_runs(post: Callable[..., httpx.Response], secret: str) -> dict[str, Any]:
    """A baseline push on master, then the PR's run twice as slow; returns the PR's answer."""
    base = make_results(repository=REPO, branch="master", sha="a" * 40, seed=1)
    r = post("/api/v1/runs", content=body(base), headers=signed_headers(secret, body(base)))
    assert r.status_code == 201, r.text
    slow = make_results(
        repository=REPO,
        branch="feature",
        sha=HEAD,
        event="pull_request",
        pr_number=PR,
        base_branch="master",
        slowdown=2.0,
        seed=2,
    )
    r = post("/api/v1/runs", content=body(slow), headers=signed_headers(secret, body(slow)))
    assert r.status_code == 201 and r.json()["tier"] == "BLOCK", r.text
    answer: dict[str, Any] = r.json()
    return answer


def seed_github(state: fake_github.State, answer: dict[str, Any]) -> None:
    """What GitHub holds after the action's PR job: its sticky comment and a failing status."""
    state.tokens[GITHUB_TOKEN] = fake_github.Token(ACTIONS_BOT, is_app=True)
    state.repo(REPO).default_branch = "master"
    add_pull(state, REPO, PR, base="master", head_sha=HEAD)
    part = PartResult(
        workload="kernels/attention.py",
        job="gate",
        environment="linux-x86_64-cpu-test",
        tier="BLOCK",
        reasons=answer["reasons"],
        comparisons=[ConfigComparison.model_validate(c) for c in answer["comparisons"]],
        url=answer["url"],
    )
    state.seed_comments(REPO, PR, 3)
    state._add_comment(REPO, PR, combine([], [part], sha=HEAD).body, ACTIONS_BOT)
    state.statuses[(REPO, HEAD)] = [
        {"state": "failure", "description": "BLOCK: slower", "context": "rnx-benchmark"}
    ]
    extras(state).permissions[(REPO, "alice")] = "write"
    extras(state).permissions[(REPO, "bob")] = "read"


def comment_event(text: str, user: str = "alice") -> str:
    from tests.github.payloads import make_pr_comment

    return json.dumps(make_pr_comment(text, user=user, number=PR))
