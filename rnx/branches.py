"""Branch patterns, as CI tokens and kernalin.yml's gate.baseline-branches write them.

Like GitHub's branch filters: `*` stays within one path segment (release/* is release/1.2,
not release/1.2/fix), `**` crosses segments, anything else is literal.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache

# Letters, digits, . _ - + / and * only: a pattern is never a regular expression.
BRANCH_PATTERN = re.compile(r"^[A-Za-z0-9_.*/+-]{1,255}$")


@lru_cache(maxsize=256)
def _pattern_regex(pattern: str) -> re.Pattern[str]:
    parts = re.split(r"(\*\*|\*)", pattern)
    body = "".join(".*" if p == "**" else "[^/]*" if p == "*" else re.escape(p) for p in parts)
    return re.compile(f"^{body}$")


def branch_matches(patterns: Sequence[str], branch: str) -> bool:
    return any(_pattern_regex(p).match(branch) for p in patterns)
