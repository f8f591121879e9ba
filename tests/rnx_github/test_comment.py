"""The sticky PR comment's text (rnx_github/comment.py): an acceptance marked on the report."""

from __future__ import annotations

from rnx_github.comment import COMMENT_MARKER, mark_accepted


def test_mark_accepted_keeps_the_report_and_replaces_an_earlier_acceptance() -> None:
    body = f"{COMMENT_MARKER}\n## ❌ rnx-benchmark: BLOCK\ncommit abc · 1 part(s)\n\n| table |\n"
    once = mark_accepted(body, "alice", "first", "abc")
    twice = mark_accepted(once, "carol", "second", "abc")
    assert twice.count("**Accepted**") == 1 and "@carol: second" in twice and "| table |" in twice
    assert mark_accepted(None, "alice", "why", "abcdef1234567890").startswith(COMMENT_MARKER)
