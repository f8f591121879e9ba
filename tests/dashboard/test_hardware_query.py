"""The /hardware page's query: what it keeps from the URL, and which picks it refuses."""

from __future__ import annotations

from urllib.parse import parse_qs

from starlette.datastructures import QueryParams

from gate_server.dashboard.hardware import HardwareQuery, _problem


def test_query_round_trips_through_its_link() -> None:
    q = HardwareQuery.from_params(
        QueryParams("repo=a/b&branch=main&workload=k/x.py&env=e1&env=e2&env=e1&baseline=e2")
    )
    assert q.environments == ("e1", "e2")  # a repeated environment counts once
    assert parse_qs(q.link()[1:]) == {
        "repo": ["a/b"],
        "branch": ["main"],
        "workload": ["k/x.py"],
        "env": ["e1", "e2"],
        "baseline": ["e2"],
    }
    assert HardwareQuery.from_params(QueryParams(q.link()[1:])) == q


def test_picks_it_refuses() -> None:
    offered = {f"e{i}" for i in range(10)}

    def problem(envs: list[str], baseline: str | None = None) -> str | None:
        query = "&".join(f"env={e}" for e in envs) + (f"&baseline={baseline}" if baseline else "")
        return _problem(HardwareQuery.from_params(QueryParams(query)), offered)

    assert problem([]) is None  # nothing picked yet: the page offers the pick
    assert problem(["e0", "e1"]) is None
    assert problem([f"e{i}" for i in range(6)], "e5") is None
    assert problem(["e0"]) == "Pick 2 to 6 environments (1 picked)."
    assert problem([f"e{i}" for i in range(9)]) == "Pick 2 to 6 environments (more picked)."
    assert problem(["e0", "x"]) == "No baseline of this workload in x; pick from the list."
    assert problem(["e0", "e1"], "e2") == "The baseline must be one of the environments picked."
