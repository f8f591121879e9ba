"""Token scopes: every endpoint tried with every kind of token that must not pass, on both
databases. A CI token acts for one repository (and its baseline branches), a viewer token
reads one workspace, a revoked token does nothing, and a refusal never shows the data."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pytest
from starlette.testclient import TestClient

from gate_server.db import Database, audit, runs
from gate_server.domain.auth import revoke_token
from testbed.factories import body, make_results
from testbed.gate_helpers import Token, create_token, signed_headers

REPO = "acme/kernels"
PR = 7


@dataclass(frozen=True)
class World:
    tokens: dict[str, Token | None]
    baseline_run: str
    pr_run: str


def _build(client: TestClient, database_url: str) -> World:
    names: dict[str, dict[str, object]] = {
        "owner": {},
        "release-only": {"branches": ("release/*",)},
        "other-repo": {"repository": "acme/other"},
        "other-workspace": {"workspace": "globex", "repository": "globex/kernels"},
        "viewer": {"viewer": True},
        "viewer-other-workspace": {"workspace": "globex", "viewer": True},
        "revoked-ci": {},
        "revoked-viewer": {"viewer": True},
    }
    tokens: dict[str, Token | None] = {
        name: create_token(database_url, **kwargs)  # type: ignore[arg-type]
        for name, kwargs in names.items()
    }
    storage = Database(database_url)
    try:
        for name in ("revoked-ci", "revoked-viewer"):
            found = tokens[name]
            assert found is not None
            revoke_token(storage, found.id, actor="test")
    finally:
        storage.close()
    tokens["none"] = None
    tokens["garbage"] = Token(0, "rnx_ci_" + "A" * 43)
    owner = tokens["owner"]
    assert owner is not None
    ids = []
    for doc in (
        make_results(repository=REPO, seed=1),
        make_results(repository=REPO, branch="feature", pr_number=PR, seed=2, slowdown=1.5),
    ):
        raw = body(doc)
        answer = client.post("/api/v1/runs", content=raw, headers=signed_headers(owner.secret, raw))
        assert answer.status_code == 201, answer.text
        ids.append(str(doc.run_id))
    return World(tokens, ids[0], ids[1])


def _auth(token: Token | None) -> dict[str, str]:
    return {} if token is None else {"Authorization": f"Bearer {token.secret}"}


Call = Callable[[TestClient, World, Token | None], object]


def upload(c: TestClient, w: World, t: Token | None) -> object:
    raw = body(make_results(repository=REPO, seed=99))
    headers = signed_headers(t.secret, raw) if t else {"Content-Type": "application/json"}
    return c.post("/api/v1/runs", content=raw, headers=headers)


def read_run(c: TestClient, w: World, t: Token | None) -> object:
    return c.get(f"/api/v1/runs/{w.pr_run}?document=true", headers=_auth(t))


def accept(c: TestClient, w: World, t: Token | None) -> object:
    return c.post(
        f"/api/v1/runs/{w.pr_run}/accept",
        json={"reason": "intended: more accurate"},
        headers=_auth(t),
    )


def pull_runs(c: TestClient, w: World, t: Token | None) -> object:
    return c.get(f"/api/v1/pulls/{PR}/runs", headers=_auth(t))


def pull_accept(c: TestClient, w: World, t: Token | None) -> object:
    payload = {"reason": "intended", "user": "octocat", "run_ids": [w.pr_run]}
    return c.post(f"/api/v1/pulls/{PR}/accept", json=payload, headers=_auth(t))


def run_page(c: TestClient, w: World, t: Token | None) -> object:
    return c.get(f"/runs/{w.pr_run}", headers=_auth(t), follow_redirects=False)


def history_page(c: TestClient, w: World, t: Token | None) -> object:
    return c.get(f"/repos/{REPO}", headers=_auth(t), follow_redirects=False)


# endpoint -> token -> the status it must get. Writes that succeed run last (see below).
EXPECTED: dict[str, tuple[Call, dict[str, int]]] = {
    "POST /api/v1/runs": (
        upload,
        {
            "other-repo": 403,
            "other-workspace": 403,
            "viewer": 403,
            "viewer-other-workspace": 403,
            "revoked-ci": 401,
            "revoked-viewer": 401,
            "none": 401,
            "garbage": 401,
            "owner": 201,
        },
    ),
    "GET /api/v1/runs/{id}": (
        read_run,
        {
            "other-repo": 404,
            "other-workspace": 404,
            "viewer-other-workspace": 404,
            "revoked-ci": 401,
            "revoked-viewer": 401,
            "none": 401,
            "garbage": 401,
            "viewer": 200,
            "owner": 200,
        },
    ),
    "GET /api/v1/pulls/{n}/runs": (
        pull_runs,
        {
            "viewer": 403,
            "viewer-other-workspace": 403,
            "revoked-ci": 401,
            "none": 401,
            "garbage": 401,
            "other-repo": 200,  # its own repository's PR 7: none, checked below
            "other-workspace": 200,
            "owner": 200,
        },
    ),
    "GET /runs/{id} (dashboard)": (
        run_page,
        {
            "owner": 403,  # a CI token never opens the dashboard
            "other-workspace": 403,
            "viewer-other-workspace": 404,
            "revoked-viewer": 401,
            "garbage": 401,
            "none": 303,  # to /login
            "viewer": 200,
        },
    ),
    "GET /repos/{owner}/{name} (dashboard)": (
        history_page,
        {
            "owner": 403,
            "viewer-other-workspace": 404,
            "revoked-viewer": 401,
            "none": 303,
            "viewer": 200,
        },
    ),
    "POST /api/v1/runs/{id}/accept": (
        accept,
        {
            "other-repo": 404,
            "other-workspace": 404,
            "viewer": 403,
            "viewer-other-workspace": 403,
            "release-only": 403,  # the run targets main, not among its baseline branches
            "revoked-ci": 401,
            "none": 401,
            "garbage": 401,
        },
    ),
    "POST /api/v1/pulls/{n}/accept": (
        pull_accept,
        {
            "other-repo": 404,
            "other-workspace": 404,
            "viewer": 403,
            "release-only": 403,
            "revoked-ci": 401,
            "none": 401,
            "owner": 200,
        },
    ),
}


def test_every_endpoint_refuses_every_token_out_of_scope(
    client: TestClient, database_url: str
) -> None:
    world = _build(client, database_url)
    wrong = []
    for endpoint, (call, expected) in EXPECTED.items():
        for name, status in expected.items():
            response = call(client, world, world.tokens[name])
            got = response.status_code  # type: ignore[attr-defined]
            text = response.text  # type: ignore[attr-defined]
            if got != status:
                wrong.append(f"{endpoint} with {name}: {got}, expected {status}: {text[:160]}")
            elif got in (401, 403, 404) and endpoint.startswith(("GET /api", "POST /api")):
                # A refusal is the one error shape and carries nothing of the run.
                assert text.startswith('{"error":'), (endpoint, name, text[:200])
                assert "comparisons" not in text and "receipt" not in text, (endpoint, name)
            if name in ("other-repo", "other-workspace") and endpoint.startswith(
                "GET /api/v1/pulls"
            ):
                assert response.json() == {"runs": []}, (endpoint, name)  # type: ignore[attr-defined]
    assert not wrong, "\n".join(wrong)

    # Nothing a refused token tried left a trace: the run is accepted once, by the owner.
    storage = Database(database_url)
    try:
        with storage.read() as conn:
            run = runs.by_run_id(conn, world.pr_run)
            assert runs.count(conn) == 3  # two set up, one uploaded by the owner
            accepts = [
                e for e in audit.entries(conn, f"run:{world.pr_run}") if e["action"] == "run.accept"
            ]
    finally:
        storage.close()
    owner = world.tokens["owner"]
    assert owner is not None and run is not None and run.accepted_by == f"token:{owner.id}"
    assert accepts[0]["details"]["on_behalf_of"] == "github:octocat"
    assert len(accepts) == 1


def test_a_same_named_repository_in_another_workspace_is_another_repository(
    client: TestClient, database_url: str
) -> None:
    """Names are per workspace: globex's "acme/kernels" can neither see acme's runs nor feed
    its baselines, nor reuse one of its run ids."""
    acme = create_token(database_url)
    globex = create_token(database_url, workspace="globex", repository=REPO)
    doc = make_results(repository=REPO, seed=5)
    raw = body(doc)
    assert (
        client.post(
            "/api/v1/runs", content=raw, headers=signed_headers(acme.secret, raw)
        ).status_code
        == 201
    )
    assert client.get(f"/api/v1/runs/{doc.run_id}", headers=_auth(globex)).status_code == 404
    # The very same bytes from the other workspace: refused, not answered with acme's verdict.
    again = client.post("/api/v1/runs", content=raw, headers=signed_headers(globex.secret, raw))
    assert again.status_code == 409 and "receipt" not in again.text
    # globex's own push on main is no baseline for acme.
    own = body(make_results(repository=REPO, seed=6, slowdown=3.0))
    assert (
        client.post(
            "/api/v1/runs", content=own, headers=signed_headers(globex.secret, own)
        ).status_code
        == 201
    )
    pr = body(make_results(repository=REPO, branch="f", pr_number=1, seed=7))
    answer = client.post("/api/v1/runs", content=pr, headers=signed_headers(acme.secret, pr)).json()
    assert answer["baseline"]["run_ids"] == [str(doc.run_id)]


@pytest.mark.parametrize("header", ["Bearer", "Basic abc", "bearer  ", "Bearer a b", "Token x"])
def test_malformed_authorization_is_401_not_500(client: TestClient, header: str) -> None:
    r = client.get(
        "/api/v1/runs/00000000-0000-0000-0000-000000000000", headers={"Authorization": header}
    )
    assert r.status_code == 401 and r.json()["error"]["code"] in (
        "bad_authorization",
        "unknown_token",
    )


def test_a_viewer_of_another_workspace_sees_nothing_of_this_one(
    client: TestClient, database_url: str
) -> None:
    world = _build(client, database_url)
    outsider = world.tokens["viewer-other-workspace"]
    insider = world.tokens["viewer"]
    assert outsider is not None and insider is not None
    for page in ("/", "/audit", f"/repos/{REPO}", f"/runs/{world.pr_run}"):
        seen = client.get(page, headers=_auth(outsider)).text
        # The 404 pages name what was asked for (the URL); nothing else of acme's may show.
        for fact in (world.pr_run, world.baseline_run, REPO):
            if fact not in page:
                assert fact not in seen, (page, fact)
    # The same pages show them to the workspace's own viewer (so the check above can fail).
    own = client.get("/audit", headers=_auth(insider)).text
    assert world.pr_run in own or world.pr_run[:8] in own
