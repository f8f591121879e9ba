"""`rnx gate` reads its baseline from the real gate server before timing (GET
/api/v1/baselines) and samples adaptively against it; a server that is down or old leaves the
run on fixed sampling with a note, never a failure."""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from action.baseline_fetch import Fetched, NotFetched, fetch_baseline
from action.gate import main
from action.inputs import InputError, parse_budget
from action.upload import Credential, UploadAnswer, upload
from testbed.action_io import VirtualClock
from testbed.factories import make_results
from testbed.gate_helpers import LiveServer, server_with_ci_token
from tests.bench_runner.harness_helpers import WORKLOADS

REPO = "acme/kernels"
ENV = "linux-x86_64-cpu-test"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LiveServer, str]]:
    with server_with_ci_token(tmp_path_factory.mktemp("gate"), REPO) as served:
        yield served


def _fetch(url: str, secret: str, **over: str) -> Fetched | NotFetched:
    where = {"branch": "main", "environment": ENV, "workload": "kernels/attention.py"} | over
    return fetch_baseline(url=url, secret=secret, repository=REPO, limit_s=5.0, **where)


def test_the_client_reads_the_baseline_or_says_why_not(
    server: tuple[LiveServer, str], refused_port: int
) -> None:
    live, secret = server
    none_yet = _fetch(live.url, secret, workload="kernels/none_yet.py")
    assert isinstance(none_yet, Fetched) and none_yet.documents == []
    pushed = make_results(repository=REPO, seed=5)
    answer = upload(pushed, url=live.url, credentials=[Credential("token", secret)])
    assert isinstance(answer, UploadAnswer)
    found = _fetch(live.url, secret)
    assert isinstance(found, Fetched)
    assert str(pushed.run_id) in found.run_ids
    assert found.documents[found.run_ids.index(str(pushed.run_id))] == pushed
    assert found.gate is not None and found.gate.rope == 0.02

    old = _fetch(live.url + "/an-older-server", secret)
    assert isinstance(old, NotFetched) and "an older server" in old.why
    refused = _fetch(live.url, "not-a-token")
    assert isinstance(refused, NotFetched) and "401" in refused.why
    down = _fetch(f"http://127.0.0.1:{refused_port}", secret)
    assert isinstance(down, NotFetched) and "did not answer" in down.why


def test_budget_reads_durations_and_refuses_the_rest() -> None:
    assert parse_budget("3m") == 180 and parse_budget("1m30s") == 90 and parse_budget("0") == 0
    assert parse_budget("45") == 45
    with pytest.raises(InputError, match="input 'budget': 'soon' is not a duration"):
        parse_budget("soon")
    with pytest.raises(InputError, match="between 0 and 24h"):
        parse_budget("25h")


@pytest.mark.slow
def test_rnx_gate_samples_adaptively_against_the_servers_baseline(
    server: tuple[LiveServer, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
    refused_port: int,
) -> None:
    live, secret = server
    (tmp_path / "kernels").mkdir()
    shutil.copy(WORKLOADS / "tiny.py", tmp_path / "kernels" / "tiny.py")
    (tmp_path / "kernalin.yml").write_text(
        "version: 1\n"
        # baseline-processes: a push gets 9 by default, more than a baseline to sample against
        # needs here.
        "harness: {samples: 8, processes: 2, baseline-processes: 2, warmup: 1, time-budget: 5}\n"
        "benchmarks:\n"
        "  - {workload: kernels/tiny.py, batch-sizes: [1], runtimes: [pytorch_eager]}\n"
    )
    monkeypatch.chdir(tmp_path)
    env = {
        "GITHUB_REPOSITORY": REPO,
        "GITHUB_OUTPUT": str(tmp_path / "output"),
        "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md"),
        "KERNALIN_TOKEN": secret,
    }
    push = ["--branch", "main", "--sha", uuid.uuid4().hex[:40] + "00"]
    # No server: fixed sampling, with the reason on the progress stream. The upload's retries
    # run on a virtual clock (their schedule, 10-15 s of waiting in real time, is
    # tests/action/test_action_upload.py's to check).
    down = {**env, "KERNALIN_URL": f"http://127.0.0.1:{refused_port}"}
    assert main(push, env=down, clock=VirtualClock()) == 0
    assert "[note] fixed sampling: the gate server at" in capfd.readouterr().err
    # The first push has no baseline to sample against; it becomes the baseline.
    assert main(push, env={**env, "KERNALIN_URL": live.url}) == 0
    assert "fixed sampling: no baseline yet" in capfd.readouterr().err
    pr = [
        *("--branch", "feature", "--base-branch", "main", "--pr", "3"),
        *("--sha", uuid.uuid4().hex[:40] + "00", "--budget", "40s"),
    ]
    assert main(pr, env={**env, "KERNALIN_URL": live.url}) in (0, 1)
    err = capfd.readouterr().err
    assert "adaptive sampling against 1 baseline run, budget 40s" in err, err
