"""The action's accept mode (action/accept.py) against the real server app and GitHub fake.

Same rules as the webhook, applied with the workflow's token."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.testclient import TestClient

from action.accept import Server, credentials_from, run
from action.inputs import read_connection
from action.workflow import Workflow
from gate_server.asgi import create_app
from gate_server.settings import ServerSettings
from rnx_github.comment import COMMENT_MARKER
from testbed.fakes import fake_github
from testbed.oidc_issuer import OidcIssuer
from tests.github.accept_world import (
    GITHUB_ID,
    GITHUB_TOKEN,
    HEAD,
    PR,
    REPO,
    AcceptWorld,
    comment_event,
    register,
    seed_github,
    upload_runs,
)
from tests.github.payloads import load_payload


@pytest.fixture
def database_url(tmp_path: Path) -> str:
    # The server side is tested on both databases in test_webhook.py; here the action is.
    return f"sqlite:///{tmp_path / 'gate.db'}"


@pytest.fixture
def world(database_url: str, issuer: OidcIssuer) -> Iterator[tuple[AcceptWorld, TestClient, str]]:
    settings = ServerSettings(
        database_url=database_url,
        public_url="http://gate.test",
        oidc_issuer=issuer.url,
        oidc_audience="kernalin",
    )
    secret = register(database_url)
    with TestClient(create_app(settings)) as client, fake_github.serve() as (url, state):
        answer = upload_runs(client.post, secret)
        seed_github(state, answer)
        yield AcceptWorld(secret, answer["run_id"], state), client, url


def env_for(
    tmp_path: Path,
    api_url: str,
    text: str,
    *,
    user: str = "alice",
    oidc: OidcIssuer | None = None,
    ci: str = "",
) -> dict[str, str]:
    event = tmp_path / "event.json"
    event.write_text(comment_event(text, user))
    env = {
        "GITHUB_ACTIONS": "true",
        "GITHUB_EVENT_NAME": "issue_comment",
        "GITHUB_EVENT_PATH": str(event),
        "GITHUB_API_URL": api_url,
        "GITHUB_TOKEN": GITHUB_TOKEN,
        "KERNALIN_URL": "http://testserver",
        "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md"),
        "GITHUB_OUTPUT": str(tmp_path / "output.txt"),
    }
    if oidc is not None:
        env["ACTIONS_ID_TOKEN_REQUEST_URL"] = f"{oidc.url}/actions-token?api-version=2.0"
        env["ACTIONS_ID_TOKEN_REQUEST_TOKEN"] = oidc.request_token
    if ci:
        env["KERNALIN_TOKEN"] = ci
    return env


def go(env: dict[str, str], client: TestClient) -> tuple[Any, str]:
    out = io.StringIO()
    credentials = credentials_from(env, read_connection(env))
    server = Server(env["KERNALIN_URL"], credentials, transport=client._transport)
    outcome = run(env, workflow=Workflow(env, out), server=server)
    return outcome, out.getvalue()


def run_view(client: TestClient, world: AcceptWorld) -> dict[str, Any]:
    r = client.get(
        f"/api/v1/runs/{world.run_id}", headers={"Authorization": f"Bearer {world.ci_token}"}
    )
    data: dict[str, Any] = r.json()
    return data


def test_a_writer_accepts_with_the_oidc_token_alone(
    world: tuple[AcceptWorld, TestClient, str], tmp_path: Path, issuer: OidcIssuer
) -> None:
    w, client, api = world
    env = env_for(tmp_path, api, "/kernalin accept the new softmax is exact", oidc=issuer)
    outcome, log = go(env, client)
    assert (
        outcome.exit_code == 0 and outcome.message == "accepted by @alice: the new softmax is exact"
    ), log
    accepted = run_view(client, w)["accepted"]
    assert accepted["by"] == "github:alice" and accepted["via"] == "github-action"
    (sticky,) = w.sticky()
    assert sticky.startswith(COMMENT_MARKER)
    assert sticky.splitlines()[1] == "## ✅ rnx-benchmark: PASS"
    assert "> ✅ **Accepted** by @alice: the new softmax is exact" in sticky
    assert "kernels/attention.py" in sticky  # the measured table is kept
    status = w.state.statuses[(REPO, HEAD)][-1]
    assert (status["state"], status["description"]) == (
        "success",
        "PASS: accepted by @alice: the new softmax is exact",
    )
    assert "accepted by @alice" in (tmp_path / "summary.md").read_text()


def test_without_oidc_the_ci_token_is_used(
    world: tuple[AcceptWorld, TestClient, str], tmp_path: Path
) -> None:
    w, client, api = world
    outcome, log = go(env_for(tmp_path, api, "/kernalin accept on purpose", ci=w.ci_token), client)
    assert outcome.exit_code == 0 and outcome.message.startswith("accepted by @alice"), log
    # The server cannot verify the user a CI token's caller names: the token is the actor.
    assert run_view(client, w)["accepted"]["by"].startswith("token:")


def test_an_unauthorised_user_gets_a_reply_and_nothing_is_accepted(
    world: tuple[AcceptWorld, TestClient, str], tmp_path: Path, issuer: OidcIssuer
) -> None:
    w, client, api = world
    outcome, log = go(
        env_for(tmp_path, api, "/kernalin accept please", user="bob", oidc=issuer), client
    )
    assert outcome.exit_code == 0 and "not accepted" in outcome.message
    reply = w.state.comment_bodies(REPO, PR)[-1]
    assert reply.startswith("@bob rnx-benchmark: not accepted: @bob has no write permission")
    assert run_view(client, w)["accepted"] is None
    assert w.state.statuses[(REPO, HEAD)][-1]["state"] == "failure"


def test_malformed_and_non_commands(
    world: tuple[AcceptWorld, TestClient, str], tmp_path: Path, issuer: OidcIssuer
) -> None:
    w, client, api = world
    outcome, _ = go(env_for(tmp_path, api, "/kernalin accept", oidc=issuer), client)
    assert outcome.exit_code == 0
    assert "a reason is required" in w.state.comment_bodies(REPO, PR)[-1]
    before = len(w.state.log)
    for text in ("LGTM", "> /kernalin accept quoted"):
        outcome, _ = go(env_for(tmp_path, api, text, oidc=issuer), client)
        assert outcome.exit_code == 0
    event = tmp_path / "issue.json"
    event.write_text(
        (
            Path(__file__).parents[1]
            / "data"
            / "github-webhooks"
            / "issue_comment.created.payload.json"
        ).read_text()
    )
    env = {**env_for(tmp_path, api, "x", oidc=issuer), "GITHUB_EVENT_PATH": str(event)}
    assert load_payload("issue_comment.created")["issue"].get("pull_request") is None
    assert go(env, client)[0].exit_code == 0
    assert w.state.log[before:] == []  # not one call to GitHub
    assert run_view(client, w)["accepted"] is None


def test_an_unreachable_server_is_a_warning_and_a_reply(
    world: tuple[AcceptWorld, TestClient, str], tmp_path: Path, refused_port: int
) -> None:
    w, client, api = world
    env = env_for(tmp_path, api, "/kernalin accept on purpose", ci=w.ci_token)
    env["KERNALIN_URL"] = f"http://127.0.0.1:{refused_port}"
    out = io.StringIO()
    outcome = run(env, workflow=Workflow(env, out))
    assert outcome.exit_code == 0 and "::warning" in out.getvalue()
    assert "could not reach the gate server" in w.state.comment_bodies(REPO, PR)[-1]


def test_the_accepting_user_is_the_oidc_tokens_never_the_bodys(
    world: tuple[AcceptWorld, TestClient, str], issuer: OidcIssuer
) -> None:
    """`user` in the body used to be recorded as the actor whoever sent it. With an OIDC token
    the actor is the token's GitHub user, and a body naming another is refused."""
    w, client, _ = world

    def accept(actor: str, user: str) -> httpx.Response:
        token = issuer.token(
            audience="kernalin",
            repository=REPO,
            repository_id=GITHUB_ID,
            event_name="issue_comment",
            actor=actor,
        )
        return client.post(
            f"/api/v1/pulls/{PR}/accept",
            json={"reason": "on purpose", "user": user, "run_ids": [w.run_id]},
            headers={"Authorization": f"Bearer {token}"},
        )

    refused = accept("mallory", "alice")
    assert refused.status_code == 403, refused.text
    assert refused.json()["error"]["code"] == "user_mismatch"
    assert run_view(client, w)["accepted"] is None
    ok = accept("Alice", "alice")  # GitHub logins are case-insensitive
    assert ok.status_code == 200, ok.text
    assert run_view(client, w)["accepted"]["by"] == "github:Alice"
