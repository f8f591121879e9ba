"""Is an accepted run's workload the file it names? GitHub's contents API, through the one client,
against the GitHub fake answering with GitHub's recorded shapes (tests/data/github-rest/)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator

import httpx
import pytest

from rnx_github.accept_rules import workload_problem
from rnx_github.client import GitHubClient, RepositoryPath
from testbed.fakes import fake_github, github_endpoints
from testbed.fakes.github_endpoints import MAX_CONTENT_BYTES, add_file, rest_answer

REPO = "acme/kernels"
SHA = "ec26c3e57ca3a959ca5aad62de7213c562f8c821"
KERNEL = "import torch\n\n\nclass Model(torch.nn.Module):\n    pass\n" * 40
ODD = "kernels/a b#c?d%e é.py"  # every character a URL would take for something else


@pytest.fixture
def github() -> Iterator[tuple[str, fake_github.State, GitHubClient]]:
    assert github_endpoints.ROUTES[0] in fake_github.ROUTES
    with fake_github.serve() as (url, state):
        state.tokens["ghs_t"] = fake_github.Token("rnx-gate[bot]", is_app=True)
        with GitHubClient(url, "ghs_t") as client:
            yield url, state, client


def test_the_fake_answers_as_github_documents(
    github: tuple[str, fake_github.State, GitHubClient],
) -> None:
    url, state, _ = github
    add_file(state, REPO, SHA, "kernels/attention.py", KERNEL)
    auth = {"Authorization": "Bearer ghs_t"}
    found = httpx.get(f"{url}/repos/{REPO}/contents/kernels/attention.py?ref={SHA}", headers=auth)
    item = found.json()
    assert found.status_code == 200 and set(item) == set(rest_answer("contents.file"))
    assert item["sha"] == hashlib.sha1(b"blob %d\0" % len(KERNEL) + KERNEL.encode()).hexdigest()
    lines = item["content"].split("\n")
    assert lines[-1] == "" and {len(line) for line in lines[:-2]} == {60}  # GitHub's wrapping
    missing = httpx.get(f"{url}/repos/{REPO}/contents/docs/notes.md?ref={SHA}", headers=auth)
    assert (missing.status_code, missing.json()) == (404, rest_answer("contents.not-found"))
    assert json.loads(missing.content)["status"] == "404"


def test_the_client_says_what_is_at_a_path(
    github: tuple[str, fake_github.State, GitHubClient],
) -> None:
    _, state, client = github
    add_file(state, REPO, SHA, "kernels/attention.py", KERNEL)
    add_file(state, REPO, SHA, ODD, "odd")
    add_file(state, REPO, SHA, "models/big.onnx", "x" * (MAX_CONTENT_BYTES + 1))
    assert client.path_at(REPO, "kernels/attention.py", SHA) == RepositoryPath(
        "file", KERNEL.encode()
    )
    assert client.path_at(REPO, ODD, SHA) == RepositoryPath("file", b"odd")
    assert client.path_at(REPO, "kernels", SHA) == RepositoryPath("dir")
    assert client.path_at(REPO, "models/big.onnx", SHA) == RepositoryPath("file", None)
    assert client.path_at(REPO, "docs/notes.md", SHA) is None
    assert client.path_at(REPO, "kernels/attention.py", "another-ref") is None
    assert client.file_text(REPO, ODD, SHA) == "odd"


def test_a_run_is_accepted_only_for_the_file_it_measured(
    github: tuple[str, fake_github.State, GitHubClient],
) -> None:
    _, state, client = github
    measured = add_file(state, REPO, SHA, "kernels/attention.py", KERNEL)
    add_file(state, REPO, SHA, "docs/notes.md", "# notes\n")
    add_file(state, REPO, SHA, "models/big.onnx", "x" * (MAX_CONTENT_BYTES + 1))

    def problem(path: str, sha256: str | None = measured) -> str | None:
        return workload_problem(client, repository=REPO, sha=SHA, path=path, sha256=sha256)

    assert problem("kernels/attention.py") is None
    assert problem("kernels/attention.py", measured.upper()) is None
    assert "does not exist at commit ec26c3e57ca3" in (problem("kernels/missing.py") or "")
    assert "is a dir, not a workload file" in (problem("kernels") or "")
    # docs/notes.md exists, but is not what was measured (the attack).
    wrong = problem("docs/notes.md") or ""
    assert "is not the workload the run measured" in wrong and measured[:12] in wrong
    # Over 1 MB GitHub sends no bytes: the file's presence is all that can be checked.
    assert problem("models/big.onnx", "0" * 64) is None
