"""Auto-sync in App mode, SQLite and PostgreSQL, against the GitHub fake: a `push` webhook (the
recorded payload, made a push of commits as GitHub documents them) makes the server dispatch
the workflow `rnx init` writes at each new commit that touches a linked workload or a module it
imports, never at an unrelated commit, never twice for one commit (redelivery, a job run again,
a dispatcher killed mid-dispatch), and at the head when the branch went N commits without a
run; the push's head waits for the push's own run; the in-flight limit holds; unlinking stops
it; kernalin.yml's `auto-sync:` links without `rnx link`."""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from starlette.testclient import TestClient

from gate_server.db import autosync, open_database, outbox, runs
from gate_server.db.runs import BaselineKey
from gate_server.domain.autosync import jobs as autosync_jobs
from gate_server.jobs.worker import OutboxWorker
from testbed.factories import body, make_results
from testbed.fakes import fake_github
from testbed.fakes.github_commits import commit_files, commits
from testbed.fakes.github_endpoints import add_kernalin_workflow, app_key, serve_with_app
from testbed.gate_helpers import (
    Token,
    app_mode_settings,
    app_without_worker,
    create_token,
    outbox_jobs,
    run_due_jobs,
    signed_headers,
    webhook_headers,
)
from tests.github.payloads import make_push

REPO = "acme/kernels"
GITHUB_ID = 4242
SECRET = "webhook-secret"
WORKLOAD = "kernels/attn.py"
_SHAS = itertools.count(1)
_DELIVERIES = itertools.count(1)

BASE_FILES: dict[str, str | None] = {
    WORKLOAD: "import torch\nfrom kernels.common import scale\n\nclass Model: ...\n",
    "kernels/common.py": "import numpy as np\nfrom . import fused\n\nscale = 2\n",
    "kernels/fused.py": "x = 1\n",
    "kernels/unused.py": "y = 1\n",
    "README.md": "# kernels\n",
    "kernalin.yml": "version: 1\n",
}


def new_sha() -> str:
    return f"{next(_SHAS):040x}"


@pytest.fixture
def github() -> Iterator[fake_github.State]:
    with serve_with_app({REPO: 77}) as (url, state):
        state.__dict__["api_url"] = url
        add_kernalin_workflow(state, REPO, "acme/rnx@v1")
        commit_files(state, REPO, new_sha(), BASE_FILES)
        yield state


@contextmanager
def started(database_url: str, state: fake_github.State, **settings: Any) -> Iterator[TestClient]:
    """App mode in-process with the webhook; the worker's loop is stopped so the test runs
    the jobs (run_due_jobs)."""
    chosen = app_mode_settings(
        database_url,
        app_key(),
        state.__dict__["api_url"],
        public_url="http://gate.test",
        outbox_poll_ms=60_000,
        github_webhook_secret=SECRET,
        **{"autosync_every": 0, "autosync_wait_s": 0, **settings},
    )
    with app_without_worker(chosen) as client:
        yield client


@pytest.fixture
def app(database_url: str, github: fake_github.State) -> Iterator[TestClient]:
    with started(database_url, github) as client:
        yield client


def push_payload(state: fake_github.State, before: str, shas: list[str]) -> dict[str, Any]:
    """GitHub's push event of the fake's commits `shas` (oldest first) on main."""
    changed = [(sha, commits(state).changed[(REPO, sha)]) for sha in shas]
    return make_push(REPO, GITHUB_ID, before, changed)


def deliver(
    client: TestClient, payload: dict[str, Any], delivery: str | None = None
) -> dict[str, Any]:
    data = body_of(payload)
    r = client.post(
        "/api/v1/github/webhook",
        content=data,
        headers=webhook_headers(SECRET, data, "push", delivery or f"push-{next(_DELIVERIES)}"),
    )
    assert r.status_code == 200, r.text
    answer: dict[str, Any] = r.json()
    return answer


def body_of(payload: dict[str, Any]) -> bytes:
    import json

    return json.dumps(payload).encode()


def push(
    client: TestClient, state: fake_github.State, changes: list[dict[str, str | None]]
) -> list[str]:
    """Commit `changes` (one dict of files per commit) on main and deliver their push; the
    new shas, oldest first."""
    before = state.repo(REPO).refs["main"]
    shas = []
    for files in changes:
        shas.append(new_sha())
        commit_files(state, REPO, shas[-1], files)
    deliver(client, push_payload(state, before, shas))
    run_due_jobs(client)
    return shas


def dispatched(state: fake_github.State) -> list[str]:
    return [d["inputs"]["commit"] for d in commits(state).dispatches]


def link(client: TestClient, token: Token, workload: str = WORKLOAD, **kw: Any) -> Any:
    data = {"repository": REPO, "branch": "main", "workload": workload, **kw}
    path = "/api/v1/autosync/links" + ("/remove" if kw.pop("remove", False) else "")
    data.pop("remove", None)
    return client.post(path, json=data, headers={"Authorization": f"Bearer {token.secret}"})


def upload(client: TestClient, token: Token, sha: str, event: str = "workflow_dispatch") -> None:
    data = body(make_results(sha=sha, workload=WORKLOAD, event=event))
    r = client.post("/api/v1/runs", content=data, headers=signed_headers(token.secret, data))
    assert r.status_code == 201, r.text


def rows(database_url: str) -> list[autosync.SyncCommit]:
    database = open_database(database_url)
    try:
        with database.read() as conn:
            [repo_id] = {r.id for r in _repositories(conn)}
            return autosync.commits(conn, repo_id)
    finally:
        database.close()


def _repositories(conn: Any) -> list[Any]:
    from gate_server.db import repositories

    return repositories.named(conn, REPO)


def test_a_commit_touching_the_linked_file_is_dispatched_once_and_an_unrelated_one_never(
    app: TestClient, database_url: str, github: fake_github.State
) -> None:
    token = create_token(database_url)
    r = link(app, token)
    assert r.status_code == 200 and r.json()["created"] is True, r.text
    assert link(app, token).json()["created"] is False  # linking twice is not an error
    before = github.repo(REPO).refs["main"]
    shas = [new_sha() for _ in range(3)]
    commit_files(github, REPO, shas[0], {"README.md": "# more\n"})
    commit_files(github, REPO, shas[1], {WORKLOAD: BASE_FILES[WORKLOAD] + "# faster\n"})
    commit_files(github, REPO, shas[2], {"kernels/unused.py": "y = 2\n"})
    payload = push_payload(github, before, shas)
    first = deliver(app, payload, "the-delivery")
    assert first["autosync"] == {"branch": "main", "after": shas[2]}
    run_due_jobs(app)
    assert dispatched(github) == [shas[1]]
    [d] = commits(github).dispatches
    assert (d["workflow"], d["ref"]) == ("kernalin.yml", "main")
    # GitHub redelivers the same delivery; someone replays the payload under a new id; the
    # push job and the dispatch job run again: still one dispatch.
    assert deliver(app, payload, "the-delivery") == first
    deliver(app, payload, "another-delivery")
    job = autosync_jobs.push_job(payload, rows(database_url)[0].repository_id)
    database = open_database(database_url)
    try:
        with database.write() as conn:
            assert job is not None
            outbox.enqueue(conn, autosync_jobs.PUSH_KIND, job)
            outbox.enqueue(
                conn, autosync_jobs.DISPATCH_KIND, {"repository_id": job["repository_id"]}
            )
    finally:
        database.close()
    run_due_jobs(app)
    assert dispatched(github) == [shas[1]]
    [row] = rows(database_url)
    assert (row.sha, row.state, row.reason, row.workloads) == (
        shas[1],
        autosync.DISPATCHED,
        "touched",
        [WORKLOAD],
    )


def test_a_module_the_workload_imports_counts_and_one_it_does_not_import_does_not(
    app: TestClient, database_url: str, github: fake_github.State
) -> None:
    token = create_token(database_url)
    link(app, token)
    shas = push(
        app,
        github,
        [
            {"kernels/common.py": "import numpy as np\nfrom . import fused\n\nscale = 3\n"},
            {"kernels/unused.py": "y = 3\n"},
            {"kernels/fused.py": "x = 2\n"},  # imported through common.py (relative import)
            {"kernels/unused.py": "y = 4\n"},
        ],
    )
    assert dispatched(github) == [shas[0], shas[2]]


def test_a_push_of_more_commits_than_the_payload_lists_is_read_through_compare(
    app: TestClient, database_url: str, github: fake_github.State
) -> None:
    token = create_token(database_url)
    link(app, token)
    changes: list[dict[str, str | None]] = [{"README.md": f"# {i}\n"} for i in range(25)]
    changes[22] = {"kernels/fused.py": "x = 22\n"}  # beyond the 20 the payload lists
    shas = push(app, github, changes)
    assert dispatched(github) == [shas[22]]
    assert ("GET", f"/repos/{REPO}/commits/{shas[22]}", 200) in github.log


def test_the_branch_gets_a_run_at_least_every_n_commits(
    database_url: str, github: fake_github.State
) -> None:
    with started(database_url, github, autosync_every=5) as client:
        token = create_token(database_url)
        link(client, token)
        # Nothing benchmarked yet: the first push's head starts the history.
        [first] = push(client, github, [{"README.md": "a\n"}])
        assert dispatched(github) == [first]
        upload(client, token, first)  # the dispatched workflow's run: a baseline of main
        push(client, github, [{"README.md": f"b{i}\n"} for i in range(3)])
        assert dispatched(github) == [first]  # 3 commits since the run: not yet
        later = push(client, github, [{"README.md": f"c{i}\n"} for i in range(2)])
        assert dispatched(github) == [first, later[-1]]  # 5 since the run: a run at the head
        assert [r.reason for r in rows(database_url)] == ["every-n", "every-n"]
        # A commit that touches the workload resets the count.
        touched = push(client, github, [{WORKLOAD: "# new\n"}, {"README.md": "d\n"}])
        assert dispatched(github)[-1] == touched[0] and len(dispatched(github)) == 3


def test_the_head_waits_for_the_pushs_own_run_and_the_in_flight_limit_holds(
    database_url: str, github: fake_github.State
) -> None:
    with started(database_url, github, autosync_wait_s=1, autosync_in_flight=1) as client:
        token = create_token(database_url)
        link(client, token)
        shas = push(client, github, [{WORKLOAD: f"# v{i}\n"} for i in range(3)])
        # The head waits; of the others, one at a time.
        assert dispatched(github) == [shas[0]]
        # Busy: one look waits (in 2 minutes); more pushes do not pile up more looks.
        assert pending_looks(database_url) == 1
        push(client, github, [{"README.md": "busy\n"}])
        push(client, github, [{"README.md": "still busy\n"}])
        assert pending_looks(database_url) == 1 and dispatched(github) == [shas[0]]
        upload(client, token, shas[0])
        upload(client, token, shas[2])  # the push's own workflow benchmarked its head
        time.sleep(1.2)
        repo_id = rows(database_url)[0].repository_id
        database = open_database(database_url)
        try:
            with database.write() as conn:  # the look BUSY_RETRY schedules, made due now
                outbox.enqueue(conn, autosync_jobs.DISPATCH_KIND, {"repository_id": repo_id})
        finally:
            database.close()
        run_due_jobs(client)
        assert dispatched(github) == [shas[0], shas[1]]
        states = {r.sha: r.state for r in rows(database_url)}
        assert states[shas[2]] == autosync.SKIPPED


def test_runs_of_a_pushs_earlier_commits_take_their_place_in_the_history(
    database_url: str, github: fake_github.State
) -> None:
    with started(database_url, github, autosync_wait_s=60) as client:
        token = create_token(database_url)
        link(client, token)
        shas = push(client, github, [{WORKLOAD: f"# h{i}\n"} for i in range(3)])
        assert dispatched(github) == shas[:2]  # the head waits for the push's own run
        upload(client, token, shas[2], event="push")  # which comes first
        upload(client, token, shas[1])  # then the dispatched runs, the later one first
        upload(client, token, shas[0])
        repo_id = rows(database_url)[0].repository_id
        database = open_database(database_url)
        try:
            with database.read() as conn:
                key = BaselineKey(repo_id, "main", "linux-x86_64-cpu-test", WORKLOAD)
                newest_first = [b.sha for b in runs.baselines(conn, key, 10)]
        finally:
            database.close()
        assert newest_first == shas[::-1]


def test_a_dispatcher_killed_mid_dispatch_never_dispatches_that_commit_again(
    app: TestClient, database_url: str, github: fake_github.State
) -> None:
    token = create_token(database_url)
    link(app, token)
    github.__dict__["github_commits"].hold.set()  # GitHub takes the dispatch, never answers
    before = github.repo(REPO).refs["main"]
    sha = new_sha()
    commit_files(github, REPO, sha, {WORKLOAD: "# held\n"})
    deliver(app, push_payload(github, before, [sha]))
    worker: OutboxWorker = app.app.state.outbox_worker  # type: ignore[attr-defined]
    worker.run_once()  # the push job: the commit is queued
    # The dispatch job as a process killed while GitHub holds its request: the row is
    # written `dispatching` and committed before the request, so a later look waits for it.
    [row] = rows(database_url)
    database = open_database(database_url)
    try:
        with database.write() as conn:
            autosync.set_state(conn, row.id, autosync.DISPATCHING)
    finally:
        database.close()
    github.__dict__["github_commits"].hold.clear()
    run_due_jobs(app)
    assert dispatched(github) == []
    assert [r.state for r in rows(database_url)] == [autosync.DISPATCHING]


def test_unlinking_stops_dispatches_and_bad_links_are_refused_with_the_fix(
    app: TestClient, database_url: str, github: fake_github.State
) -> None:
    token = create_token(database_url)
    auth = {"Authorization": f"Bearer {token.secret}"}
    link(app, token)
    listed = app.get("/api/v1/autosync/links", params={"repository": REPO}, headers=auth).json()
    assert [k["workload"] for k in listed["links"]] == [WORKLOAD]
    assert link(app, token, remove=True).status_code == 200
    again = link(app, token, remove=True)
    assert again.status_code == 404 and "rnx link --list" in again.json()["error"]["message"]
    push(app, github, [{WORKLOAD: "# unlinked\n"}])
    assert dispatched(github) == []
    listed = app.get("/api/v1/autosync/links", params={"repository": REPO}, headers=auth).json()
    assert listed["links"] == []
    for bad, code in [
        ({"branch": "release/*"}, "invalid_branch"),
        ({"workload": "../secrets.py"}, "invalid_workload_path"),
        ({"workload": "/etc/passwd"}, "invalid_workload_path"),
        ({"branch": ""}, "missing_branch"),
    ]:
        r = link(app, token, **bad)
        assert r.status_code == 422 and r.json()["error"]["code"] == code, r.text
    viewer = create_token(database_url, viewer=True)
    r = link(app, viewer)
    assert r.status_code == 403 and r.json()["error"]["code"] == "viewer_token", r.text
    other = link(app, token, repository="acme/other")
    assert other.status_code == 404, other.text
    out_of_scope = link(app, token, branch="dev")
    assert out_of_scope.status_code == 403, out_of_scope.text


def test_kernalin_yml_auto_sync_links_without_rnx_link(
    app: TestClient, database_url: str, github: fake_github.State
) -> None:
    create_token(database_url)
    config = "version: 1\nbenchmarks:\n  - workload: kernels/attn.py\nauto-sync:\n  branch: main\n"
    shas = push(
        app,
        github,
        [{"kernalin.yml": config}, {"kernels/fused.py": "x = 9\n"}, {"README.md": "z\n"}],
    )
    # The file's links are read at the pushed head; the first commit adds the file and
    # touches no workload.
    assert dispatched(github) == [shas[1]]
    # A push to another branch than the file names dispatches nothing.
    assert autosync_jobs.push_job({"ref": "refs/tags/v1", "after": shas[1]}, 1) is None


def test_a_renamed_branch_keeps_its_links(
    app: TestClient, database_url: str, github: fake_github.State
) -> None:
    from gate_server.domain.branches import rename_branch

    token = create_token(database_url, branches=("main", "trunk"))
    link(app, token)
    repo_id = rows_repository_id(database_url)
    database = open_database(database_url)
    try:
        with database.write() as conn:
            rename_branch(conn, repo_id, "main", "trunk", actor="test", via="test")
        with database.read() as conn:
            assert [(k.branch, k.workload) for k in autosync.links(conn, repo_id)] == [
                ("trunk", WORKLOAD)
            ]
    finally:
        database.close()


def rows_repository_id(database_url: str) -> int:
    database = open_database(database_url)
    try:
        with database.read() as conn:
            [repo] = _repositories(conn)
            return int(repo.id)
    finally:
        database.close()


def pending_looks(database_url: str) -> int:
    return len(outbox_jobs(database_url, autosync_jobs.DISPATCH_KIND, state=outbox.PENDING))


def test_a_dispatch_github_refuses_for_good_is_recorded_with_why_and_not_retried(
    app: TestClient, database_url: str, github: fake_github.State
) -> None:
    token = create_token(database_url)
    link(app, token)
    # An old workflow without the `commit` input: GitHub answers 422.
    old = "on:\n  workflow_dispatch:\njobs: {}\n"
    github.repo(REPO).files[("main", ".github/workflows/kernalin.yml")] = old
    [sha] = push(app, github, [{WORKLOAD: "# refused\n"}])
    assert dispatched(github) == []
    [row] = rows(database_url)
    assert row.state == autosync.REFUSED and "Unexpected inputs" in (row.note or "")
    assert pending_looks(database_url) == 0
    auth = {"Authorization": f"Bearer {token.secret}"}
    listed = app.get("/api/v1/autosync/links", params={"repository": REPO}, headers=auth).json()
    assert [(c["sha"], c["state"], c["reason"]) for c in listed["recent"]] == [
        (sha, "refused", "touched")
    ]
