"""Re-gating gives the verdicts it gave before it was made faster (regate_cases.py)."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from testbed.regate_cases import GOLDEN, outputs


def _mismatches(expected: Any, actual: Any, where: str = "") -> list[str]:
    """Where actual differs from expected: strings, ints and lists exactly, floats to 1e-9."""
    if isinstance(expected, dict) and isinstance(actual, dict):
        if expected.keys() != actual.keys():
            return [f"{where}: keys {sorted(expected)} != {sorted(actual)}"]
        return [m for k in expected for m in _mismatches(expected[k], actual[k], f"{where}.{k}")]
    if isinstance(expected, list) and isinstance(actual, list):
        if len(expected) != len(actual):
            return [f"{where}: {len(expected)} items != {len(actual)}"]
        return [
            m
            for i, (e, a) in enumerate(zip(expected, actual, strict=True))
            for m in _mismatches(e, a, f"{where}[{i}]")
        ]
    if isinstance(expected, float) and isinstance(actual, (int, float)):
        ok = math.isclose(expected, actual, rel_tol=1e-9, abs_tol=1e-12)
        return [] if ok else [f"{where}: {expected!r} != {actual!r}"]
    return [] if expected == actual else [f"{where}: {expected!r} != {actual!r}"]


@pytest.fixture(scope="module")
def now() -> dict[str, Any]:
    return outputs()


@pytest.fixture(scope="module")
def recorded() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(GOLDEN.read_text())
    return data


def test_every_case_is_recorded(now: dict[str, Any], recorded: dict[str, Any]) -> None:
    assert {k: sorted(v) for k, v in now.items()} == {k: sorted(v) for k, v in recorded.items()}


@pytest.mark.parametrize("kind", ["evaluate", "compare"])
def test_outputs_match_the_recording(
    kind: str, now: dict[str, Any], recorded: dict[str, Any]
) -> None:
    assert _mismatches(recorded[kind], now[kind], kind) == []


def test_the_comparison_notices_a_changed_ratio(recorded: dict[str, Any]) -> None:
    changed = json.loads(json.dumps(recorded["compare"]))
    changed["groups"][1]["ratio"] *= 1 + 1e-6
    changed["runs"][0]["verdict"] = "slower"
    assert len(_mismatches(recorded["compare"], changed)) == 2
