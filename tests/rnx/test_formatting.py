"""The one set of formatters: times, ratios and percentages read the same everywhere."""

from __future__ import annotations

import pytest

from rnx.formatting import (
    MISSING,
    format_ns,
    format_percent,
    format_probability,
    format_ratio,
    format_ratio_interval,
)


@pytest.mark.parametrize(
    ("ns", "text"),
    [
        (None, "–"),
        (float("nan"), "–"),
        (float("inf"), "–"),
        (512, "512 ns"),
        (950, "950 ns"),
        (12_345, "12.3 µs"),
        (35_400, "35.4 µs"),
        (1_234_567, "1.23 ms"),
        (2.5e6, "2.5 ms"),
        (4_560_000, "4.56 ms"),
        (2.5e9, "2.5 s"),
        (3e9, "3 s"),
        # Rounding up to the next unit reads in that unit, never as an exponent.
        (999_700_000, "1 s"),
        (12_345e9, "12345 s"),
    ],
)
def test_times_are_in_the_unit_a_person_would_say(ns: float | None, text: str) -> None:
    assert format_ns(ns) == text


def test_ratios_with_and_without_their_interval() -> None:
    assert format_ratio(1.0104) == "1.010×"
    assert format_ratio_interval(1.01, 0.99, 1.03) == "1.010× (0.990–1.030)"
    assert format_ratio_interval(1.01, None, 1.03) == "1.010×"
    assert format_ratio_interval(None, 0.99, 1.03) == MISSING
    assert format_ratio(float("nan")) == MISSING


def test_percentages_and_probabilities() -> None:
    assert format_probability(0.9534) == "0.953" and format_probability(None) == MISSING
    assert format_percent(0.25) == "25%"
    assert format_percent(0.9534, digits=1) == "95.3%"
    assert format_percent(None) == MISSING
