"""Whole numbers read from what a client sends (paths, queries, headers, cookies).

`str.isdigit()` is true for '¹' and other digits `int()` refuses (ValueError: a 500), and
`int()` refuses strings past 4,300 digits; so every such number is read here, as ASCII digits
of a bounded length, or not at all.
"""

from __future__ import annotations


def whole_number(text: str, *, digits: int = 18) -> int | None:
    """`text` as a non-negative int when it is 1..`digits` ASCII digits, else None."""
    if 0 < len(text) <= digits and text.isascii() and text.isdigit():
        return int(text)
    return None
