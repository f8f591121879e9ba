"""End to end against the real server (`rnx serve`) on loopback, on SQLite and PostgreSQL."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx

from gate_server.db import Database, audit, runs, tokens
from rnx.schema import ResultsDocument
from rnx_cli.main import main as rnx
from rnx_cli.receipt import verify
from testbed.factories import body, make_results
from testbed.gate_helpers import LiveServer, create_token


class Uploader:
    def __init__(self, url: str, secret: str, sign: Callable[..., dict[str, str]]):
        self.sign = sign
        self.url = url
        self.secret = secret
        self.http = httpx.Client(base_url=url, timeout=60)

    def upload(self, doc: ResultsDocument, *, secret: str | None = None) -> httpx.Response:
        data = body(doc)
        return self.http.post(
            "/api/v1/runs", content=data, headers=self.sign(secret or self.secret, data)
        )

    def ok(self, doc: ResultsDocument) -> dict[str, Any]:
        r = self.upload(doc)
        assert r.status_code == 201, r.text
        answer: dict[str, Any] = r.json()
        return answer

    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.secret}"}


def _error_code(r: httpx.Response) -> str:
    return str(r.json()["error"]["code"])


def test_whole_cycle(shared_server: LiveServer, workspace: str, sign):
    live_server = shared_server
    tok = create_token(
        live_server.database_url, workspace=workspace, branches=("main", "release/*")
    )
    up = Uploader(live_server.url, tok.secret, sign)

    # Three pushes to main build the baseline history.
    pushes = [up.ok(make_results(branch="main", seed=s)) for s in (1, 2, 3)]
    assert pushes[0]["tier"] == "WARN" and pushes[0]["baseline"] is None
    assert all(p["is_baseline"] for p in pushes)
    assert pushes[2]["baseline"]["run_ids"] == [pushes[1]["run_id"], pushes[0]["run_id"]]
    assert pushes[2]["tier"] == "PASS", pushes[2]["reasons"]

    # A pull request 50% slower: BLOCK, compared with all three, and not a baseline.
    slow = make_results(
        event="pull_request", pr_number=12, branch="feature/slow", seed=4, slowdown=1.5
    )
    verdict = up.ok(slow)
    assert verdict["tier"] == "BLOCK", verdict["reasons"]
    assert verdict["baseline"]["run_ids"] == [p["run_id"] for p in reversed(pushes)]
    assert {c["verdict"] for c in verdict["comparisons"]} == {"slower"}
    assert verdict["is_baseline"] is False
    assert verdict["url"] == f"{live_server.url}/runs/{verdict['run_id']}"
    key = up.http.get("/api/v1/receipt-key").json()["public_key_pem"]
    claims = verify(verdict["receipt"], key)
    assert (claims["run_id"], claims["tier"]) == (verdict["run_id"], "BLOCK")

    stored = up.http.get(f"/api/v1/runs/{verdict['run_id']}", headers=up.auth()).json()
    assert stored["tier"] == "BLOCK" and stored["is_baseline"] is False

    # The team accepts it: it becomes main's newest baseline in this environment.
    accepted = up.http.post(
        f"/api/v1/runs/{verdict['run_id']}/accept",
        json={"reason": "exact softmax, slower by design"},
        headers=up.auth(),
    )
    assert accepted.status_code == 200, accepted.text
    assert accepted.json()["baseline_branch"] == "main"

    # The next PR at the same (new) speed is compared with the accepted run only, and passes.
    same = up.ok(
        make_results(
            event="pull_request", pr_number=13, branch="feature/next", seed=5, slowdown=1.5
        )
    )
    assert same["baseline"]["run_ids"] == [verdict["run_id"]]
    assert same["tier"] == "PASS", same["reasons"]
    # Another environment still has no baseline: WARN with that reason, never BLOCK.
    elsewhere = up.ok(
        make_results(
            event="pull_request",
            pr_number=14,
            branch="feature/gpu",
            environment="linux-a100",
            seed=6,
            slowdown=3.0,
        )
    )
    assert elsewhere["tier"] == "WARN" and elsewhere["baseline"] is None
    assert any("no baseline" in r for r in elsewhere["reasons"])


def test_scope_violations(shared_server: LiveServer, workspace: str, sign):
    database_url = shared_server.database_url
    s = Database(database_url)
    try:
        with s.read() as conn:
            runs_before = runs.count(conn)  # the server is shared: count this test's runs
    finally:
        s.close()
    tok = create_token(database_url, workspace=workspace, branches=("main",))
    up = Uploader(shared_server.url, tok.secret, sign)
    base = up.ok(make_results(seed=1))

    # Another repository.
    r = up.upload(make_results(repository="acme/secret-sauce", seed=2))
    assert (r.status_code, _error_code(r)) == (403, "repository_out_of_scope")

    # PR runs trying to become baselines: a fork's branch named main, a push event that
    # carries a PR number, and a push to a branch outside the token's patterns.
    sneaky = [
        make_results(event="pull_request", pr_number=5, branch="main", seed=3),
        make_results(event="push", pr_number=6, branch="main", base_branch="main", seed=4),
        make_results(event="push", branch="feature/x", base_branch="main", seed=5),
    ]
    for doc in sneaky:
        answer = up.ok(doc)
        assert answer["is_baseline"] is False
    later = up.ok(make_results(event="pull_request", pr_number=7, branch="f", seed=6))
    assert later["baseline"]["run_ids"] == [base["run_id"]]

    # A wrong signature: another token's key, or the right key over other bytes.
    other = create_token(database_url, workspace=workspace)
    r = up.http.post(
        "/api/v1/runs",
        content=body(make_results(seed=7)),
        headers={
            **sign(other.secret, body(make_results(seed=7))),
            "Authorization": f"Bearer {tok.secret}",
        },
    )
    assert (r.status_code, _error_code(r)) == (401, "bad_signature")

    # Replays: the identical request is answered from storage (nothing new stored); a captured
    # request older than 5 minutes, or its signature over changed bytes, is refused.
    doc = make_results(event="pull_request", pr_number=8, branch="g", seed=8)
    data = body(doc)
    captured = sign(tok.secret, data)
    first = up.http.post("/api/v1/runs", content=data, headers=captured)
    again = up.http.post("/api/v1/runs", content=data, headers=captured)
    assert first.status_code == 201 and again.status_code == 200
    assert again.json() == first.json()
    stale = sign(tok.secret, data, timestamp=int(time.time()) - 301)
    r = up.http.post("/api/v1/runs", content=data, headers=stale)
    assert (r.status_code, _error_code(r)) == (401, "stale_timestamp")
    promoted = data.replace(b'"event":"pull_request"', b'"event":"push"')
    assert promoted != data
    r = up.http.post("/api/v1/runs", content=promoted, headers=captured)
    assert (r.status_code, _error_code(r)) == (401, "bad_signature")

    # Junk bodies get a 4xx from the real server too, never a 5xx.
    for junk in (b"\x00\x01\x02", "\u2603".encode() * 1000, b"{" * 5000):
        r = up.http.post("/api/v1/runs", content=junk, headers=sign(tok.secret, junk))
        assert (r.status_code, _error_code(r)) == (400, "invalid_json")

    # A viewer token cannot upload.
    viewer = create_token(database_url, workspace=workspace, viewer=True)
    r = up.upload(make_results(seed=9), secret=viewer.secret)
    assert (r.status_code, _error_code(r)) == (403, "viewer_token")

    # A revoked token (revoked with the real CLI) is refused at once.
    assert rnx(["token", "revoke", str(tok.id), "--database-url", database_url]) == 0
    r = up.upload(make_results(seed=10))
    assert (r.status_code, _error_code(r)) == (401, "revoked_token")

    s = Database(database_url)
    try:
        with s.read() as conn:
            assert runs.count(conn) - runs_before == 1 + len(sneaky) + 1 + 1
            ours = tokens.by_id(conn, tok.id)
            assert ours is not None
            entries = audit.of_workspace(conn, ours.workspace_id, limit=10_000)
            actions = Counter(e["action"] for e in entries)
    finally:
        s.close()
    assert actions["run.upload"] == 6 and actions["run.upload.replay"] == 1
    assert actions["token.revoke"] == 1


def test_two_server_processes_on_one_postgresql(postgres_database, server_factory, token_for, sign):
    """Concurrent uploads spread over two processes, each run sent to both at once: every run
    is stored exactly once and both copies of a request get the same answer."""
    url = postgres_database
    # History 1 keeps each verdict cheap (two baseline runs at most): the test is about storage.
    env = {"RNX_BASELINE_HISTORY": "1"}
    servers = [server_factory(url, env), server_factory(url, env)]
    tok = token_for(url, branches=("main",))
    clients = [Uploader(s.url, tok.secret, sign) for s in servers]
    clients[0].ok(make_results(seed=0))  # one baseline, so uploads really gate
    docs = [
        make_results(event="pull_request", pr_number=i + 1, branch=f"pr-{i}", seed=100 + i)
        if i % 4
        else make_results(branch="main", seed=100 + i)
        for i in range(24)
    ]

    def send(job: tuple[int, int]) -> tuple[str, int, dict[str, Any]]:
        i, which = job
        r = clients[which].upload(docs[i])
        return str(docs[i].run_id), r.status_code, r.json()

    jobs = [(i, w) for i in range(len(docs)) for w in (0, 1)]
    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(send, jobs))

    by_run: dict[str, list[tuple[int, dict[str, Any]]]] = {}
    for run_id, status, answer in results:
        by_run.setdefault(run_id, []).append((status, answer))
    assert len(by_run) == len(docs)
    for run_id, pair in by_run.items():
        assert sorted(s for s, _ in pair) == [200, 201], (run_id, pair)
        # The same answer; its run link names the process each client reached (without
        # RNX_PUBLIC_URL the stored link is relative, made absolute per answer).
        (first, url_a), (second, url_b) = [
            ({k: v for k, v in a.items() if k != "url"}, a["url"]) for _, a in pair
        ]
        assert first == second
        assert url_a.endswith(f"/runs/{run_id}") and url_b.endswith(f"/runs/{run_id}")

    s = Database(url)
    try:
        with s.read() as conn:
            assert runs.count(conn) == len(docs) + 1
            uploads = [e for e in audit.entries(conn) if e["action"] == "run.upload"]
            assert all(runs.by_run_id(conn, str(d.run_id)) is not None for d in docs)
    finally:
        s.close()
    assert len(uploads) == len(docs) + 1
    assert len({e["subject"] for e in uploads}) == len(docs) + 1
