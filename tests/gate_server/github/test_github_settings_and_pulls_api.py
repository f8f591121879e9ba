"""The integration's settings (one clear error per bad value) and the PR accept API's refusals."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from gate_server.errors import SettingsError
from gate_server.settings import load_settings
from testbed.factories import body, make_results
from testbed.gate_helpers import Token, signed_headers


def test_defaults_and_overrides(tmp_path: Path) -> None:
    s = load_settings({})
    assert s.github_webhook_secret is None and s.github_app is None
    assert (s.oidc_issuer, s.oidc_audience) == (
        "https://token.actions.githubusercontent.com",
        "kernalin",
    )
    key = tmp_path / "app.pem"
    key.write_text("-----BEGIN PRIVATE KEY-----\nabc\n-----END PRIVATE KEY-----\n")
    s = load_settings(
        {
            "RNX_GITHUB_WEBHOOK_SECRET": "s3cret",
            "RNX_OIDC_AUDIENCE": "off",
            "RNX_GITHUB_APP_ID": "123",
            "RNX_GITHUB_APP_PRIVATE_KEY_FILE": str(key),
            "RNX_GITHUB_API_URL": "https://ghe.example/api/v3/",
        }
    )
    assert s.github_webhook_secret == "s3cret" and s.oidc_audience is None
    assert (
        s.github_app is not None
        and s.github_app.app_id == "123"
        and s.github_app.api_url == "https://ghe.example/api/v3"
    )


@pytest.mark.parametrize(
    ("env", "names"),
    [
        ({"RNX_GITHUB_APP_ID": "123"}, "RNX_GITHUB_APP_PRIVATE_KEY"),
        (
            {"RNX_GITHUB_APP_ID": "my-app", "RNX_GITHUB_APP_PRIVATE_KEY": "PRIVATE KEY"},
            "numeric id",
        ),
        ({"RNX_GITHUB_APP_ID": "1", "RNX_GITHUB_APP_PRIVATE_KEY": "not a key"}, "PEM"),
        ({"RNX_OIDC_ISSUER": "token.actions.githubusercontent.com"}, "RNX_OIDC_ISSUER"),
        ({"RNX_OIDC_LEEWAY_S": "ten"}, "RNX_OIDC_LEEWAY_S"),
        ({"RNX_GITHUB_WEBHOOK_SECRET_FILE": "/no/such/file"}, "RNX_GITHUB_WEBHOOK_SECRET_FILE"),
    ],
)
def test_bad_values_are_named(env: dict[str, str], names: str) -> None:
    with pytest.raises(SettingsError, match=names):
        load_settings(env)


@pytest.fixture
def database_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'gate.db'}"


def test_pulls_api_refuses_what_it_should(
    client: TestClient, ci_token: Any, viewer_token: Any
) -> None:
    token: Token = ci_token(repository="acme/kernels", branches=("main",))
    other: Token = ci_token(repository="acme/other", branches=("main",))
    doc = make_results(branch="f", event="pull_request", pr_number=5, base_branch="main")
    r = client.post(
        "/api/v1/runs", content=body(doc), headers=signed_headers(token.secret, body(doc))
    )
    assert r.status_code == 201
    run_id = r.json()["run_id"]
    auth = {"Authorization": f"Bearer {token.secret}"}

    listed = client.get(f"/api/v1/pulls/5/runs?head_sha={doc.git.sha}", headers=auth).json()
    assert [(x["run_id"], x["workload"]) for x in listed["runs"]] == [
        (run_id, "kernels/attention.py")
    ]
    assert client.get("/api/v1/pulls/5/runs?head_sha=" + "0" * 40, headers=auth).json() == {
        "runs": []
    }
    assert client.get("/api/v1/pulls/5/runs?head_sha=nope", headers=auth).status_code == 422
    assert client.get("/api/v1/pulls/x/runs", headers=auth).status_code == 404
    others = {"Authorization": f"Bearer {other.secret}"}
    assert client.get("/api/v1/pulls/5/runs", headers=others).json() == {"runs": []}
    viewer = {"Authorization": f"Bearer {viewer_token().secret}"}
    assert client.get("/api/v1/pulls/5/runs", headers=viewer).status_code == 403

    def accept(payload: Any, headers: dict[str, str] = auth, pr: int = 5) -> Any:
        return client.post(f"/api/v1/pulls/{pr}/accept", json=payload, headers=headers)

    r = accept({"reason": "", "user": "alice", "run_ids": [run_id]})
    assert r.status_code == 422 and r.json()["error"]["details"][0]["field"] == "reason"
    r = accept({"reason": "x", "user": "not a login!", "run_ids": [run_id]})
    assert r.status_code == 422 and r.json()["error"]["details"][0]["field"] == "user"
    assert accept({"reason": "x", "user": "alice", "run_ids": []}).status_code == 422
    assert accept({"reason": "x", "user": "alice", "run_ids": [run_id]}, pr=6).status_code == 404
    assert (
        accept({"reason": "x", "user": "alice", "run_ids": [run_id]}, headers=others).status_code
        == 404
    )
    ok = accept({"reason": "on purpose", "user": "alice", "run_ids": [run_id]})
    assert ok.status_code == 200, ok.text
    (accepted,) = ok.json()["accepted"]
    assert (accepted["accepted_by"], accepted["via"], accepted["baseline_branch"]) == (
        f"token:{token.id}",
        "github-action",
        "main",
    )
