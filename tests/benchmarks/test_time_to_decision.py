"""benchmarks/quality/time_to_decision.py's pure helpers: policies, their rounds, the table's
marks."""

from __future__ import annotations

from bench_runner.adaptive_rule import MAX_ADDED_PROCESSES
from benchmarks.quality.time_to_decision import (
    Policy,
    marks,
    parse_policy,
    policy_rounds,
    reference,
)


def test_policies_parse_as_fixed_adaptive_or_the_rule_before_issue_13() -> None:
    assert parse_policy("3x10") == Policy(3, 10)
    assert parse_policy("a3x10") == Policy(3, 10, MAX_ADDED_PROCESSES)
    assert parse_policy("o3x10") == Policy(3, 10, old_rule=True)
    assert parse_policy("o3x10").name == "today's: fixed 3 x 10, rule before issue 13"
    # The `*` marks compare with the first policy of the new rule, not today's.
    assert reference([parse_policy("o3x10"), parse_policy("3x5")]) == Policy(3, 5)


def test_a_policy_of_more_rounds_than_the_chunk_moves_back_to_fit_the_recording() -> None:
    assert policy_rounds(Policy(3, 5), 10, 30) == (10, 15)
    assert policy_rounds(Policy(2, 15), 10, 30) == (10, 25)
    assert policy_rounds(Policy(2, 15), 20, 30) == (15, 30)
    assert policy_rounds(Policy(2, 15), 10, 24) == (9, 24)


def test_marks_say_worse_than_the_reference_and_better_than_today() -> None:
    # Rates higher is better (40% BLOCK): 60 of 100 against 80 is worse beyond sampling error.
    assert marks(60, 80, None, 100, True) == "*"
    assert marks(95, 93, 60, 100, True) == "+"
    assert marks(60, 80, 40, 100, True) == "*+"
    assert marks(80, 80, 80, 100, True) == ""
    # Lower is better (A/A BLOCK): 10 of 100 against none is worse; none against 10 better.
    assert marks(10, 0, None, 100, False) == "*"
    assert marks(0, 0, 10, 100, False) == "+"
