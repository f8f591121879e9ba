"""A fragment id on the dashboard's pages (a workload's section, a configuration's chart): one
rule for the page that draws it (gate_server/dashboard/) and the alert that links to it
(gate_server/domain/alerts/events.py)."""

from __future__ import annotations

import re


def anchor(text: str, taken: set[str]) -> str:
    """`text` as a fragment id not in `taken` (then added to it): letters, digits, `-` and `_`
    kept, anything else `-`, and a number appended when two texts read the same."""
    base = re.sub(r"[^A-Za-z0-9_-]", "-", text).strip("-") or "workload"
    found, n = base, 1
    while found in taken:
        n += 1
        found = f"{base}-{n}"
    taken.add(found)
    return found
