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


# Git's check-ref-format rules for one branch name, plus what `git branch` refuses (HEAD, a
# leading "-"), so a branch is never a path trick or an option.
_GIT_REFUSES = re.compile(
    r"(\.\.|[\x00-\x20\x7f~^:?*\[\\]|@\{|//|^/|/$|\.$|(^|/)\.|\.lock(/|$)|^-|^@$|^HEAD$)"
)
# Characters git allows but that make two different branches look alike on a page: C1
# controls, bidirectional controls and zero-width characters.
_LOOK_ALIKE = re.compile(
    "[\x80-\x9f\u00ad\u061c\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u206f\ufeff]"
)
MAX_BRANCH_CHARS = 255


def branch_name_problem(name: str) -> str | None:
    """Why `name` is not a branch name this project takes, or None when it is."""
    if not name:
        return "a branch name cannot be empty"
    if len(name) > MAX_BRANCH_CHARS:
        return f"a branch name has at most {MAX_BRANCH_CHARS} characters (got {len(name)})"
    if _GIT_REFUSES.search(name):
        return (
            f"{name!r} is not a valid git branch name (git check-ref-format: no whitespace, "
            "control characters, '..', '@{', '~^:?*[\\', leading '-' or '.', trailing '.' or "
            "'/', '.lock', 'HEAD' or '@')"
        )
    if _LOOK_ALIKE.search(name):
        return (
            f"{name!r} holds invisible or direction-changing characters (zero-width, bidi or "
            "C1 controls), which would show as a look-alike of another branch"
        )
    return None
