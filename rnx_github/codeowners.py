"""CODEOWNERS: where GitHub looks for it, its gitignore-style patterns, and who owns a path."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

# GitHub's own search order: the first file found is the only one used.
CODEOWNERS_LOCATIONS: tuple[str, ...] = (".github/CODEOWNERS", "CODEOWNERS", "docs/CODEOWNERS")


@dataclass(frozen=True)
class Rule:
    pattern: str
    owners: tuple[str, ...]  # "@user", "@org/team" or an e-mail address; empty = nobody owns it
    regex: re.Pattern[str]
    line: int


def parse_codeowners(text: str) -> list[Rule]:
    """Rules in file order. Lines GitHub would reject (negation, character ranges) are skipped."""
    rules: list[Rule] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = _strip_comment(raw).strip()
        if not line:
            continue
        pattern, *owners = line.split()
        # GitHub does not support "!" or "[...]" in CODEOWNERS and ignores such lines.
        if pattern.startswith("!") or "[" in pattern or "]" in pattern:
            continue
        rules.append(Rule(pattern, tuple(owners), _compile(pattern), number))
    return rules


def owners_of(rules: Sequence[Rule], path: str) -> tuple[str, ...] | None:
    """Owners of `path` (relative to the repository root): the last matching rule wins.

    None when no rule matches; an empty tuple when the last matching rule names no owner.
    """
    path = path.lstrip("/")
    if path.startswith("./"):
        path = path[2:]
    found: tuple[str, ...] | None = None
    for rule in rules:
        if rule.regex.match(path):
            found = rule.owners
    return found


def _strip_comment(line: str) -> str:
    # "#" starts a comment unless escaped ("\#" is a literal #, allowed in a pattern).
    out, i = [], 0
    while i < len(line):
        ch = line[i]
        if ch == "\\" and i + 1 < len(line) and line[i + 1] == "#":
            out.append("#")
            i += 2
            continue
        if ch == "#":
            break
        out.append(ch)
        i += 1
    return "".join(out)


def _compile(pattern: str) -> re.Pattern[str]:
    directory_only = pattern.endswith("/")
    body = pattern.strip("/")
    # gitignore: a slash at the start or in the middle anchors the pattern at the root;
    # otherwise it matches at any depth.
    anchored = pattern.startswith("/") or "/" in body
    prefix = "^" if anchored else "^(?:.*/)?"
    if directory_only:
        suffix = "/.*$"
    elif body == "*" or body.endswith("/*"):
        # GitHub: "docs/*" owns docs/a.md but not docs/sub/b.md.
        suffix = "$" if body != "*" else "(?:/.*)?$"
    else:
        # A name that matches a directory owns everything below it.
        suffix = "(?:/.*)?$"
    return re.compile(prefix + _translate(body) + suffix)


def _translate(body: str) -> str:
    out, i = [], 0
    while i < len(body):
        if body.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif body.startswith("/**", i) and i + 3 == len(body):
            out.append("/.*")
            i += 3
        elif body.startswith("**", i):
            out.append(".*")
            i += 2
        elif body[i] == "*":
            out.append("[^/]*")
            i += 1
        elif body[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(body[i]))
            i += 1
    return "".join(out)
