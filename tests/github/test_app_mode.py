"""GitHub App mode against the GitHub fake: the server posting a PR's sticky comment and commit
status itself (the App's JWT and installation tokens: tests/rnx_github/test_app_auth.py)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from starlette.testclient import TestClient

from gate_server.settings import ServerSettings
from rnx_github.app_auth import AppCredentials, GitHubApp
from rnx_github.client import ACTIONS_BOT
from testbed.factories import (
    HOSTILE_REASON,
    HOSTILE_WORKLOAD,
    assert_inert,
    body,
    make_results,
)
from testbed.fakes import fake_github
from testbed.fakes.github_endpoints import app_key, private_pem, serve_with_app
from testbed.gate_helpers import Token, app_mode_settings, signed_headers

REPO = "Codertocat/Hello-World"
INSTALLATION = 77
BOT = "rnx-gate[bot]"


@pytest.fixture
def github() -> Iterator[tuple[str, fake_github.State]]:
    with serve_with_app({REPO: INSTALLATION}) as served:
        yield served


@pytest.fixture
def server_settings(database_url: str, github: tuple[str, fake_github.State]) -> ServerSettings:
    return app_mode_settings(database_url, app_key(), github[0], public_url="http://gate.test")


def upload(client: TestClient, token: Token, **kwargs: Any) -> Any:
    doc = make_results(repository=REPO, **kwargs)
    r = client.post(
        "/api/v1/runs", content=body(doc), headers=signed_headers(token.secret, body(doc))
    )
    assert r.status_code == 201, r.text
    return r.json()


def test_the_server_posts_a_fork_prs_verdict_and_updates_it_in_place(
    client: TestClient, ci_token: Any, github: tuple[str, fake_github.State]
) -> None:
    _, state = github
    token: Token = ci_token(workspace="octo", repository=REPO, branches=("main",))
    upload(client, token, branch="main", sha="a" * 40, seed=1)  # a push: no PR, nothing posted
    assert state.comments == {} and state.statuses == {}

    pr = dict(branch="fork-feature", event="pull_request", pr_number=3, base_branch="main", seed=2)
    slow = upload(client, token, sha="b" * 40, slowdown=2.0, **pr)
    assert slow["tier"] == "BLOCK"
    (comment,) = state.comment_bodies(REPO, 3, login=BOT)
    assert comment.startswith("<!-- rnx-benchmark:sticky -->")
    assert "rnx-benchmark: BLOCK" in comment and "commit bbbbbbbbbbbb" in comment
    assert slow["url"] in comment
    (status,) = state.statuses[(REPO, "b" * 40)]
    assert status["state"] == "failure" and status["context"] == "rnx-benchmark"
    assert status["description"].startswith("BLOCK")

    fixed = upload(client, token, sha="c" * 40, slowdown=1.0, **pr)
    assert fixed["tier"] != "BLOCK"
    (comment,) = state.comment_bodies(REPO, 3, login=BOT)  # the same comment, updated
    assert "commit cccccccccccc" in comment and "BLOCK" not in comment.splitlines()[1]
    (status,) = state.statuses[(REPO, "c" * 40)]
    assert status["state"] == "success"


def test_markdown_and_html_from_a_results_document_are_posted_as_text(
    client: TestClient, ci_token: Any, github: tuple[str, fake_github.State]
) -> None:
    # The server's way of publishing (App mode); test_action_publish.py checks the action's.
    _, state = github
    token: Token = ci_token(workspace="octo", repository=REPO, branches=("main",))
    upload(
        client,
        token,
        branch="feature",
        event="pull_request",
        pr_number=6,
        base_branch="main",
        workload=HOSTILE_WORKLOAD,
        broken=["pytorch_eager/float32/bs1"],
        broken_reason=HOSTILE_REASON,
    )
    (comment,) = state.comment_bodies(REPO, 6, login=BOT)
    assert "rnx-benchmark: BLOCK" in comment
    assert_inert(comment)


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_github_being_down_never_fails_an_upload(
    database_url: str, ci_token: Any, refused_port: int
) -> None:
    from gate_server.asgi import create_app

    dead = f"http://127.0.0.1:{refused_port}"
    settings = app_mode_settings(database_url, app_key(), dead)
    token: Token = ci_token(workspace="octo", repository=REPO, branches=("main",))
    with TestClient(create_app(settings)) as c:
        answer = upload(c, token, branch="f", event="pull_request", pr_number=4, base_branch="main")
    assert answer["tier"] == "WARN"  # no baseline yet; the upload itself succeeded


def test_the_servers_sticky_comment_is_found_across_pages_and_only_its_own_is_edited(
    github: tuple[str, fake_github.State],
) -> None:
    from gate_server.github.pulls import publish
    from rnx_github.comment import COMMENT_MARKER

    url, state = github
    app = GitHubApp(AppCredentials("314", private_pem(app_key()), url))
    client = app.client(repository=REPO)
    state.seed_comments(REPO, 5, 130)
    # Someone quoting the marker, and the action's own sticky comment: neither is the App's.
    quoted = state._add_comment(REPO, 5, COMMENT_MARKER + "\nquoted", "Codertocat")["body"]
    action = state._add_comment(REPO, 5, COMMENT_MARKER + "\nthe action's", ACTIONS_BOT)["body"]

    def post(sha: str) -> list[str]:
        return publish(
            client, author=app.bot_login(), repository=REPO, pr_number=5, head_sha=sha, runs=[]
        )

    assert post("d" * 40) == []
    state.seed_comments(REPO, 5, 90)  # the App's comment now sits on page 2 of 3
    assert post("e" * 40) == []

    (ours,) = state.comment_bodies(REPO, 5, login=BOT)
    assert ours.startswith(COMMENT_MARKER) and "commit eeeeeeeeeeee" in ours
    assert quoted in state.comment_bodies(REPO, 5, login="Codertocat")
    assert state.comment_bodies(REPO, 5, login=ACTIONS_BOT) == [action]
    pages = [e for e in state.log if e[0] == "GET" and e[1].endswith("/comments")]
    assert len(pages) >= 2 + 3  # every page read, both times
    assert [s["context"] for s in state.statuses[(REPO, "e" * 40)]] == ["rnx-benchmark"]
    app.close()
