"""Sticky comment and commit status against the fake GitHub API (recorded payload shapes)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import pytest

from action.publish import github_client, publish
from rnx.schema import ConfigComparison
from rnx_github.client import ACTIONS_BOT
from rnx_github.comment import COMMENT_MARKER, PartResult, combine, parse_parts
from testbed.factories import HOSTILE_REASON, HOSTILE_WORKLOAD, assert_inert
from testbed.fakes.fake_github import State, Token, serve

REPO, PR, SHA = "Codertocat/Hello-World", 2, "ec26c3e57ca3a959ca5aad62de7213c562f8c821"


def _cmp(verdict: str, ratio: float, status: str = "ok") -> ConfigComparison:
    return ConfigComparison(
        id="pytorch_eager/float32/bs1",
        runtime="pytorch_eager",
        dtype="float32",
        batch_size=1,
        status=status,  # type: ignore[arg-type]
        verdict=verdict,  # type: ignore[arg-type]
        base_median_ns=1_000_000,
        head_median_ns=1_000_000 * ratio,
        ratio=ratio,
        low=ratio * 0.97,
        high=ratio * 1.03,
        reason=None if status == "ok" else "max abs error 0.5 > atol 1e-05",
    )


def part(tier: str, *, env: str = "cpu", workload: str = "kernels/a.py", ratio: float = 1.0):
    verdict = {"PASS": "equivalent", "WARN": "undecided", "BLOCK": "slower"}[tier]
    return PartResult(
        workload=workload,
        job="gate",
        environment=env,
        tier=tier,  # type: ignore[arg-type]
        reasons=[] if tier == "PASS" else [f"{tier} because"],
        comparisons=[_cmp(verdict, ratio)],
        url="http://127.0.0.1/runs/1",
    )


@pytest.fixture
def github() -> Iterator[tuple[str, State]]:
    state = State()
    state.tokens["bot-token"] = Token(ACTIONS_BOT, is_app=True)
    state.tokens["fork-token"] = Token(ACTIONS_BOT, can_write=False, is_app=True)
    with serve(state) as (url, st):
        yield url, st


def _publish(url: str, token: str, parts: list[PartResult], sha: str = SHA):
    with github_client(url, token) as gh:
        return publish(
            gh,
            repository=REPO,
            pr=PR,
            sha=sha,
            status_sha=sha,
            parts=parts,
            mode="enforce",
            target_url="http://127.0.0.1/runs/1",
            sleep=lambda s: None,
        )


def test_sticky_comment_is_found_across_pages_and_updated_in_place(github) -> None:
    url, state = github
    state.seed_comments(REPO, PR, 130)  # our comment will sit on page 2
    first = _publish(url, "bot-token", [part("PASS")])
    assert not first.warnings
    state.seed_comments(REPO, PR, 90)
    # Someone quotes our marker in their own comment: it must never be picked up.
    state._add_comment(REPO, PR, COMMENT_MARKER + "\nquoted", "Codertocat")
    second = _publish(url, "bot-token", [part("BLOCK", ratio=2.0)], sha="f" * 40)
    assert not second.warnings
    ours = state.comment_bodies(REPO, PR, login=ACTIONS_BOT)
    assert len(ours) == 1 and second.comment_id == first.comment_id
    assert "rnx-benchmark: BLOCK" in ours[0] and "2.000×" in ours[0]
    assert "commit ffffffffffff" in ours[0]
    assert ("GET", f"/repos/{REPO}/issues/{PR}/comments", 200) in state.log
    pages = [e for e in state.log if e[0] == "GET" and e[1].endswith("/comments")]
    assert len(pages) >= 3  # paginated, not just the first 100
    statuses = state.statuses[(REPO, "f" * 40)]
    assert statuses[-1]["state"] == "failure" and statuses[-1]["context"] == "rnx-benchmark"


def test_matrix_parts_gather_in_one_comment_and_status_is_the_worst(github) -> None:
    url, state = github
    _publish(url, "bot-token", [part("PASS", env="cpu-a")])
    _publish(url, "bot-token", [part("BLOCK", env="cpu-b", ratio=2.0)])
    last = _publish(url, "bot-token", [part("WARN", env="cpu-c")])
    (body,) = state.comment_bodies(REPO, PR, login=ACTIONS_BOT)
    assert set(parse_parts(body)) == {
        "gate/cpu-a/kernels/a.py",
        "gate/cpu-b/kernels/a.py",
        "gate/cpu-c/kernels/a.py",
    }
    assert last.combined is not None and last.combined.tier == "BLOCK"
    assert "rnx-benchmark: BLOCK" in body and "3 part(s): 1 PASS, 1 WARN, 1 BLOCK" in body
    assert state.statuses[(REPO, SHA)][-1]["state"] == "failure"
    # The BLOCKing job re-runs after a fix: its section is replaced, the overall tier recomputed.
    _publish(url, "bot-token", [part("PASS", env="cpu-b")])
    (body,) = state.comment_bodies(REPO, PR, login=ACTIONS_BOT)
    assert "rnx-benchmark: WARN" in body
    assert state.statuses[(REPO, SHA)][-1]["state"] == "success"


def test_duplicate_comments_from_racing_jobs_are_folded_into_one(github) -> None:
    url, state = github
    a = combine([], [part("PASS", env="a")], sha=SHA).body
    b = combine([], [part("WARN", env="b")], sha=SHA).body
    state._add_comment(REPO, PR, a, ACTIONS_BOT)
    state._add_comment(REPO, PR, b, ACTIONS_BOT)
    _publish(url, "bot-token", [part("PASS", env="c")])
    (body,) = state.comment_bodies(REPO, PR, login=ACTIONS_BOT)
    assert set(parse_parts(body)) == {f"gate/{e}/kernels/a.py" for e in "abc"}


def test_read_only_token_of_a_fork_is_a_warning(github) -> None:
    url, state = github
    result = _publish(url, "fork-token", [part("BLOCK")])
    assert len(result.warnings) == 2
    assert "403" in result.warnings[0] and "forks" in result.warnings[0]
    assert "commit status" in result.warnings[1]
    assert state.comment_bodies(REPO, PR) == []


def test_markdown_and_html_from_a_results_document_are_posted_as_text(github) -> None:
    # The action's way of publishing; tests/github/test_app_mode.py checks the server's.
    url, state = github
    hostile = part("BLOCK", workload=HOSTILE_WORKLOAD)
    broken = _cmp("broken", 1.0, status="diverged").model_copy(update={"reason": HOSTILE_REASON})
    hostile = dataclasses.replace(hostile, reasons=[HOSTILE_REASON], comparisons=[broken])
    assert not _publish(url, "bot-token", [hostile]).warnings
    (body,) = state.comment_bodies(REPO, PR, login=ACTIONS_BOT)
    assert_inert(body)
