"""POST /api/v1/github/webhook on both databases, the App talking to the GitHub fake.

Signatures, redeliveries, "/kernalin accept" and everything that is not an error."""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from starlette.testclient import TestClient

from gate_server.db import Database, audit, repositories
from gate_server.http.webhook import WEBHOOK_PATH, signature_of, signature_ok
from gate_server.settings import ServerSettings
from testbed.factories import body, make_results
from testbed.fakes import fake_github, github_endpoints
from testbed.fakes.github_endpoints import add_file, add_pull, extras, install_app
from testbed.gate_helpers import Token, app_mode_settings, signed_headers, webhook_headers
from tests.github.payloads import load_payload, make_pr_comment

SECRET = "webhook secret for tests"
REPO = "Codertocat/Hello-World"  # as in the recorded payloads
GITHUB_ID = 186853002
PR = 7
HEAD = "ec26c3e57ca3a959ca5aad62de7213c562f8c821"
INSTALLATION = 4242
BOT = "rnx-gate[bot]"
# The workload the PR's runs measured, as it is in each PR commit the tests upload for.
KERNEL = "import torch\n\n\nclass Model(torch.nn.Module):\n    pass\n"
PR_COMMITS = (HEAD, "b" * 40, "c" * 40)


def test_githubs_hmac_test_vector() -> None:
    expected = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
    assert signature_of("It's a Secret to Everybody", b"Hello, World!") == expected
    assert signature_ok("It's a Secret to Everybody", b"Hello, World!", expected)
    assert not signature_ok("It's a Secret to Everybody", b"Hello, World!!", expected)
    assert not signature_ok("another secret", b"Hello, World!", expected)
    assert not signature_ok("It's a Secret to Everybody", b"Hello, World!", None)
    assert not signature_ok("It's a Secret to Everybody", b"Hello, World!", expected[7:])


@pytest.fixture
def github(app_key: rsa.RSAPrivateKey) -> Iterator[tuple[str, fake_github.State]]:
    assert github_endpoints.ROUTES[0] in fake_github.ROUTES  # the App's routes are mounted
    with fake_github.serve() as (url, state):
        install_app(state, app_key, {REPO: INSTALLATION}, app_id="12345")
        state.repo(REPO).default_branch = "master"
        add_pull(state, REPO, PR, base="master", head_sha=HEAD)
        for sha in PR_COMMITS:
            add_file(state, REPO, sha, "kernels/attention.py", KERNEL)
        yield url, state


@pytest.fixture
def server_settings(
    database_url: str, github: tuple[str, fake_github.State], app_key: rsa.RSAPrivateKey
) -> ServerSettings:
    return app_mode_settings(
        database_url,
        app_key,
        github[0],
        app_id="12345",
        public_url="http://gate.test",
        github_webhook_secret=SECRET,
    )


def deliver(
    client: TestClient,
    event: str,
    payload: dict[str, Any] | bytes,
    *,
    delivery: str | None = None,
    secret: str = SECRET,
) -> Any:
    raw = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    return client.post(
        WEBHOOK_PATH,
        content=raw,
        headers={
            **webhook_headers(secret, raw, event, delivery or str(uuid.uuid4())),
            "User-Agent": "GitHub-Hookshot/test",
        },
    )


def post_run(client: TestClient, token: Token, doc: Any) -> dict[str, Any]:
    """Upload `doc` signed with `token`; its answer, after a 201."""
    r = client.post(
        "/api/v1/runs", content=body(doc), headers=signed_headers(token.secret, body(doc))
    )
    assert r.status_code == 201, r.text
    answer: dict[str, Any] = r.json()
    return answer


def accept_run(client: TestClient, token: Token, run_id: str) -> Any:
    return client.post(
        f"/api/v1/runs/{run_id}/accept",
        json={"reason": "x"},
        headers={"Authorization": f"Bearer {token.secret}"},
    )


def upload_pr_run(
    client: TestClient,
    token: Token,
    *,
    slowdown: float,
    sha: str = HEAD,
    workload: str = "kernels/attention.py",
    workload_sha256: str = hashlib.sha256(KERNEL.encode()).hexdigest(),
) -> str:
    doc = make_results(
        repository=REPO,
        branch="feature",
        sha=sha,
        event="pull_request",
        pr_number=PR,
        base_branch="master",
        slowdown=slowdown,
        seed=2,
        workload=workload,
        workload_sha256=workload_sha256,
    )
    return str(post_run(client, token, doc)["run_id"])


@pytest.fixture
def slow_pr(client: TestClient, ci_token: Any) -> tuple[Token, str]:
    """A baseline on master, then a PR run twice as slow: BLOCK."""
    token: Token = ci_token(workspace="octo", repository=REPO, branches=("master",))
    base = make_results(repository=REPO, branch="master", sha="a" * 40, seed=1)
    assert post_run(client, token, base)["is_baseline"]
    run_id = upload_pr_run(client, token, slowdown=2.0)
    assert (
        client.get(
            f"/api/v1/runs/{run_id}", headers={"Authorization": f"Bearer {token.secret}"}
        ).json()["tier"]
        == "BLOCK"
    )
    return token, run_id


def run_view(client: TestClient, token: Token, run_id: str) -> dict[str, Any]:
    r = client.get(f"/api/v1/runs/{run_id}", headers={"Authorization": f"Bearer {token.secret}"})
    assert r.status_code == 200
    data: dict[str, Any] = r.json()
    return data


# ---- refusals


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_bad_or_missing_signature_is_401(client: TestClient) -> None:
    payload = load_payload("ping")
    r = deliver(client, "ping", payload, secret="not the secret")
    assert r.status_code == 401 and r.json()["error"]["code"] == "bad_signature"
    raw = json.dumps(payload).encode()
    r = client.post(
        WEBHOOK_PATH, content=raw, headers={"X-GitHub-Event": "ping", "X-GitHub-Delivery": "x"}
    )
    assert r.status_code == 401


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_missing_headers_and_bad_json_are_400(client: TestClient) -> None:
    raw = b'{"zen": "x"}'
    r = client.post(
        WEBHOOK_PATH, content=raw, headers={"X-Hub-Signature-256": signature_of(SECRET, raw)}
    )
    assert r.status_code == 400 and "X-GitHub-Event" in r.json()["error"]["message"]
    r = deliver(client, "ping", b"not json {")
    assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_json"
    r = deliver(client, "ping", b"[1, 2]")
    assert r.status_code == 400


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_without_a_secret_the_webhook_says_how_to_configure_it(database_url: str) -> None:
    from gate_server.asgi import create_app

    with TestClient(create_app(ServerSettings(database_url=database_url))) as c:
        r = deliver(c, "ping", load_payload("ping"))
    assert r.status_code == 503
    assert "RNX_GITHUB_WEBHOOK_SECRET" in r.json()["error"]["message"]


# ---- ping, redeliveries, other events


def test_ping_is_answered_and_a_redelivery_gets_the_same_answer(client: TestClient) -> None:
    payload = load_payload("ping")
    first = deliver(client, "ping", payload, delivery="d-ping-1")
    assert first.status_code == 200
    assert first.json()["pong"] is True and first.json()["zen"] == payload["zen"]
    again = deliver(client, "ping", payload, delivery="d-ping-1")
    assert (again.status_code, again.json()) == (first.status_code, first.json())


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_other_events_are_ignored_with_200(client: TestClient) -> None:
    for event, name in [
        ("push", "push.1"),
        ("pull_request", "pull_request.opened"),
        ("pull_request", "pull_request.closed"),
        ("pull_request", "pull_request.synchronize"),
    ]:
        r = deliver(client, event, load_payload(name))
        assert r.status_code == 200 and "ignored" in r.json(), (name, r.text)


# ---- "/kernalin accept"


def test_write_user_accepts_and_a_redelivery_acts_once(
    client: TestClient,
    slow_pr: tuple[Token, str],
    github: tuple[str, fake_github.State],
    storage_of: Any,
) -> None:
    token, run_id = slow_pr
    _, state = github
    extras(state).permissions[(REPO, "alice")] = "write"
    comment = make_pr_comment(
        "/kernalin accept fp64 accumulation is the point",
        user="alice",
        number=PR,
        installation_id=INSTALLATION,
    )
    r = deliver(client, "issue_comment", comment, delivery="d-accept-1")
    assert r.status_code == 200, r.text
    answer = r.json()
    assert answer["accepted"] == [run_id]
    assert answer["status"] == "accepted by @alice: fp64 accumulation is the point"

    view = run_view(client, token, run_id)
    assert view["is_baseline"] and view["baseline_branch"] == "master"
    assert view["accepted"]["by"] == "github:alice"
    assert view["accepted"]["reason"] == "fp64 accumulation is the point"
    assert view["accepted"]["via"] == "github-webhook"

    # App mode posted the BLOCK verdict when the run was uploaded; accepting turned it to PASS.
    statuses = [(s["state"], s["description"], s["context"]) for s in state.statuses[(REPO, HEAD)]]
    assert statuses[0][0] == "failure" and statuses[0][1].startswith("BLOCK")
    assert statuses[-1] == (
        "success",
        "PASS: accepted by @alice: fp64 accumulation is the point",
        "rnx-benchmark",
    )
    sticky = [b for b in state.comment_bodies(REPO, PR, login=BOT) if b.startswith("<!--")]
    assert len(sticky) == 1, sticky  # the same comment, updated in place
    assert "rnx-benchmark: PASS" in sticky[0] and "Accepted** by @alice" in sticky[0]
    assert "Measured before acceptance: BLOCK." in sticky[0]
    assert [(c, who) for _, _, c, who in extras(state).reactions] == [("+1", BOT)]

    s = storage_of()
    with s.read() as conn:
        accepts = [e for e in audit.entries(conn) if e["action"] == "run.accept"]
    assert len(accepts) == 1 and accepts[0]["actor"] == "github:alice"

    # GitHub redelivers: same answer, nothing done twice.
    again = deliver(client, "issue_comment", comment, delivery="d-accept-1")
    assert (again.status_code, again.json()) == (200, answer)
    assert len(state.statuses[(REPO, HEAD)]) == 2 and len(extras(state).reactions) == 1

    # The next push to the PR, as slow as the accepted run, is compared with it: no BLOCK.
    next_run = upload_pr_run(client, token, slowdown=2.0, sha="b" * 40)
    assert run_view(client, token, next_run)["tier"] != "BLOCK"


def test_code_owner_from_the_base_branch_may_accept(
    client: TestClient, slow_pr: tuple[Token, str], github: tuple[str, fake_github.State]
) -> None:
    token, run_id = slow_pr
    _, state = github
    state.repo(REPO).files[("master", ".github/CODEOWNERS")] = "* @nobody\n/kernels/ @carol\n"
    state.repo(REPO).files[("feature", ".github/CODEOWNERS")] = "* @mallory\n"
    r = deliver(
        client,
        "issue_comment",
        make_pr_comment(
            "/kernalin accept new feature", user="carol", number=PR, installation_id=INSTALLATION
        ),
    )
    assert r.status_code == 200 and r.json()["accepted"] == [run_id], r.text
    assert "code owner of kernels/attention.py" in r.json()["why"]
    # The PR's own branch cannot make its author an owner.
    r = deliver(
        client,
        "issue_comment",
        make_pr_comment(
            "/kernalin accept mine", user="mallory", number=PR, installation_id=INSTALLATION
        ),
    )
    assert "denied" in r.json()


def test_unauthorised_user_gets_a_short_reply_and_nothing_changes(
    client: TestClient, slow_pr: tuple[Token, str], github: tuple[str, fake_github.State]
) -> None:
    token, run_id = slow_pr
    _, state = github
    extras(state).permissions[(REPO, "bob")] = "read"
    comment = make_pr_comment(
        "/kernalin accept trust me", user="bob", number=PR, installation_id=INSTALLATION
    )
    comment["comment"]["author_association"] = "OWNER"  # never trusted on its own
    r = deliver(client, "issue_comment", comment)
    assert r.status_code == 200
    assert "no write permission" in r.json()["denied"]
    replies = [b for b in state.comment_bodies(REPO, PR, login=BOT) if b.startswith("@")]
    assert len(replies) == 1 and replies[0].startswith("@bob rnx-benchmark: not accepted:")
    assert run_view(client, token, run_id)["accepted"] is None
    assert [s["state"] for s in state.statuses[(REPO, HEAD)]] == ["failure"]


def test_malformed_command_gets_a_reply_saying_why(
    client: TestClient, slow_pr: tuple[Token, str], github: tuple[str, fake_github.State]
) -> None:
    _, state = github
    for text, reply in [
        ("/kernalin accept", "a reason is required"),
        ("/kernalin rerun", "unknown command"),
    ]:
        payload = make_pr_comment(text, user="alice", number=PR, installation_id=INSTALLATION)
        r = deliver(client, "issue_comment", payload)
        assert r.status_code == 200 and reply in r.json()["replied"]
        last = state.comment_bodies(REPO, PR, login=BOT)[-1]
        assert reply in last and "`/kernalin accept <reason>`" in last


def not_commands() -> list[tuple[str, dict[str, Any]]]:
    issue = load_payload("issue_comment.created")
    issue["comment"]["body"] = "/kernalin accept on an issue, not a pull request"
    bot = make_pr_comment("/kernalin accept x", user="dependabot[bot]", number=PR)
    bot["comment"]["user"]["type"] = "Bot"
    return [
        ("issue", issue),
        ("edited", make_pr_comment("/kernalin accept x", user="alice", number=PR, action="edited")),
        (
            "deleted",
            make_pr_comment("/kernalin accept x", user="alice", number=PR, action="deleted"),
        ),
        ("bot", bot),
        ("quoted", make_pr_comment("> /kernalin accept x\nno", user="alice", number=PR)),
        ("other text", make_pr_comment("LGTM, ship it", user="alice", number=PR)),
    ]


def test_what_is_not_a_command_is_ignored_quietly(
    client: TestClient, slow_pr: tuple[Token, str], github: tuple[str, fake_github.State]
) -> None:
    token, run_id = slow_pr
    _, state = github
    extras(state).permissions[(REPO, "alice")] = "admin"
    for kind, payload in not_commands():
        before = len(state.log)
        r = deliver(client, "issue_comment", payload)
        assert r.status_code == 200 and "ignored" in r.json(), kind
        assert state.log[before:] == [], kind  # not one call to GitHub
    assert run_view(client, token, run_id)["accepted"] is None


def test_no_run_yet_gets_a_reply(
    client: TestClient, ci_token: Any, github: tuple[str, fake_github.State]
) -> None:
    _, state = github
    ci_token(workspace="octo", repository=REPO, branches=("master",))
    extras(state).permissions[(REPO, "alice")] = "write"
    r = deliver(
        client,
        "issue_comment",
        make_pr_comment(
            "/kernalin accept why not", user="alice", number=PR, installation_id=INSTALLATION
        ),
    )
    assert "no rnx-benchmark run" in r.json()["replied"]


def test_a_rename_keeps_the_repository_and_its_history(
    client: TestClient, slow_pr: tuple[Token, str], storage_of: Any
) -> None:
    token, run_id = slow_pr
    # Any verified delivery naming the repository ties its GitHub id to the registered one.
    issue_comment = deliver(client, "issue_comment", load_payload("issue_comment.created"))
    assert "ignored" in issue_comment.json()
    renamed = load_payload("issue_comment.created")
    renamed["action"] = "renamed"
    renamed["repository"]["full_name"] = "Codertocat/Hello-Kernels"
    renamed["changes"] = {"repository": {"name": {"from": "Hello-World"}}}
    renamed = {k: v for k, v in renamed.items() if k not in ("issue", "comment")}
    r = deliver(client, "repository", renamed)
    assert r.json()["renamed"] == {"from": REPO, "to": "Codertocat/Hello-Kernels"}
    assert run_view(client, token, run_id)["repository"] == "Codertocat/Hello-Kernels"
    s = storage_of()
    with s.read() as conn:
        found = repositories.by_github_id(conn, GITHUB_ID)
    assert found is not None and found.name == "Codertocat/Hello-Kernels"


@pytest.fixture
def storage_of(database_url: str) -> Iterator[Any]:
    opened: list[Database] = []

    def make() -> Database:
        s = Database(database_url)
        opened.append(s)
        return s

    yield make
    for s in opened:
        s.close()


def test_a_captured_comment_replayed_under_a_new_delivery_id_is_not_acted_on_again(
    client: TestClient,
    slow_pr: tuple[Token, str],
    github: tuple[str, fake_github.State],
) -> None:
    # GitHub signs the body, not X-GitHub-Delivery: a replay under a fresh id must not accept
    # the PR's newer head.
    token, run_id = slow_pr
    _, state = github
    extras(state).permissions[(REPO, "alice")] = "write"
    comment = make_pr_comment(
        "/kernalin accept intended", user="alice", number=PR, installation_id=INSTALLATION
    )
    first = deliver(client, "issue_comment", comment, delivery="d-original")
    assert first.status_code == 200 and first.json()["accepted"] == [run_id], first.text
    later = upload_pr_run(client, token, slowdown=3.0, sha="c" * 40)
    pull = next(p for p in state.repo(REPO).pulls if p["number"] == PR)
    pull["head"]["sha"] = "c" * 40
    replay = deliver(client, "issue_comment", comment, delivery="d-forged")
    assert replay.json() == first.json()
    assert not run_view(client, token, later)["is_baseline"]


# ---- the accepted run's workload is the file it names (issue 11, section 2)


def push_baseline(client: TestClient, token: Token, workload: str, *, slowdown: float) -> str:
    doc = make_results(
        repository=REPO,
        branch="master",
        sha="a" * 40,
        seed=1,
        workload=workload,
        slowdown=slowdown,
    )
    answer = post_run(client, token, doc)
    assert answer["is_baseline"], answer
    return str(answer["run_id"])


@pytest.fixture
def docs_owner(
    client: TestClient, ci_token: Any, github: tuple[str, fake_github.State]
) -> tuple[Token, str, str]:
    """The issue's attack: dora owns only docs/ (CODEOWNERS on master); a pull request's run,
    three times slower than attention.py's baseline, says its workload is docs/notes.md."""
    _, state = github
    token: Token = ci_token(workspace="octo", repository=REPO, branches=("master",))
    baseline = push_baseline(client, token, "kernels/attention.py", slowdown=1.0)
    state.repo(REPO).files[("master", ".github/CODEOWNERS")] = "* @nobody\n/docs/ @dora\n"
    extras(state).permissions[(REPO, "dora")] = "read"
    claimed = upload_pr_run(client, token, slowdown=3.0, workload="docs/notes.md")
    return token, baseline, claimed


def _dora_accepts(client: TestClient) -> Any:
    comment = make_pr_comment(
        "/kernalin accept docs only", user="dora", number=PR, installation_id=INSTALLATION
    )
    return deliver(client, "issue_comment", comment).json()


@pytest.mark.parametrize("notes_exist", [False, True], ids=["not-in-commit", "other-content"])
def test_a_docs_owner_cannot_accept_a_slow_kernel_claimed_as_docs(
    client: TestClient,
    github: tuple[str, fake_github.State],
    docs_owner: tuple[Token, str, str],
    notes_exist: bool,
) -> None:
    token, baseline, claimed = docs_owner
    _, state = github
    if notes_exist:
        add_file(state, REPO, HEAD, "docs/notes.md", "# Notes\n")
    answer = _dora_accepts(client)
    # The CODEOWNERS rule alone would let her: the path is what GitHub refuses.
    expected = (
        "docs/notes.md at commit ec26c3e57ca3 is not the workload the run measured"
        if notes_exist
        else "docs/notes.md does not exist at commit ec26c3e57ca3"
    )
    assert expected in answer["denied"], answer
    reply = state.comment_bodies(REPO, PR, login=BOT)[-1]
    assert reply.startswith("@dora rnx-benchmark: not accepted:") and expected in reply
    assert run_view(client, token, claimed)["accepted"] is None
    # The next 3x slower pull request of the real kernel is still compared with its baseline.
    later = upload_pr_run(client, token, slowdown=3.0, sha="b" * 40)
    view = run_view(client, token, later)
    assert view["tier"] == "BLOCK" and view["baseline"]["run_ids"] == [baseline]


def test_a_webhook_accept_moves_only_its_workloads_baseline(
    client: TestClient, ci_token: Any, github: tuple[str, fake_github.State]
) -> None:
    _, state = github
    token: Token = ci_token(workspace="octo", repository=REPO, branches=("master",))
    push_baseline(client, token, "kernels/attention.py", slowdown=1.0)
    other = push_baseline(client, token, "kernels/other.py", slowdown=2.0)
    slow = upload_pr_run(client, token, slowdown=3.0)
    extras(state).permissions[(REPO, "alice")] = "write"
    comment = make_pr_comment(
        "/kernalin accept slower by design", user="alice", number=PR, installation_id=INSTALLATION
    )
    assert deliver(client, "issue_comment", comment).json()["accepted"] == [slow]
    # other.py, three times slower than its own baseline, still BLOCKs against it.
    add_file(state, REPO, "c" * 40, "kernels/other.py", KERNEL)
    later = upload_pr_run(client, token, slowdown=6.0, sha="c" * 40, workload="kernels/other.py")
    view = run_view(client, token, later)
    assert view["baseline"]["run_ids"] == [other] and view["tier"] == "BLOCK"


def test_the_token_apis_check_the_workload_in_app_mode(
    client: TestClient, docs_owner: tuple[Token, str, str]
) -> None:
    token, _, claimed = docs_owner
    auth = {"Authorization": f"Bearer {token.secret}"}
    r = client.post(f"/api/v1/runs/{claimed}/accept", json={"reason": "x"}, headers=auth)
    assert r.status_code == 409, r.text
    assert r.json()["error"]["code"] == "workload_mismatch"
    assert "docs/notes.md does not exist at commit" in r.json()["error"]["message"]
    r = client.post(
        f"/api/v1/pulls/{PR}/accept",
        json={"reason": "x", "user": "dora", "run_ids": [claimed]},
        headers=auth,
    )
    assert r.status_code == 409 and r.json()["error"]["code"] == "workload_mismatch"
    assert run_view(client, token, claimed)["accepted"] is None


def test_a_repository_without_the_app_is_accepted_by_token_as_without_app_mode(
    client: TestClient, ci_token: Any
) -> None:
    # The App is installed on Codertocat/Hello-World only: it cannot ask about this repository.
    token: Token = ci_token(workspace="octo", repository="octo/elsewhere", branches=("main",))
    doc = make_results(
        repository="octo/elsewhere",
        event="pull_request",
        pr_number=3,
        branch="f",
        seed=3,
        workload="docs/notes.md",
    )
    r = accept_run(client, token, post_run(client, token, doc)["run_id"])
    assert r.status_code == 200 and r.json()["workload"] == "docs/notes.md", r.text


def test_when_github_cannot_be_asked_nothing_is_accepted(
    database_url: str, ci_token: Any, app_key: rsa.RSAPrivateKey, refused_port: int
) -> None:
    from gate_server.asgi import create_app

    dead = f"http://127.0.0.1:{refused_port}"
    settings = app_mode_settings(database_url, app_key, dead, app_id="12345")
    token: Token = ci_token(workspace="octo", repository=REPO, branches=("master",))
    doc = make_results(
        repository=REPO, event="pull_request", pr_number=PR, branch="f", base_branch="master"
    )
    with TestClient(create_app(settings)) as c:
        run_id = post_run(c, token, doc)["run_id"]
        r = accept_run(c, token, run_id)
        assert r.status_code == 502 and r.json()["error"]["code"] == "github_unavailable"
        assert "nothing was accepted" in r.json()["error"]["message"]
        assert run_view(c, token, run_id)["accepted"] is None
