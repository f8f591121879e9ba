"""Uploads and accepts with a GitHub Actions OIDC token instead of a CI token.

On both databases: bound to the registered repository by GitHub's id, one use per token id."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from starlette.testclient import TestClient

from gate_server.db import Database, repositories
from gate_server.settings import ServerSettings
from testbed.factories import body, make_results
from testbed.gate_helpers import Token, insert_change_point, signed_headers
from testbed.oidc_issuer import OidcIssuer

REPO = "Codertocat/Hello-World"
GITHUB_ID = 186853002
AUDIENCE = "kernalin"


@pytest.fixture(scope="module")
def issuer() -> Iterator[OidcIssuer]:
    server = OidcIssuer()
    yield server
    server.close()


@pytest.fixture
def server_settings(database_url: str, issuer: OidcIssuer) -> ServerSettings:
    return ServerSettings(
        database_url=database_url,
        public_url="http://gate.test",
        oidc_issuer=issuer.url,
        oidc_audience=AUDIENCE,
    )


@pytest.fixture
def registered(client: TestClient, ci_token: Any, database_url: str) -> Token:
    """The repository registered (a CI token) and its GitHub id known."""
    token: Token = ci_token(workspace="octo", repository=REPO, branches=("master",))
    s = Database(database_url)
    try:
        with s.write() as conn:
            assert repositories.bind_github_id(conn, GITHUB_ID, REPO)
    finally:
        s.close()
    return token


def upload(client: TestClient, secret: str, **doc_args: Any) -> Any:
    doc = make_results(repository=REPO, **doc_args)
    return client.post("/api/v1/runs", content=body(doc), headers=signed_headers(secret, body(doc)))


def test_a_push_from_a_baseline_branch_uploads_a_baseline_and_a_jti_is_spent_once(
    client: TestClient, registered: Token, issuer: OidcIssuer
) -> None:
    oidc = issuer.token(audience=AUDIENCE, ref="refs/heads/master", event_name="push")
    r = upload(client, oidc, branch="master", sha="a" * 40)
    assert r.status_code == 201, r.text
    assert r.json()["is_baseline"] is True
    again = upload(client, oidc, branch="master", sha="c" * 40)
    assert again.status_code == 401 and again.json()["error"]["code"] == "replayed_oidc_token"
    # Reading the run back works with a fresh token.
    fresh = issuer.token(audience=AUDIENCE)
    view = client.get(
        f"/api/v1/runs/{r.json()['run_id']}", headers={"Authorization": f"Bearer {fresh}"}
    )
    assert view.status_code == 200 and view.json()["repository"] == REPO


def test_pull_request_code_never_makes_a_baseline(
    client: TestClient, registered: Token, issuer: OidcIssuer
) -> None:
    # A PR's workflow claims to be a push on master: stored, gated, but not a baseline.
    oidc = issuer.token(audience=AUDIENCE, ref="refs/pull/7/merge", event_name="pull_request")
    r = upload(client, oidc, branch="master", sha="d" * 40)
    assert r.status_code == 201, r.text
    assert r.json()["is_baseline"] is False
    # Nor can it accept a run.
    pr = upload(
        client,
        issuer.token(audience=AUDIENCE, ref="refs/pull/7/merge", event_name="pull_request"),
        branch="feature",
        event="pull_request",
        pr_number=7,
        base_branch="master",
        sha="e" * 40,
    )
    accept = client.post(
        f"/api/v1/runs/{pr.json()['run_id']}/accept",
        json={"reason": "sneaky"},
        headers={
            "Authorization": "Bearer "
            + issuer.token(audience=AUDIENCE, ref="refs/pull/7/merge", event_name="pull_request")
        },
    )
    assert accept.status_code == 403 and accept.json()["error"]["code"] == "branch_out_of_scope"
    # The accept workflow (issue_comment runs on the default branch) may.
    accept = client.post(
        f"/api/v1/runs/{pr.json()['run_id']}/accept",
        json={"reason": "accepted in the PR"},
        headers={
            "Authorization": f"Bearer {issuer.token(audience=AUDIENCE, event_name='issue_comment')}"
        },
    )
    assert accept.status_code == 200, accept.text


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_the_first_verified_token_ties_githubs_id_to_the_registered_name(
    client: TestClient, ci_token: Any, issuer: OidcIssuer, database_url: str
) -> None:
    ci_token(workspace="octo", repository=REPO, branches=("master",))
    r = upload(client, issuer.token(audience=AUDIENCE, repository_id=4711), branch="master")
    assert r.status_code == 201, r.text
    s = Database(database_url)
    try:
        with s.read() as conn:
            bound = repositories.by_github_id(conn, 4711)
    finally:
        s.close()
    assert bound is not None and bound.name == REPO
    # From then on the id is the repository's: another id under the same name is refused.
    r = upload(client, issuer.token(audience=AUDIENCE, repository_id=4712), branch="master")
    assert r.status_code == 403 and r.json()["error"]["code"] == "repository_not_registered"


def test_tokens_for_other_repositories_audiences_and_revoked_scopes_are_refused(
    client: TestClient, registered: Token, issuer: OidcIssuer, database_url: str
) -> None:
    r = upload(client, issuer.token(audience=AUDIENCE, repository_id=999), branch="master")
    assert r.status_code == 403 and r.json()["error"]["code"] == "repository_not_registered"
    r = upload(
        client, issuer.token(audience=AUDIENCE, repository="Codertocat/Other"), branch="master"
    )
    assert r.status_code == 403 and r.json()["error"]["code"] == "repository_mismatch"
    r = upload(client, issuer.token(audience="https://other.example"), branch="master")
    assert r.status_code == 401 and "audience" in r.json()["error"]["message"]
    from gate_server.domain.auth import revoke_token

    s = Database(database_url)
    try:
        revoke_token(s, registered.id, actor="test")
    finally:
        s.close()
    r = upload(client, issuer.token(audience=AUDIENCE), branch="master")
    assert r.status_code == 403 and r.json()["error"]["code"] == "no_ci_token"


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_oidc_can_be_turned_off(database_url: str, ci_token: Any, issuer: OidcIssuer) -> None:
    from gate_server.asgi import create_app

    settings = ServerSettings(database_url=database_url, oidc_audience=None)
    with TestClient(create_app(settings)) as c:
        r = upload(c, issuer.token(audience=AUDIENCE), branch="master")
    assert r.status_code == 401 and r.json()["error"]["code"] == "oidc_disabled"


def test_a_name_registered_in_two_workspaces_is_refused_until_an_admin_binds_it(
    client: TestClient, ci_token: Any, database_url: str, issuer: OidcIssuer
) -> None:
    """GitHub's id used to be bound to whichever row came first; now the upload says which
    command resolves it (409), and after `rnx repo bind` it goes to the workspace named."""
    from gate_server.cli.main import main as server_main

    ci_token(workspace="octo", repository=REPO, branches=("master",))
    ci_token(workspace="umbrella", repository=REPO, branches=("master",))
    oidc = issuer.token(audience=AUDIENCE, ref="refs/heads/master", event_name="push")
    refused = upload(client, oidc, branch="master", sha="a" * 40)
    assert refused.status_code == 409, refused.text
    error = refused.json()["error"]
    assert error["code"] == "ambiguous_repository"
    assert "octo, umbrella" in error["message"] and "rnx repo bind" in error["message"]
    bind = ["repo", "bind", "--repo", REPO, "--workspace", "umbrella", "--database-url"]
    assert server_main([*bind, database_url, "--github-id", str(GITHUB_ID)]) == 0
    # Binding the same id in the other workspace is refused in one line.
    other = ["repo", "bind", "--repo", REPO, "--workspace", "octo", "--database-url"]
    assert server_main([*other, database_url, "--github-id", str(GITHUB_ID)]) == 2
    oidc = issuer.token(audience=AUDIENCE, ref="refs/heads/master", event_name="push")
    ok = upload(client, oidc, branch="master", sha="b" * 40)
    assert ok.status_code == 201, ok.text
    s = Database(database_url)
    try:
        with s.read() as conn:
            (bound,) = [r for r in repositories.named(conn, REPO) if r.github_repository_id]
    finally:
        s.close()
    assert bound.workspace == "umbrella"


def _change_point_on_master(client: TestClient, registered: Token, database_url: str) -> int:
    """An open regression on master, between two stored baseline runs."""
    before, after = (
        upload(client, registered.secret, branch="master", sha=c * 40, seed=i).json()
        for i, c in enumerate("ab")
    )
    database = Database(database_url)
    try:
        with database.write() as conn:
            (repository,) = repositories.named(conn, REPO)
            found = insert_change_point(
                conn,
                repository_id=repository.id,
                branch="master",
                environment_key=make_results().environment.key,
                configuration="pytorch_eager/float32/bs1",
                before_run_id=before["run_id"],
                after_run_id=after["run_id"],
                ratio=1.2,
                low=1.15,
                high=1.25,
                p_value=1e-4,
            )
    finally:
        database.close()
    return found


def test_a_change_point_is_acknowledged_only_with_a_credential_for_its_branch(
    client: TestClient, registered: Token, issuer: OidcIssuer, ci_token: Any, database_url: str
) -> None:
    change_id = _change_point_on_master(client, registered, database_url)
    url = f"/api/v1/change-points/{change_id}/acknowledge"
    refused = {
        "OIDC of pull-request code": issuer.token(
            audience=AUDIENCE, ref="refs/pull/7/merge", event_name="pull_request"
        ),
        "OIDC of another branch": issuer.token(audience=AUDIENCE, ref="refs/heads/feature"),
    }
    for name, secret in refused.items():
        r = client.post(
            url, json={"note": "not mine"}, headers={"Authorization": f"Bearer {secret}"}
        )
        assert r.status_code == 403, (name, r.text)
        assert r.json()["error"]["code"] == "branch_out_of_scope", name
    pushed = issuer.token(audience=AUDIENCE, ref="refs/heads/master", actor="octocat")
    r = client.post(url, json={"note": "expected"}, headers={"Authorization": f"Bearer {pushed}"})
    assert r.status_code == 200, r.text
    assert r.json()["acknowledged_by"] == "github:octocat" and r.json()["note"] == "expected"
    # (Created last: an OIDC token acts with the newest CI token's scope.)
    release_only = ci_token(workspace="octo", repository=REPO, branches=("release/*",))
    auth = {"Authorization": f"Bearer {release_only.secret}"}
    r = client.post(url, json={"note": "overwritten"}, headers=auth)
    assert r.status_code == 403 and r.json()["error"]["code"] == "branch_out_of_scope", r.text
