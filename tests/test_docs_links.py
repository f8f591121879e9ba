"""Every relative link in the docs reaches a file, and every `#anchor` a heading there.

Reference pages link to dated entries of docs/results.md; when a section moves between pages
or an entry is renamed, a link that still names the old place is caught here. Anchors are
GitHub's: a heading lowercased, everything but letters, digits, `_`, `-` and spaces dropped,
spaces made hyphens, and `-1`, `-2`, ... added to a repeated one."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted((ROOT / "docs").glob("*.md")) + [
    ROOT / "README.md",
    ROOT / "benchmarks" / "README.md",
    ROOT / "experiments" / "README.md",
]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def anchor(heading: str) -> str:
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """The anchors GitHub gives the page's headings (none inside fenced code)."""
    found: set[str] = set()
    seen: dict[str, int] = {}
    in_code = False
    for line in page.read_text().splitlines():
        if line.startswith("```"):
            in_code = not in_code
            continue
        heading = re.match(r"#{1,6} (.*)", line)
        if heading and not in_code:
            slug = anchor(heading.group(1))
            count = seen.get(slug, 0)
            seen[slug] = count + 1
            found.add(slug if count == 0 else f"{slug}-{count}")
    return found


def test_github_anchors_as_the_docs_spell_them() -> None:
    assert anchor("The cost of `synchronous=FULL` (SQLite)") == "the-cost-of-synchronousfull-sqlite"
    assert anchor("Where things are in gate_server/") == "where-things-are-in-gate_server"
    assert anchor("kill -9 mid-burst (sqlite)") == "kill--9-mid-burst-sqlite"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_reaches_its_file_and_heading(page: Path) -> None:
    broken = []
    for target in LINK.findall(page.read_text()):
        if re.match(r"[a-z]+:", target):  # http:, https:, mailto: are not ours to check
            continue
        path, _, fragment = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        if not linked.exists():
            broken.append(f"{target}: no such file")
        elif fragment and linked.suffix == ".md" and fragment not in anchors(linked):
            broken.append(f"{target}: no heading with that anchor")
    assert not broken, f"{page.relative_to(ROOT)}:\n" + "\n".join(broken)
