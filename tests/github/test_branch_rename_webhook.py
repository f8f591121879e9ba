"""Branch renames learnt from GitHub's webhooks, on the real server on loopback (both databases),
confirmed against the GitHub fake's branches endpoint (200, 301 for a renamed branch, 404)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from gate_server.db import Database, audit
from gate_server.db.schema import branch_renames
from gate_server.http.webhook import WEBHOOK_PATH
from rnx_github.client import branch_of_location
from testbed.factories import body, make_results
from testbed.fakes import fake_github
from testbed.fakes.github_endpoints import add_pull, extras, install_app, rename_branch
from testbed.gate_helpers import (
    LiveServer,
    Token,
    app_mode_env,
    create_token,
    signed_headers,
    webhook_headers,
)
from tests.github import payloads

SECRET = "webhook secret for branch renames"
REPO = "Codertocat/Hello-World"  # as in the recorded payloads
INSTALLATION = 4242
APP_ID = "12345"
BRANCH_LOOKUP = f"/repos/{REPO}/branches/"


@pytest.fixture
def github(app_key: rsa.RSAPrivateKey) -> Iterator[tuple[str, fake_github.State]]:
    with fake_github.serve() as (url, state):
        install_app(state, app_key, {REPO: INSTALLATION}, app_id=APP_ID)
        repo = state.repo(REPO)
        repo.default_branch = "master"
        repo.refs.update(master="a" * 40, develop="b" * 40)
        for number in (7, 8):
            add_pull(state, REPO, number, base="master", head_sha=f"{number:040x}")
        yield url, state


def app_env(api_url: str, key: rsa.RSAPrivateKey) -> dict[str, str]:
    return {"RNX_GITHUB_WEBHOOK_SECRET": SECRET, **app_mode_env(key, api_url, app_id=APP_ID)}


@pytest.fixture
def gate(
    database_url: str,
    server_factory: Callable[..., LiveServer],
    github: tuple[str, fake_github.State],
    app_key: rsa.RSAPrivateKey,
) -> LiveServer:
    """The real server in GitHub App mode, talking to the GitHub fake."""
    return server_factory(database_url, env=app_env(github[0], app_key))


def register(database_url: str) -> Token:
    return create_token(database_url, workspace="octo", repository=REPO, branches=("master",))


def deliver(server: LiveServer, event: str, payload: dict[str, Any], delivery: str = "") -> Any:
    raw = json.dumps(payload).encode()
    r = httpx.post(
        server.url + WEBHOOK_PATH,
        content=raw,
        headers={
            **webhook_headers(SECRET, raw, event, delivery or str(uuid.uuid4())),
            "User-Agent": "GitHub-Hookshot/test",
        },
        timeout=30,
    )
    assert r.status_code == 200, r.text
    return r.json()


def upload(server: LiveServer, token: Token, **kwargs: Any) -> dict[str, Any]:
    doc = make_results(repository=REPO, **kwargs)
    r = httpx.post(
        server.url + "/api/v1/runs",
        content=body(doc),
        headers=signed_headers(token.secret, body(doc)),
        timeout=30,
    )
    assert r.status_code == 201, r.text
    answer: dict[str, Any] = r.json()
    return answer


def baseline_branch(server: LiveServer, token: Token, run_id: str) -> str | None:
    r = httpx.get(
        f"{server.url}/api/v1/runs/{run_id}",
        headers={"Authorization": f"Bearer {token.secret}"},
        timeout=30,
    )
    assert r.status_code == 200, r.text
    found: str | None = r.json()["baseline_branch"]
    return found


def recorded(database_url: str) -> tuple[list[tuple[str, str]], list[dict[str, Any]]]:
    """The rename log and the audit entries of renames."""
    s = Database(database_url)
    try:
        with s.read() as conn:
            rows = [(r.from_branch, r.to_branch) for r in conn.execute(branch_renames.select())]
            entries = [e for e in audit.entries(conn) if e["action"] == "branch.rename"]
    finally:
        s.close()
    return rows, entries


def branch_lookups(state: fake_github.State) -> list[tuple[str, int]]:
    return [(path, status) for _, path, status in state.log if path.startswith(BRANCH_LOOKUP)]


PR_AGAINST = dict(event="pull_request", branch="feature", pr_number=7)


def make_base_branch_edited(old: str, new: str, *, number: int = 7) -> dict[str, Any]:
    """The event as the App gets it: with the App's installation on the repository."""
    return payloads.make_base_branch_edited(old, new, number=number, installation_id=INSTALLATION)


def make_default_branch_edited(old: str, new: str) -> dict[str, Any]:
    return payloads.make_default_branch_edited(old, new, installation_id=INSTALLATION)


def test_a_confirmed_rename_carries_the_history_to_the_new_name(
    gate: LiveServer, github: tuple[str, fake_github.State]
) -> None:
    _, state = github
    token = register(gate.database_url)
    base = upload(gate, token, branch="master", sha="a" * 40, seed=1)
    assert base["is_baseline"]

    assert rename_branch(state, REPO, "master", "main") == [7, 8]  # on GitHub
    first = deliver(
        gate,
        "pull_request",
        make_base_branch_edited("master", "main", number=7),
        delivery="d-pr-7",
    )
    assert first["branch_renamed"] == {
        "repository": REPO,
        "from": "master",
        "to": "main",
        "baseline_runs_moved": 1,
        "tokens_widened": [token.id],
    }
    # GitHub's redelivery gets the stored answer; the other retargeted PR's event and the
    # default branch's event change nothing either.
    assert deliver(gate, "pull_request", make_base_branch_edited("master", "main"), "d-pr-7") == (
        first
    )
    for event, payload in [
        ("pull_request", make_base_branch_edited("master", "main", number=8)),
        ("repository", make_default_branch_edited("master", "main")),
    ]:
        answer = deliver(gate, event, payload)
        assert "was followed before; nothing changed" in answer["ignored"], answer
    assert branch_lookups(state) == [(BRANCH_LOOKUP + "master", 301)]  # asked GitHub once
    rows, audit = recorded(gate.database_url)
    assert rows == [("master", "main")] and len(audit) == 1
    assert audit[0]["actor"] == "github:Codertocat"
    assert audit[0]["details"]["via"] == "webhook:pull_request.edited"

    # A PR against main is compared with the baselines recorded under master: a credible
    # slowdown blocks instead of warning about a missing baseline.
    slow = upload(gate, token, base_branch="main", sha="b" * 40, seed=2, slowdown=2.0, **PR_AGAINST)
    assert slow["tier"] == "BLOCK", slow["reasons"]
    assert slow["baseline"]["branch"] == "main"
    assert slow["baseline"]["run_ids"] == [base["run_id"]]
    # A CI job that started before the rename uploads a push to master: it lands on main.
    late = upload(gate, token, branch="master", sha="c" * 40, seed=3)
    assert late["is_baseline"] and baseline_branch(gate, token, late["run_id"]) == "main"
    # Pushes to main keep becoming baselines with the token made for master.
    pushed = upload(gate, token, branch="main", sha="d" * 40, seed=4)
    assert pushed["is_baseline"] and pushed["baseline"]["run_ids"][:2] == [
        late["run_id"],
        base["run_id"],
    ]


def test_a_base_changed_by_hand_or_a_deleted_branch_moves_nothing(
    gate: LiveServer, github: tuple[str, fake_github.State]
) -> None:
    _, state = github
    token = register(gate.database_url)
    base = upload(gate, token, branch="master", sha="a" * 40, seed=1)
    extras(state).moved_branches[(REPO, "dev")] = "trunk"  # renamed, but not to the PR's base
    cases = [
        ("master", "develop", "'master' still exists, so the base was changed by hand"),
        ("release-1", "master", "'release-1' was deleted, not renamed"),
        ("dev", "master", "GitHub redirects 'dev' to 'trunk', not to 'master'"),
    ]
    for old, new, why in cases:
        answer = deliver(gate, "pull_request", make_base_branch_edited(old, new))
        assert answer["ignored"].endswith(f"is not a rename: {why}"), answer
    answer = deliver(gate, "repository", make_default_branch_edited("master", "develop"))
    assert "'master' still exists" in answer["ignored"]
    # A 404 while getting the App's token (not the App's installation) is no "deleted" branch.
    wrong = payloads.make_base_branch_edited("master", "main", installation_id=999)
    assert "GitHub could not confirm a rename" in deliver(gate, "pull_request", wrong)["ignored"]
    assert branch_lookups(state) == [
        (BRANCH_LOOKUP + "master", 200),
        (BRANCH_LOOKUP + "release-1", 404),
        (BRANCH_LOOKUP + "dev", 301),
        (BRANCH_LOOKUP + "master", 200),
    ]
    assert recorded(gate.database_url) == ([], [])
    against_develop = upload(gate, token, base_branch="develop", sha="b" * 40, seed=2, **PR_AGAINST)
    assert against_develop["baseline"] is None
    against_master = upload(gate, token, base_branch="master", sha="c" * 40, seed=3, **PR_AGAINST)
    assert against_master["baseline"]["run_ids"] == [base["run_id"]]


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_renaming_the_default_branch_alone_is_followed(
    gate: LiveServer, github: tuple[str, fake_github.State]
) -> None:
    _, state = github
    token = register(gate.database_url)
    base = upload(gate, token, branch="master", sha="a" * 40, seed=1)
    state.repo(REPO).pulls.clear()  # no open PRs: the repository's event is all GitHub sends
    rename_branch(state, REPO, "master", "dev/trunk")  # a slash: percent-encoded in URLs
    answer = deliver(gate, "repository", make_default_branch_edited("master", "dev/trunk"))
    assert answer["branch_renamed"]["to"] == "dev/trunk", answer
    pr = upload(gate, token, base_branch="dev/trunk", sha="b" * 40, seed=2, **PR_AGAINST)
    assert pr["baseline"]["run_ids"] == [base["run_id"]]


def test_the_branch_a_redirect_names() -> None:
    api = "https://api.github.com"
    assert branch_of_location(f"{api}/repos/o/r/branches/main") == "main"
    assert branch_of_location(f"{api}/repos/o/r/branches/dev%2Ftrunk") == "dev/trunk"
    assert branch_of_location(f"{api}/repositories/186853002/branches/main") == "main"
    assert branch_of_location("https://ghe.example/api/v3/repos/o/r/branches/a/b") == "a/b"
    assert branch_of_location(f"{api}/repos/o/r") is None
    assert branch_of_location("") is None


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_without_app_credentials_nothing_moves_and_the_answer_says_why(
    database_url: str, server_factory: Callable[..., LiveServer]
) -> None:
    server = server_factory(
        database_url, env={"RNX_GITHUB_WEBHOOK_SECRET": SECRET, "RNX_OIDC_AUDIENCE": "off"}
    )
    register(database_url)
    answer = deliver(server, "pull_request", make_base_branch_edited("master", "main"))
    assert "no GitHub App credentials (RNX_GITHUB_APP_ID) to confirm it" in answer["ignored"]
    assert f"rnx branch rename --repo {REPO} --from master --to main" in answer["ignored"]
    assert recorded(database_url) == ([], [])
    assert "may be a branch rename; without GitHub App credentials" in server.log.read_text()


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_github_failing_or_odd_payloads_are_never_a_server_error(
    database_url: str,
    server_factory: Callable[..., LiveServer],
    app_key: rsa.RSAPrivateKey,
    refused_port: int,
) -> None:
    dead = f"http://127.0.0.1:{refused_port}"  # GitHub's API cannot be reached
    server = server_factory(database_url, env=app_env(dead, app_key))
    register(database_url)
    answer = deliver(server, "pull_request", make_base_branch_edited("master", "main"))
    assert "GitHub could not confirm a rename" in answer["ignored"], answer
    odd = make_base_branch_edited("master", "main")
    odd["changes"]["base"]["ref"]["from"] = 42
    title_only = make_base_branch_edited("master", "main")
    title_only["changes"] = {"title": {"from": "an old title"}}
    no_repo = make_default_branch_edited("master", "main")
    no_repo["repository"]["id"] = "186853002"
    for event, payload, why in [
        ("pull_request", odd, "did not change the pull request's base branch"),
        ("pull_request", title_only, "did not change the pull request's base branch"),
        ("repository", no_repo, "names no repository id"),
    ]:
        assert why in deliver(server, event, payload)["ignored"]
    assert recorded(database_url) == ([], [])
