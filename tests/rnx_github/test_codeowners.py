"""CODEOWNERS patterns: GitHub's documented examples, and the last matching rule wins."""

from __future__ import annotations

import pytest

from rnx_github.codeowners import owners_of, parse_codeowners

# The example file from GitHub's documentation ("About code owners"), abridged.
GITHUB_EXAMPLE = r"""
# These owners will be the default owners for everything in the repo.
*       @global-owner1 @global-owner2

*.js    @js-owner #This is an inline comment.
*.go docs@example.com
*.txt @octo-org/octocats
/build/logs/ @doctocat
docs/*  docs@example.com
apps/ @octocat
/docs/ @doctocat
/scripts/ @doctocat @octocat
**/logs @octocat
/apps/ @octocat
/apps/github
\#notes.md @hash-owner
!negated.py @nobody
[abc].py @nobody
"""


@pytest.mark.parametrize(
    ("path", "owners"),
    [
        ("README.md", ("@global-owner1", "@global-owner2")),
        ("src/app.js", ("@js-owner",)),
        ("deep/er/main.go", ("docs@example.com",)),
        ("notes/a.txt", ("@octo-org/octocats",)),
        ("build/logs/today.log", ("@octocat",)),  # **/logs comes after /build/logs/
        ("build/logs/x/y.txt", ("@octocat",)),
        ("docs/getting-started.md", ("@doctocat",)),  # /docs/ comes after docs/*
        ("web/apps/main.py", ("@octocat",)),  # apps/ at any depth
        ("apps/github/x.py", ()),  # a rule with no owner: nobody owns it
        ("apps/other.py", ("@octocat",)),
        ("scripts/run.sh", ("@doctocat", "@octocat")),
        ("deeply/nested/logs/a.py", ("@octocat",)),
        ("#notes.md", ("@hash-owner",)),
        ("negated.py", ("@global-owner1", "@global-owner2")),  # "!" lines are ignored
        ("a.py", ("@global-owner1", "@global-owner2")),  # "[...]" lines are ignored
    ],
)
def test_github_documented_examples(path: str, owners: tuple[str, ...]) -> None:
    assert owners_of(parse_codeowners(GITHUB_EXAMPLE), path) == owners


def test_docs_star_does_not_own_nested_files() -> None:
    rules = parse_codeowners("docs/* @a\n")
    assert owners_of(rules, "docs/getting-started.md") == ("@a",)
    assert owners_of(rules, "docs/build-app/troubleshooting.md") is None
    assert owners_of(rules, "other/docs/x.md") is None  # a middle slash anchors at the root


def test_unanchored_name_matches_file_or_directory_at_any_depth() -> None:
    rules = parse_codeowners("kernels @k\n")
    assert owners_of(rules, "kernels/attention.py") == ("@k",)
    assert owners_of(rules, "a/b/kernels/attention.py") == ("@k",)
    assert owners_of(rules, "kernels") == ("@k",)
    assert owners_of(rules, "kernelsx/attention.py") is None


def test_double_star_in_the_middle_and_at_the_end() -> None:
    rules = parse_codeowners("a/**/b.py @mid\nlib/** @tail\n")
    assert owners_of(rules, "a/b.py") == ("@mid",)
    assert owners_of(rules, "a/x/y/b.py") == ("@mid",)
    assert owners_of(rules, "lib/x/y.py") == ("@tail",)
    assert owners_of(rules, "src/lib/y.py") is None


def test_last_match_wins_and_paths_are_normalised() -> None:
    rules = parse_codeowners("kernels/ @team-a\nkernels/attention.py @alice\n*.py @py\n")
    assert owners_of(rules, "./kernels/attention.py") == ("@py",)
    rules = parse_codeowners("*.py @py\nkernels/ @team-a\n/kernels/attention.py @alice\n")
    assert owners_of(rules, "/kernels/attention.py") == ("@alice",)
    assert owners_of(rules, "kernels/matmul.py") == ("@team-a",)


def test_directory_only_pattern_does_not_match_a_file_of_that_name() -> None:
    rules = parse_codeowners("logs/ @l\n")
    assert owners_of(rules, "logs") is None
    assert owners_of(rules, "x/logs/a") == ("@l",)
