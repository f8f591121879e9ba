"""One baseline per workload (issue 11, section 1), on SQLite and PostgreSQL: runs of different
workloads are never compared, an accept moves only its own workload's baseline, a branch
rename keeps each workload's baseline its own, and a body holding several workloads is refused.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from starlette.testclient import TestClient

from gate_server.db import Database
from gate_server.domain.branches import rename_branch
from testbed.factories import body, make_results
from testbed.gate_helpers import Token

UPLOAD = "/api/v1/runs"
ATTENTION = "kernels/attention.py"
OTHER = "kernels/other.py"


def upload(client: TestClient, token: Token, sign: Any, **doc: Any) -> dict[str, Any]:
    data = body(make_results(**doc))
    r = client.post(UPLOAD, content=data, headers=sign(token.secret, data))
    assert r.status_code == 201, r.text
    answer: dict[str, Any] = r.json()
    return answer


def pr(number: int, workload: str, **doc: Any) -> dict[str, Any]:
    """A pull request's run of `workload`, against main."""
    return {
        "event": "pull_request",
        "pr_number": number,
        "branch": f"feature/{number}",
        "workload": workload,
        **doc,
    }


def accept(client: TestClient, token: Token, run_id: str, reason: str) -> dict[str, Any]:
    r = client.post(
        f"/api/v1/runs/{run_id}/accept",
        json={"reason": reason},
        headers={"Authorization": f"Bearer {token.secret}"},
    )
    assert r.status_code == 200, r.text
    answer: dict[str, Any] = r.json()
    return answer


@pytest.fixture
def two_workloads(client: TestClient, ci_token: Any, sign: Any) -> tuple[Token, dict[str, Any]]:
    """The issue's reproduction: kernels/attention.py pushed to main, then kernels/other.py, a
    different kernel twice as slow, pushed to main."""
    token = ci_token()
    first = upload(client, token, sign, workload=ATTENTION, seed=1)
    assert first["is_baseline"] and first["baseline"] is None
    second = upload(client, token, sign, workload=OTHER, seed=2, slowdown=2.0)
    return token, {"attention": first, "other": second}


def test_a_second_workload_gets_its_own_baseline_and_is_never_compared_with_the_first(
    client: TestClient, two_workloads: tuple[Token, dict[str, Any]], sign: Any
) -> None:
    token, pushed = two_workloads
    other = pushed["other"]
    # Not "96% slower" than attention.py: WARN for want of its own baseline, and it becomes one.
    assert other["tier"] == "WARN", other["reasons"]
    assert other["reasons"] == ["no baseline yet for this workload in this environment"]
    assert other["baseline"] is None and other["is_baseline"] is True
    assert {c["verdict"] for c in other["comparisons"]} == {"no-baseline"}

    # A later pull request of each workload is compared with its own baseline only.
    a = upload(client, token, sign, **pr(1, ATTENTION, seed=3))
    assert a["tier"] == "PASS", a["reasons"]
    assert a["baseline"]["run_ids"] == [pushed["attention"]["run_id"]]
    assert a["baseline"]["workload"] == ATTENTION
    b = upload(client, token, sign, **pr(2, OTHER, seed=4, slowdown=2.0))
    assert b["tier"] == "PASS", b["reasons"]
    assert b["baseline"]["run_ids"] == [other["run_id"]]
    assert b["baseline"] == {
        "branch": "main",
        "environment": "linux-x86_64-cpu-test",
        "workload": OTHER,
        "run_ids": [other["run_id"]],
        "shas": [make_results(workload=OTHER, seed=2).git.sha],
    }
    # And it is a comparison: other.py twice as slow again against its own baseline BLOCKs.
    slower = upload(client, token, sign, **pr(3, OTHER, seed=5, slowdown=4.0))
    assert slower["tier"] == "BLOCK", slower["reasons"]
    view = client.get(
        f"/api/v1/runs/{slower['run_id']}", headers={"Authorization": f"Bearer {token.secret}"}
    ).json()
    assert view["workload"] == OTHER


@pytest.mark.parametrize("spelled", ["./kernels/attention.py", "kernels//./attention.py"])
def test_the_workload_is_its_normalised_path(
    client: TestClient, two_workloads: tuple[Token, dict[str, Any]], sign: Any, spelled: str
) -> None:
    token, pushed = two_workloads
    found = upload(client, token, sign, **pr(4, spelled, seed=6))
    assert found["baseline"]["workload"] == ATTENTION
    assert found["baseline"]["run_ids"] == [pushed["attention"]["run_id"]]
    backslashes = upload(client, token, sign, **pr(5, "kernels\\attention.py", seed=7))
    assert backslashes["baseline"]["run_ids"] == [pushed["attention"]["run_id"]]


@pytest.mark.parametrize(
    ("path", "says"),
    [
        ("/home/runner/work/k/kernels/attention.py", "absolute"),
        ("C:\\work\\kernels\\attention.py", "absolute"),
        ("kernels/../attention.py", "'..'"),
        ("../other-repo/kernel.py", "'..'"),
        ("./", "names no file"),
        ("kernels/\x7fattention.py", "control characters"),
        ("kernels/" + "é" * 600 + ".py", "at most 1000"),
    ],
)
def test_a_workload_path_outside_the_repository_is_refused(
    client: TestClient, ci_token: Any, sign: Any, storage: Database, path: str, says: str
) -> None:
    token = ci_token()
    data = body(make_results(workload=path))
    r = client.post(UPLOAD, content=data, headers=sign(token.secret, data))
    assert r.status_code == 422, r.text
    error = r.json()["error"]
    assert error["code"] == "invalid_workload_path" and says in error["message"]
    assert error["details"][0]["field"] == "workload.path"
    with storage.read() as conn:
        from gate_server.db import runs

        assert runs.count(conn) == 0


def _several(kind: str) -> bytes:
    one = json.loads(body(make_results(workload=ATTENTION, seed=1)))
    two = json.loads(body(make_results(workload=OTHER, seed=2)))
    if kind == "array":
        return json.dumps([one, two]).encode()
    if kind == "workloads-list":
        return json.dumps({**one, "workloads": [one["workload"], two["workload"]]}).encode()
    return json.dumps({**one, "workload": [one["workload"], two["workload"]]}).encode()


@pytest.mark.parametrize("kind", ["array", "workloads-list", "workload-list"])
def test_a_body_with_several_workloads_is_refused(
    client: TestClient, ci_token: Any, sign: Any, kind: str
) -> None:
    token = ci_token()
    data = _several(kind)
    r = client.post(UPLOAD, content=data, headers=sign(token.secret, data))
    assert r.status_code == 422, r.text
    error = r.json()["error"]
    assert error["code"] == "several_workloads"
    assert "upload one results document per workload" in error["message"]


def test_accepting_one_workloads_run_never_moves_anothers_baseline(
    client: TestClient, two_workloads: tuple[Token, dict[str, Any]], sign: Any
) -> None:
    token, pushed = two_workloads
    slow = upload(client, token, sign, **pr(6, ATTENTION, seed=8, slowdown=3.0))
    assert slow["tier"] == "BLOCK"
    accepted = accept(client, token, slow["run_id"], "new tiling, slower by design")
    assert (accepted["workload"], accepted["baseline_branch"]) == (ATTENTION, "main")

    # attention.py's baseline moved to the accepted run ...
    a = upload(client, token, sign, **pr(7, ATTENTION, seed=9, slowdown=3.0))
    assert a["baseline"]["run_ids"] == [slow["run_id"]] and a["tier"] != "BLOCK"
    # ... and other.py's did not: the same 3x slowdown of it BLOCKs against its own baseline.
    b = upload(client, token, sign, **pr(8, OTHER, seed=10, slowdown=2.0 * 3.0))
    assert b["baseline"]["run_ids"] == [pushed["other"]["run_id"]]
    assert b["tier"] == "BLOCK", b["reasons"]


def test_the_pull_request_accept_api_moves_only_its_runs_workloads(
    client: TestClient, two_workloads: tuple[Token, dict[str, Any]], sign: Any
) -> None:
    token, pushed = two_workloads
    slow = upload(client, token, sign, **pr(9, OTHER, seed=11, slowdown=2.0 * 3.0))
    auth = {"Authorization": f"Bearer {token.secret}"}
    listed = client.get("/api/v1/pulls/9/runs", headers=auth).json()["runs"]
    assert [(r["run_id"], r["workload"]) for r in listed] == [(slow["run_id"], OTHER)]
    r = client.post(
        "/api/v1/pulls/9/accept",
        json={"reason": "slower by design", "user": "alice", "run_ids": [slow["run_id"]]},
        headers=auth,
    )
    assert r.status_code == 200, r.text
    assert [a["workload"] for a in r.json()["accepted"]] == [OTHER]
    a = upload(client, token, sign, **pr(10, ATTENTION, seed=12))
    assert a["baseline"]["run_ids"] == [pushed["attention"]["run_id"]]
    b = upload(client, token, sign, **pr(11, OTHER, seed=13, slowdown=2.0 * 3.0))
    assert b["baseline"]["run_ids"] == [slow["run_id"]]


def test_a_branch_rename_keeps_each_workloads_baseline_its_own(
    client: TestClient, two_workloads: tuple[Token, dict[str, Any]], sign: Any, storage: Database
) -> None:
    token, pushed = two_workloads
    with storage.write() as conn:
        moved = rename_branch(conn, 1, "main", "trunk", actor="cli:test", via="cli")
    assert moved.runs_moved == 2  # one baseline run of each workload
    for number, workload, key in ((12, ATTENTION, "attention"), (13, OTHER, "other")):
        slowdown = 2.0 if workload == OTHER else 1.0
        found = upload(
            client,
            token,
            sign,
            **pr(number, workload, seed=number, slowdown=slowdown),
        )
        assert found["baseline"]["branch"] == "trunk"
        assert found["baseline"]["run_ids"] == [pushed[key]["run_id"]], workload
        assert found["tier"] == "PASS", found["reasons"]
