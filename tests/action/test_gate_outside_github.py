"""`rnx gate` in a CI that is not GitHub Actions (GitLab here): the whole log is the report.

No workflow command (`::add-mask::` would print the token in clear), the reason, the table and
the run page in the log, and what `--results-dir` keeps verifies with `rnx receipt verify`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from action.gate import main
from rnx_cli import receipt
from testbed.factories import make_results
from testbed.gate_helpers import LiveServer, server_with_ci_token

REPO = "acme/kernels"
# What a GitLab job's environment holds; nothing of GitHub's.
GITLAB = {
    "CI": "true",
    "GITLAB_CI": "true",
    "CI_PROJECT_PATH": REPO,
    "CI_COMMIT_BRANCH": "main",
    "CI_JOB_URL": "https://gitlab.example.com/acme/kernels/-/jobs/77",
}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LiveServer, str]]:
    with server_with_ci_token(tmp_path_factory.mktemp("gate"), REPO) as served:
        yield served


def _gate(tmp_path: Path, env: dict[str, str], doc_args: dict, flags: list[str]) -> list[str]:
    doc = make_results(repository=REPO, **doc_args)
    results = tmp_path / f"{doc.run_id}.in.json"
    results.write_text(doc.to_json())
    return ["--from-results", str(results), "--repository", REPO, *flags]


def test_the_whole_log_carries_the_report_and_never_the_token(
    server: tuple[LiveServer, str], tmp_path: Path, monkeypatch, capsys
) -> None:
    live, secret = server
    monkeypatch.chdir(tmp_path)
    env = {**GITLAB, "KERNALIN_URL": live.url, "KERNALIN_TOKEN": secret}
    push = _gate(tmp_path, env, {"branch": "main", "seed": 1}, ["--branch", "main"])
    assert main([*push, "--sha", "a" * 40], env=env) == 0
    kept = tmp_path / "kept"
    pr = _gate(
        tmp_path,
        env,
        {"branch": "feature", "pr_number": 4, "seed": 2, "slowdown": 2.0},
        ["--branch", "feature", "--pr", "4", "--base-branch", "main", "--sha", "b" * 40],
    )
    assert main([*pr, "--results-dir", str(kept)], env=env) == 1
    captured = capsys.readouterr()
    log = captured.out + captured.err
    assert secret not in log
    assert not [line for line in log.splitlines() if line.startswith("::")], log
    assert "rnx-benchmark: BLOCK (enforce): the job fails (exit code 1)" in log, log
    assert re.search(r"^\s+- .*slower", log, re.MULTILINE), log  # the reason
    assert re.search(r"configuration\s+base\s+head\s+ratio", log), log  # the table
    assert f"run: {live.url}/" in log, log
    assert "error: rnx-benchmark: BLOCK: rnx-benchmark BLOCKs this change" in log, log

    (uploaded,) = [p for p in kept.glob("*.json") if not p.name.endswith(".answer.json")]
    run_id = uploaded.stem
    assert (kept / f"{run_id}.answer.json").is_file()
    for receipt_arg in (kept / f"{run_id}.receipt", kept / f"{run_id}.answer.json"):
        argv = ["verify", str(receipt_arg), "--url", live.url, "--results", str(uploaded)]
        assert receipt.main(argv) == 0, capsys.readouterr()
    assert capsys.readouterr().err.count("rnx receipt: valid: run") == 2


def test_without_a_server_the_log_says_which_variable_to_set(
    tmp_path: Path, monkeypatch, capsys
) -> None:
    monkeypatch.chdir(tmp_path)
    argv = _gate(tmp_path, GITLAB, {"branch": "main"}, ["--branch", "main", "--sha", "c" * 40])
    assert main(argv, env=dict(GITLAB)) == 0
    log = capsys.readouterr().out
    assert "KERNALIN_URL" in log and "rnx-benchmark: WARN" in log, log


def test_help_names_the_server_variables(capsys) -> None:
    with pytest.raises(SystemExit):
        main(["--help"], env={})
    text = capsys.readouterr().out
    assert "KERNALIN_URL" in text and "KERNALIN_TOKEN" in text
