"""`rnx gate` decisions: the real server's answer, outages, broken runtimes, modes, annotations."""

from __future__ import annotations

import io
import re
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from action.annotations import annotate
from action.context import read_context
from action.gate import NotUploaded, decide, exit_code, main, upload_target
from action.inputs import GateInputs
from action.measure import Measured, local_report
from action.upload import Credential, Outage, UploadAnswer, upload
from action.workflow import Workflow
from rnx.config import Benchmark, KernalinConfig
from testbed.action_io import read_outputs
from testbed.factories import make_results
from testbed.gate_helpers import LiveServer, create_token, server_with_ci_token, start_server

REPO = "acme/kernels"
ON_ACTIONS = {"GITHUB_ACTIONS": "true"}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LiveServer, str]]:
    with server_with_ci_token(tmp_path_factory.mktemp("gate"), REPO) as served:
        yield served


def _ctx(tmp_path: Path, pr: int | None):
    return read_context(
        {"GITHUB_JOB": "gate"},
        root=tmp_path,
        repository=REPO,
        branch="main" if pr is None else "feature",
        sha=uuid.uuid4().hex[:40] + "00",
        base_branch=None if pr is None else "main",
        pr=pr,
    )


def _measured(doc, config: KernalinConfig) -> Measured:
    return Measured(Benchmark(workload="kernels/attention.py"), doc, local_report(doc, config))


def test_real_server_verdicts_drive_tier_exit_code_and_annotations(
    server: tuple[LiveServer, str], tmp_path: Path
) -> None:
    live, secret = server
    creds = [Credential("token", secret)]
    config = KernalinConfig()
    base = make_results(repository=REPO, seed=1)
    assert isinstance(upload(base, url=live.url, credentials=creds), UploadAnswer)

    slow = make_results(
        repository=REPO, branch="feature", event="pull_request", pr_number=5, seed=2, slowdown=2.0
    )
    answer = upload(slow, url=live.url, credentials=creds)
    assert isinstance(answer, UploadAnswer), answer
    part = decide(
        _measured(slow, config), answer, ctx=_ctx(tmp_path, 5), config=config, environment="cpu"
    )
    assert part.tier == "BLOCK" and part.url and part.url.startswith(live.url)
    assert any(c.verdict == "slower" for c in part.comparisons)
    assert (
        exit_code("BLOCK", "enforce"),
        exit_code("BLOCK", "soft-fail"),
        exit_code("BLOCK", "report-only"),
        exit_code("WARN", "enforce"),
    ) == (1, 0, 0, 0)

    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "attention.py").write_text("import torch\n\n\nclass Model:\n    pass\n")
    out = io.StringIO()
    annotate(Workflow(ON_ACTIONS, out), part, root=tmp_path, block_threshold=0.25)
    lines = out.getvalue().splitlines()
    assert lines and all(
        line.startswith("::error file=kernels/attention.py,line=4,title=rnx-benchmark BLOCK")
        for line in lines
    ), lines
    ratio = re.search(r"slower, (\d+\.\d+)×", lines[0])
    assert ratio and 1.9 < float(ratio.group(1)) < 2.1, lines[0]
    assert "beyond the 25%25 block threshold" in lines[0]


def test_outage_is_a_warning_but_a_locally_broken_runtime_still_blocks(tmp_path: Path) -> None:
    config = KernalinConfig()
    ctx = _ctx(tmp_path, 7)
    fine = make_results(repository=REPO, branch="feature", pr_number=7, seed=3)
    part = decide(
        _measured(fine, config),
        Outage("the gate server at http://x is unreachable"),
        ctx=ctx,
        config=config,
        environment="cpu",
    )
    assert part.tier == "WARN" and exit_code(part.tier, "enforce") == 0
    assert part.outage and "unreachable" in part.reasons[0]

    broken = make_results(
        repository=REPO, branch="feature", pr_number=7, seed=4, broken=["pytorch_eager/float32/bs1"]
    )
    part = decide(
        _measured(broken, config), Outage("timeout"), ctx=ctx, config=config, environment="cpu"
    )
    assert part.tier == "BLOCK" and exit_code(part.tier, "enforce") == 1
    assert any("broken" in r for r in part.reasons)


def test_bad_input_is_an_error_in_the_log_and_the_summary(
    tmp_path: Path, monkeypatch, capsys
) -> None:
    monkeypatch.chdir(tmp_path)
    summary = tmp_path / "summary.md"
    env = {**ON_ACTIONS, "INPUT_WORKLOAD": "kernels/nope.py", "GITHUB_STEP_SUMMARY": str(summary)}
    assert main([], env=env) == 2
    out = capsys.readouterr().out
    assert out.startswith("::error title=rnx-benchmark%3A cannot run::input 'workload'")
    assert "does not exist in the checkout" in summary.read_text()


def test_gate_results_measured_elsewhere_end_to_end(
    server: tuple[LiveServer, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    """The workflow_run pattern: a fork's document, filed under the trusted run's identity,
    uploaded to the real server, reported to the fake GitHub; BLOCK fails in enforce mode."""
    from rnx_github.client import ACTIONS_BOT
    from testbed.fakes.fake_github import State, Token, serve

    live, secret = server
    monkeypatch.chdir(tmp_path)
    assert isinstance(
        upload(
            make_results(repository=REPO, seed=11, median_ns=2e6),
            url=live.url,
            credentials=[Credential("token", secret)],
        ),
        UploadAnswer,
    )
    forged = make_results(repository="evil/other", branch="x", seed=12, median_ns=2e6, slowdown=2.0)
    results = tmp_path / "results.json"
    results.write_text(forged.to_json())
    state = State()
    state.tokens["ghs_job"] = Token(ACTIONS_BOT, is_app=True)
    sha = "c" * 40
    with serve(state) as (api, _):
        env = {
            **ON_ACTIONS,
            "KERNALIN_URL": live.url,
            "KERNALIN_TOKEN": secret,
            "GITHUB_TOKEN": "ghs_job",
            "GITHUB_API_URL": api,
            "GITHUB_REPOSITORY": REPO,
            "GITHUB_EVENT_NAME": "workflow_run",
            "GITHUB_JOB": "report",
            "GITHUB_OUTPUT": str(tmp_path / "output"),
            "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md"),
        }
        argv = [
            "--from-results",
            str(results),
            "--pr",
            "9",
            "--sha",
            sha,
            "--branch",
            "contributor-branch",
            "--base-branch",
            "main",
        ]
        assert main(argv, env=env) == 1
    outputs = read_outputs(tmp_path / "output")
    assert outputs["tier"] == "BLOCK" and outputs["run-url"].startswith(live.url)
    summary = (tmp_path / "summary.md").read_text()
    assert "rnx-benchmark: BLOCK" in summary and "| slower |" in summary
    (comment,) = state.comment_bodies(REPO, 9, login=ACTIONS_BOT)
    assert "rnx-benchmark: BLOCK" in comment
    assert state.statuses[(REPO, sha)][-1]["state"] == "failure"
    log = capsys.readouterr().out
    assert "::add-mask::" + secret in log and "::error" in log


def test_oidc_only_gets_a_fresh_token_for_each_workload(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    """With id-token: write and no kernalin-token, each upload of a run (one per workload)
    asks GitHub for its own OIDC token: the server spends each token once."""
    from gate_server.db import Database, repositories
    from testbed.oidc_issuer import OidcIssuer

    repo, github_id = "Codertocat/Hello-World", 186853002
    db = f"sqlite:///{tmp_path / 'gate.db'}"
    create_token(db, workspace="octo", repository=repo, branches=("master",))
    storage = Database(db)
    with storage.write() as conn:
        assert repositories.bind_github_id(conn, github_id, repo)
    storage.close()
    issuer = OidcIssuer()
    live = start_server(db, tmp_path, env={"RNX_OIDC_ISSUER": issuer.url})
    monkeypatch.chdir(tmp_path)
    files = []
    for i, path in enumerate(("kernels/a.py", "kernels/b.py")):
        doc = make_results(repository=repo, branch="master", seed=20 + i)
        doc = doc.model_copy(update={"workload": doc.workload.model_copy(update={"path": path})})
        files.append(tmp_path / f"r{i}.json")
        files[-1].write_text(doc.to_json())
    env = {
        "ACTIONS_ID_TOKEN_REQUEST_URL": f"{issuer.url}/actions-token?api-version=2.0",
        "ACTIONS_ID_TOKEN_REQUEST_TOKEN": issuer.request_token,
        "KERNALIN_URL": live.url,
        "GITHUB_REPOSITORY": repo,
        "GITHUB_EVENT_NAME": "push",
        "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md"),
    }
    try:
        code = main(
            ["--from-results", *map(str, files), "--branch", "master", "--sha", "b" * 40], env=env
        )
    finally:
        live.stop()
        issuer.close()
    log = capsys.readouterr().out
    assert code == 0 and "did not reach the gate server" not in log, log
    assert sum(p.startswith("/actions-token") for p in issuer.requests) == 2
    assert (tmp_path / "summary.md").read_text().count("[Run page](") == 2


@pytest.mark.parametrize(
    ("patterns", "branch", "pr", "uploaded"),
    [
        (None, "feature", None, True),  # not set: every push goes up, the token decides
        (["main", "release/*"], "main", None, True),
        (["main", "release/*"], "release/2.0", None, True),
        (["main", "release/*"], "release/2.0/fix", None, False),  # * stays in one segment
        (["main", "release/**"], "release/2.0/fix", None, True),
        (["main"], "feature", None, False),
        (["main"], "feature", 5, True),  # pull requests are compared whatever the list says
        ([], "main", None, False),
    ],
)
def test_baseline_branches_choose_which_pushes_are_uploaded(
    tmp_path: Path, patterns: list[str] | None, branch: str, pr: int | None, uploaded: bool
) -> None:
    config = KernalinConfig.model_validate({"gate": {"baseline-branches": patterns}})
    ctx = read_context(
        {}, root=tmp_path, repository=REPO, branch=branch, sha="a" * 40, base_branch="main", pr=pr
    )
    target = upload_target(GateInputs(kernalin_url="https://gate.test"), config, ctx)
    assert (target == "https://gate.test") is uploaded, target
    if not uploaded:
        assert isinstance(target, NotUploaded) and target.tier == "PASS"
        assert f"{branch} is not a baseline branch" in target.why


def test_a_push_outside_the_baseline_branches_is_measured_but_never_uploaded(
    server: tuple[LiveServer, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    live, secret = server
    monkeypatch.chdir(tmp_path)
    (tmp_path / "kernalin.yml").write_text("version: 1\ngate:\n  baseline-branches: [main]\n")
    env = {
        "KERNALIN_URL": live.url,
        "KERNALIN_TOKEN": secret,
        "GITHUB_REPOSITORY": REPO,
        "GITHUB_EVENT_NAME": "push",
        "GITHUB_OUTPUT": str(tmp_path / "output"),
        "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md"),
    }
    outputs = {}
    for branch, seed in (("feature", 31), ("main", 32)):
        doc = make_results(repository=REPO, branch=branch, seed=seed)
        results = tmp_path / f"{branch}.json"
        results.write_text(doc.to_json())
        (tmp_path / "output").unlink(missing_ok=True)
        argv = ["--from-results", str(results), "--branch", branch, "--sha", f"{seed}" * 20]
        assert main(argv, env=env) == 0
        outputs[branch] = read_outputs(tmp_path / "output")
        stored = httpx.get(
            f"{live.url}/api/v1/runs/{doc.run_id}",
            headers={"Authorization": f"Bearer {secret}"},
            timeout=60,
        )
        assert stored.status_code == (404 if branch == "feature" else 200), stored.text
    assert outputs["feature"]["tier"] == "PASS" and outputs["feature"]["run-url"] == ""
    assert (
        "feature is not a baseline branch (gate.baseline-branches: main)"
        in (outputs["feature"]["summary"])
    )
    assert outputs["main"]["run-url"].startswith(live.url)


def test_contention_notes_reach_the_comment_and_the_job_summary(tmp_path: Path) -> None:
    """A configuration the harness measured on a shared GPU says so under the table."""
    from rnx_github.comment import combine

    config = KernalinConfig()
    doc = make_results(repository=REPO, branch="feature", pr_number=3, seed=5)
    shared, quiet = doc.configurations[0], doc.configurations[1]
    contention = {
        "note": "GPU shared with other work: 2 other process(es) running kernels on the GPU "
        "(pid 4242, 4243)",
        "processes_seen": 2,
        "other_pids": [4242, 4243],
    }
    noted = shared.model_copy(update={"details": {**shared.details, "contention": contention}})
    odd = quiet.model_copy(update={"details": {"contention": {"note": 7}}})  # malformed: left out
    doc = doc.model_copy(update={"configurations": [noted, odd, *doc.configurations[2:]]})
    part = decide(
        _measured(doc, config),
        NotUploaded("PASS", "no gate server configured"),
        ctx=_ctx(tmp_path, 3),
        config=config,
        environment="h200",
    )
    assert [n.id for n in part.notes] == [shared.id]
    body = combine([], [part], sha="d" * 40).body
    assert (
        f"- `{shared.id}`: GPU shared with other work: 2 other process\\(es\\) running kernels "
        f"on the GPU \\(pid 4242, 4243\\) \\(seen by 2 of 3 worker processes\\)"
    ) in body.splitlines()


def test_a_push_to_become_a_baseline_is_measured_with_more_processes(tmp_path: Path) -> None:
    """harness.baseline-processes (9 by default) for a push compared by stored baseline; a pull
    request, paired mode, and a setting at or below harness.processes keep harness.processes."""
    from action.measure import harness_for
    from rnx.config import parse_config

    config = KernalinConfig()
    assert harness_for(config, _ctx(tmp_path, None)).processes == 9
    assert harness_for(config, _ctx(tmp_path, 7)).processes == 3
    paired = parse_config({"gate": {"compare": "paired"}})
    assert harness_for(paired, _ctx(tmp_path, None)).processes == 3
    off = parse_config({"harness": {"processes": 4, "baseline-processes": None}})
    assert harness_for(off, _ctx(tmp_path, None)).processes == 4
    fewer = parse_config({"harness": {"processes": 12, "baseline-processes": 6}})
    assert harness_for(fewer, _ctx(tmp_path, None)).processes == 12
