"""Parsing "/kernalin accept <reason>" and the accept rules both ways share."""

from __future__ import annotations

import pytest

from rnx_github.accept_rules import (
    AcceptCommand,
    Decision,
    MalformedCommand,
    decide_accept,
    parse_comment,
    pull_request_comment,
)
from tests.github.payloads import load_payload, make_pr_comment


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ("/kernalin accept more accurate softmax", "more accurate softmax"),
        (
            "  /Kernalin   ACCEPT   fp64 accumulation,  on purpose  ",
            "fp64 accumulation, on purpose",
        ),
        (
            "Thanks for the review!\n\n/kernalin accept new feature costs 5%\nmore text",
            "new feature costs 5%",
        ),
    ],
)
def test_accept_with_reason(body: str, reason: str) -> None:
    assert parse_comment(body) == AcceptCommand(reason)


@pytest.mark.parametrize(
    ("body", "problem_part"),
    [
        ("/kernalin accept", "a reason is required"),
        ("/kernalin accept    ", "a reason is required"),
        ("/kernalin", "a command is missing"),
        ("/kernalin rerun please", "unknown command `rerun`"),
        ("/kernalin accept " + "x" * 600, "keep it under 500"),
    ],
)
def test_malformed_commands_say_why(body: str, problem_part: str) -> None:
    cmd = parse_comment(body)
    assert isinstance(cmd, MalformedCommand)
    assert problem_part in cmd.problem
    assert "/kernalin accept <reason>" in cmd.problem or "500" in cmd.problem


@pytest.mark.parametrize(
    "body",
    [
        None,
        "",
        "LGTM",
        "You are totally right! I'll get this fixed right away.",
        "> /kernalin accept quoted from someone else",
        "```\n/kernalin accept an example in a code block\n```",
        "please run /kernalin accept later",  # not at the start of a line
        "/kernalinx accept nope",
        "/deploy now",
    ],
)
def test_other_text_is_not_a_command(body: str | None) -> None:
    assert parse_comment(body) is None


def test_pull_request_comment_from_real_payloads() -> None:
    pr_comment = make_pr_comment
    issue_comment = load_payload("issue_comment.created")
    assert pull_request_comment("issue_comment", issue_comment) is None  # a comment on an issue
    payload = pr_comment("/kernalin accept ok", user="alice", number=7, installation_id=42)
    c = pull_request_comment("issue_comment", payload)
    assert c is not None
    assert (c.repository, c.repository_id, c.pr_number, c.user, c.installation_id) == (
        "Codertocat/Hello-World",
        186853002,
        7,
        "alice",
        42,
    )
    assert pull_request_comment("issue_comment", pr_comment("x", action="edited")) is None
    assert pull_request_comment("issue_comment", pr_comment("x", action="deleted")) is None
    assert pull_request_comment("pull_request", payload) is None


class MemoryGitHub:
    """The three answers the rules need, as GitHub would give them."""

    def __init__(
        self,
        permissions: dict[str, str] | None = None,
        files: dict[tuple[str, str], str] | None = None,
        teams: dict[str, set[str]] | None = None,
    ) -> None:
        self.permissions = permissions or {}
        self.files = files or {}
        self.teams = teams or {}
        self.asked_files: list[str] = []

    def collaborator_permission(self, repository: str, user: str) -> str:
        return self.permissions.get(user, "none")

    def file_text(self, repository: str, path: str, ref: str) -> str | None:
        self.asked_files.append(f"{ref}:{path}")
        return self.files.get((ref, path))

    def is_team_member(self, org: str, team_slug: str, user: str) -> bool:
        return user in self.teams.get(f"{org}/{team_slug}", set())


REPO = "Codertocat/Hello-World"


def _decide(gh: MemoryGitHub, user: str, workloads: list[str]) -> Decision:
    """May `user` accept runs of `workloads` in REPO, whose pull request targets main?"""
    return decide_accept(gh, repository=REPO, base_ref="main", user=user, workloads=workloads)


@pytest.mark.parametrize("permission", ["admin", "maintain", "write"])
def test_write_permission_may_accept(permission: str) -> None:
    gh = MemoryGitHub(permissions={"alice": permission})
    d = _decide(gh, "alice", ["k.py"])
    assert d.allowed and permission in d.why
    assert gh.asked_files == []  # no need to read CODEOWNERS


@pytest.mark.parametrize("permission", ["read", "triage", "none"])
def test_read_permission_without_ownership_may_not(permission: str) -> None:
    gh = MemoryGitHub(permissions={"bob": permission})
    d = _decide(gh, "bob", ["k.py"])
    assert not d.allowed
    assert "no CODEOWNERS file on main" in d.why


def test_codeowners_from_base_branch_in_githubs_order() -> None:
    gh = MemoryGitHub(
        files={
            ("main", "CODEOWNERS"): "kernels/ @carol\n",
            ("main", "docs/CODEOWNERS"): "* @dave\n",
            ("feature", ".github/CODEOWNERS"): "* @bob\n",  # the PR's branch never counts
        }
    )
    allowed = _decide(gh, "carol", ["kernels/attention.py"])
    assert allowed.allowed and "CODEOWNERS" in allowed.why
    assert gh.asked_files[:2] == ["main:.github/CODEOWNERS", "main:CODEOWNERS"]
    assert not _decide(gh, "dave", ["kernels/attention.py"]).allowed
    assert not _decide(gh, "bob", ["kernels/attention.py"]).allowed


def test_owner_must_own_every_workload_and_teams_count() -> None:
    gh = MemoryGitHub(
        files={
            ("main", ".github/CODEOWNERS"): "kernels/ @octo-org/kernels\nkernels/secret.py @eve\n"
        },
        teams={"octo-org/kernels": {"frank"}},
    )
    ok = _decide(gh, "frank", ["kernels/a.py", "kernels/b.py"])
    assert ok.allowed
    denied = _decide(gh, "frank", ["kernels/a.py", "kernels/secret.py"])
    assert not denied.allowed and "kernels/secret.py" in denied.why


def test_login_match_is_case_insensitive_and_emails_never_match() -> None:
    gh = MemoryGitHub(files={("main", "CODEOWNERS"): "* @Alice alice@example.com\n"})
    assert _decide(gh, "alice", ["x.py"]).allowed
    gh = MemoryGitHub(files={("main", "CODEOWNERS"): "* alice@example.com\n"})
    assert not _decide(gh, "alice", ["x.py"]).allowed


def test_no_workloads_needs_write_permission() -> None:
    gh = MemoryGitHub(files={("main", "CODEOWNERS"): "* @alice\n"})
    d = _decide(gh, "alice", [])
    assert not d.allowed and "write permission" in d.why


def test_control_characters_in_a_reason_get_a_reply_not_an_accept() -> None:
    """The server cannot store a NUL (PostgreSQL) and the others only hide text."""
    for reason in ("why\x00not", "bell\x07", "esc\x1b[31m"):
        command = parse_comment(f"/kernalin accept {reason}")
        assert isinstance(command, MalformedCommand), reason
        assert "control characters" in command.problem
    assert parse_comment("/kernalin accept tabs\tare fine") == AcceptCommand("tabs are fine")
