"""Branch renames on both databases: the rename log, moving baselines, uploads still naming the
old branch, the dashboard's history, and `rnx branch rename` against the real server."""

from __future__ import annotations

import threading
from datetime import datetime, timezone
from typing import Any

import httpx
import pytest
from sqlalchemy import text

from gate_server.dashboard.reads import latest_per_branch
from gate_server.db import LATEST_VERSION, Database, audit, dashboard, repositories, tokens
from gate_server.db.migrations import migrate, schema_version
from gate_server.db.renames import BranchRename
from gate_server.db.schema import branch_renames
from gate_server.domain.branches import (
    BranchRenameResult,
    all_names,
    current_name,
    follow_renames,
    former_names,
    rename_branch,
)
from gate_server.errors import GateServerError
from rnx_cli.main import main
from testbed.factories import body, make_results
from testbed.gate_helpers import LiveServer, Token, create_token, signed_headers
from testbed.schema_v3 import build_v3_database

REPO = "acme/kernels"
T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


def log(*pairs: tuple[str, str]) -> list[BranchRename]:
    return [BranchRename(i + 1, a, b, T0, "test", "test") for i, (a, b) in enumerate(pairs)]


def test_names_follow_chains_cycles_and_names_taken_again() -> None:
    chain = log(("a", "b"), ("b", "c"))
    assert [follow_renames(chain, n)[0] for n in "abcx"] == ["c", "c", "c", "x"]
    assert former_names(chain, "c") == ["a", "b"]

    cycle = log(("a", "b"), ("b", "a"))  # renamed, then renamed back
    assert [follow_renames(cycle, n)[0] for n in "ab"] == ["a", "a"]
    assert former_names(cycle, "a") == ["b"] and former_names(cycle, "b") == []

    # A branch renamed to a name that was renamed away before takes that name over.
    taken = log(("a", "b"), ("c", "a"))
    assert [follow_renames(taken, n)[0] for n in "abc"] == ["a", "b", "a"]
    # A name renamed twice (a new branch took it in between): its newest rename counts.
    twice = log(("a", "b"), ("a", "d"))
    assert follow_renames(twice, "a")[0] == "d" and follow_renames(twice, "b")[0] == "b"


def upload(post: Any, token: Token, **kwargs: Any) -> dict[str, Any]:
    doc = make_results(**{"repository": REPO, **kwargs})
    r = post("/api/v1/runs", content=body(doc), headers=signed_headers(token.secret, body(doc)))
    assert r.status_code == 201, r.text
    answer: dict[str, Any] = r.json()
    return answer


def run_view(get: Any, token: Token, run_id: str) -> dict[str, Any]:
    r = get(f"/api/v1/runs/{run_id}", headers={"Authorization": f"Bearer {token.secret}"})
    assert r.status_code == 200, r.text
    view: dict[str, Any] = r.json()
    return view


def repository_id(storage: Database) -> int:
    with storage.read() as conn:
        (found,) = repositories.named(conn, REPO, workspace_id=1)
    return found.id


def rename(storage: Database, old: str, new: str) -> BranchRenameResult:
    with storage.write() as conn:
        return rename_branch(conn, repository_id(storage), old, new, actor="test", via="test")


def test_a_rename_moves_the_baselines_once_and_keeps_what_was_uploaded(
    client: Any, ci_token: Any, storage: Database
) -> None:
    token: Token = ci_token(repository=REPO, branches=("master",))
    first = upload(client.post, token, branch="master", sha="a" * 40, seed=1)
    second = upload(client.post, token, branch="master", sha="b" * 40, seed=2)
    assert first["is_baseline"] and second["is_baseline"]
    before = dict(event="pull_request", pr_number=2, branch="fix", base_branch="master", seed=6)
    open_pr = upload(client.post, token, sha="f" * 40, **before)  # accepted after the rename

    result = rename(storage, "master", "main")
    assert (result.changed, result.runs_moved, result.tokens_widened) == (True, 2, [token.id])
    again = rename(storage, "master", "main")  # a redelivery or a repeated command
    assert (again.changed, again.runs_moved, again.tokens_widened) == (False, 0, [])

    for answer in (first, second):
        view = run_view(client.get, token, answer["run_id"])
        assert view["branch"] == "master"  # as uploaded: the document says master
        assert view["baseline_branch"] == "main"
    with storage.read() as conn:
        rows = conn.execute(branch_renames.select()).all()
        entries = [e for e in audit.entries(conn) if e["action"] == "branch.rename"]
        (ci,) = [t for t in tokens.all_tokens(conn) if t.kind == "ci"]
    assert [(r.from_branch, r.to_branch, r.via) for r in rows] == [("master", "main", "test")]
    assert len(entries) == 1 and entries[0]["subject"] == f"repository:{REPO}"
    assert entries[0]["details"]["baseline_runs_moved"] == 2
    assert ci.branches == ["master", "main"]

    # A PR against main is compared with the history recorded under master.
    pr = dict(event="pull_request", pr_number=3, branch="feature", base_branch="main")
    answer = upload(client.post, token, sha="c" * 40, seed=3, **pr)
    assert answer["baseline"]["branch"] == "main"
    assert answer["baseline"]["run_ids"] == [second["run_id"], first["run_id"]]
    # A CI job that started before the rename still names master: it lands on main.
    late = upload(client.post, token, branch="master", sha="d" * 40, seed=4)
    assert late["is_baseline"] and late["baseline"]["run_ids"][0] == second["run_id"]
    assert run_view(client.get, token, late["run_id"])["baseline_branch"] == "main"
    # And pushes to main become baselines with the token made for master.
    pushed = upload(client.post, token, branch="main", sha="e" * 40, seed=5)
    assert pushed["is_baseline"] and pushed["baseline"]["run_ids"][0] == late["run_id"]
    # A run of a PR opened against master, accepted now, becomes a baseline of main.
    r = client.post(
        f"/api/v1/runs/{open_pr['run_id']}/accept",
        json={"reason": "the new normal"},
        headers={"Authorization": f"Bearer {token.secret}"},
    )
    assert r.status_code == 200 and r.json()["baseline_branch"] == "main", r.text


def test_chains_and_renaming_back(client: Any, ci_token: Any, storage: Database) -> None:
    token: Token = ci_token(repository=REPO, branches=("master",))
    base = upload(client.post, token, branch="master", sha="a" * 40, seed=1)
    assert rename(storage, "master", "main").runs_moved == 1
    assert rename(storage, "main", "trunk").runs_moved == 1  # master -> main -> trunk
    assert not rename(storage, "master", "main").changed  # a late event of the first rename
    rid = repository_id(storage)
    with storage.read() as conn:
        assert [current_name(conn, rid, b) for b in ("master", "main")] == ["trunk"] * 2
    assert run_view(client.get, token, base["run_id"])["baseline_branch"] == "trunk"

    assert rename(storage, "trunk", "master").runs_moved == 1  # and back: a cycle
    with storage.read() as conn:
        names = [current_name(conn, rid, b) for b in ("master", "main", "trunk")]
    assert names == ["master"] * 3
    pr = dict(event="pull_request", pr_number=4, branch="f", base_branch="trunk", seed=2)
    assert upload(client.post, token, sha="b" * 40, **pr)["baseline"]["run_ids"] == [base["run_id"]]


def test_bad_renames_are_refused(storage: Database, ci_token: Any) -> None:
    ci_token(repository=REPO)
    rid = repository_id(storage)
    cases = [
        ("", "main", "the old branch name is empty"),
        ("master", "", "the new branch name is empty"),
        ("main", "main", "the same"),
        ("master", "ma in", "whitespace"),
        ("master", "x" * 256, "at most 255"),
    ]
    for old, new, message in cases:
        with storage.write() as conn, pytest.raises(GateServerError, match=message):
            rename_branch(conn, rid, old, new, actor="test", via="test")
    with storage.write() as conn, pytest.raises(GateServerError, match="no repository with id 999"):
        rename_branch(conn, 999, "master", "main", actor="test", via="test")
    with storage.read() as conn:
        assert conn.execute(branch_renames.select()).all() == []


def test_the_dashboard_history_follows_the_rename(
    client: Any, ci_token: Any, storage: Database
) -> None:
    token: Token = ci_token(repository=REPO, branches=("master",))
    base = upload(client.post, token, branch="master", sha="a" * 40, seed=1)
    blocked = upload(client.post, token, branch="master", sha="b" * 40, seed=2, slowdown=2.0)
    assert blocked["tier"] == "BLOCK" and not blocked["is_baseline"]
    rename(storage, "master", "main")
    pushed = upload(client.post, token, branch="main", sha="c" * 40, seed=3)
    rid = repository_id(storage)
    with storage.read() as conn:
        for asked in ("main", "master"):  # an old link to master shows the same history
            names = all_names(conn, rid, asked)
            history = [r.run_id for r, _ in dashboard.history(conn, rid, names)]
            assert history == [pushed["run_id"], blocked["run_id"], base["run_id"]], asked
        assert dashboard.baseline_branches(conn, rid) == ["main"]
        latest = latest_per_branch(conn, rid)
    assert [r.run_id for r in latest] == [pushed["run_id"]]  # one branch, not two


def test_migration_3_adds_the_rename_log_to_an_older_database(empty_database_url: str) -> None:
    build_v3_database(empty_database_url)
    s = Database(empty_database_url)
    try:
        with s.write() as conn:  # the database as version 2 left it
            conn.execute(text("DROP TABLE branch_renames"))
            conn.execute(text("DELETE FROM rnx_schema_migrations WHERE version = 3"))
        assert schema_version(s) == 2
        assert migrate(s) == LATEST_VERSION
        with s.read() as conn:
            assert conn.execute(branch_renames.select()).all() == []
    finally:
        s.close()


# ---- rnx branch rename, with the real server on loopback


def test_the_rename_command_moves_the_history_the_server_uses(
    shared_server: LiveServer, workspace: str, capsys: Any
) -> None:
    # The server is shared: a repository no other test names, so --repo alone finds it.
    url, repo = shared_server.database_url, f"acme/kernels-{workspace}"
    token = create_token(url, workspace=workspace, repository=repo, branches=("master",))
    with httpx.Client(base_url=shared_server.url, timeout=30) as http:
        base = upload(http.post, token, branch="master", sha="a" * 40, seed=1, repository=repo)
        argv = ["branch", "rename", "--repo", repo.upper(), "--from", "master", "--to", "main"]
        assert main([*argv, "--database-url", url]) == 0
        out = capsys.readouterr().out
        assert f"{repo}: master -> main: 1 baseline run now count for main" in out
        assert f"CI token {token.id} now also covers main" in out
        assert main([*argv, "--database-url", url]) == 0
        assert "was followed before; nothing changed" in capsys.readouterr().out

        pr = dict(event="pull_request", pr_number=5, branch="f", base_branch="main", seed=2)
        answer = upload(http.post, token, sha="b" * 40, repository=repo, **pr)
        assert answer["baseline"]["run_ids"] == [base["run_id"]]
        late = upload(http.post, token, branch="master", sha="c" * 40, seed=3, repository=repo)
        assert run_view(http.get, token, late["run_id"])["baseline_branch"] == "main"


def test_the_rename_command_refuses_bad_input_in_one_line(
    database_url: str, token_for: Any, capsys: Any
) -> None:
    token_for(database_url, workspace="acme", repository=REPO)
    token_for(database_url, workspace="other", repository="shared/repo")
    token_for(database_url, workspace="third", repository="shared/repo")
    url = ["--database-url", database_url]

    def rename_args(repo: str, old: str, new: str, *extra: str) -> list[str]:
        return ["branch", "rename", "--repo", repo, "--from", old, "--to", new, *extra, *url]

    cases = [
        (rename_args("acme/nothing", "master", "main"), "no repository 'acme/nothing'"),
        (rename_args(REPO, "main", "main"), "--from and --to are the same branch ('main')"),
        (rename_args(REPO, "", "main"), "--from is empty"),
        (rename_args(REPO, "master", "ma in"), "--to: 'ma in' is not a valid git branch name"),
        (rename_args("shared/repo", "master", "main"), "several workspaces (other, third)"),
        (rename_args(REPO, "master", "main", "--workspace", "other"), "in workspace 'other'"),
    ]
    for argv, expected in cases:
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert expected in err and err.count("\n") == 1, err
    assert main(rename_args("shared/repo", "master", "main", "--workspace", "third")) == 0
    assert "shared/repo: master -> main: 0 baseline runs" in capsys.readouterr().out


def test_an_upload_racing_a_rename_lands_on_the_new_name(
    shared_server: LiveServer, workspace: str
) -> None:
    """A rename holds its repository's lock until it commits: a baseline upload arriving
    meanwhile waits, then records the new name instead of one the rename just moved away."""
    url, repo = shared_server.database_url, f"acme/kernels-{workspace}"
    token = create_token(url, workspace=workspace, repository=repo, branches=("master",))
    with httpx.Client(base_url=shared_server.url, timeout=60) as http:
        upload(http.post, token, branch="master", sha="a" * 40, seed=1, repository=repo)
        s = Database(url)
        answers: list[dict[str, Any]] = []
        try:
            with s.read() as conn:
                (found,) = repositories.named(conn, repo)
            with s.write() as conn:
                rename_branch(conn, found.id, "master", "main", actor="test", via="test")
                racer = threading.Thread(
                    target=lambda: answers.append(
                        upload(
                            http.post, token, branch="master", sha="b" * 40, seed=2, repository=repo
                        )
                    )
                )
                racer.start()
                racer.join(timeout=1.5)
                assert racer.is_alive()  # waiting for the rename to commit
            racer.join(timeout=30)
        finally:
            s.close()
        (late,) = answers
        assert late["is_baseline"]
        assert run_view(http.get, token, late["run_id"])["baseline_branch"] == "main"
