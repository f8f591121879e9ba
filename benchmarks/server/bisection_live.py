"""How well the real server bisects: App mode on loopback against the GitHub fake, whose
workflow-dispatch endpoint plays the CI runner.

One server (`python -m gate_server serve`, SQLite by default, --database-url for PostgreSQL)
and one fake GitHub serve every trial. A trial is a branch of its own: a before run, then 16
commits of which the last is the after run (both uploaded, signed, as the workflow uploads a
push), with a step of STEP at a random commit or none. The trial plants the change point
between its two ends as the change-point look stores one (the same row and the same
`bisect.start` job in one transaction; the look itself is benchmarked elsewhere and needs a
long history per trial), and from there everything is the server's: it lists the range with
compare-commits, dispatches the workflow, and the fake's dispatch endpoint uploads a run
measured at the dispatched commit with the bisection's header, signed, as the workflow does.
The noise is bisection_quality.py's (run, process and sample noise, interference spikes).

Reports, per step size, the share of trials whose bisection named the planted commit within
--max-dispatches dispatches (the server's RNX_BISECT_BUDGET), the dispatch counts, and for no
step the share that named no culprit; and the wall time.

    python -m benchmarks.server.bisection_live --trials 100
"""

from __future__ import annotations

import argparse
import json
import queue
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import numpy as np
from cryptography.hazmat.primitives.asymmetric import rsa

from action.init import WORKFLOW
from benchmarks.server.bisection_quality import COMMITS, PROCESSES, SAMPLES, measure
from gate_server.db import bisections, change_points, open_database, repositories
from gate_server.domain.bisection.jobs import enqueue_start
from testbed.factories import make_results
from testbed.fakes import fake_github
from testbed.fakes.github_commits import WORKFLOWS, add_commits, commits
from testbed.fakes.github_endpoints import install_app, private_pem
from testbed.gate_helpers import create_token, fresh_postgres_schema, signed_headers
from testbed.live_server import start_server

REPO = "acme/kernels"
CONFIG = ("pytorch_eager", "float32", 1)
CONFIG_ID = "pytorch_eager/float32/bs1"
MS = 1_000_000.0  # a level of 1.0 is 1 ms


def document(branch: str, sha: str, groups: list[list[float]], event: str) -> bytes:
    """A results document of CONFIG at `sha` whose samples are `groups` (one list per process,
    in ms), as the action uploads it."""
    n = len(groups) * len(groups[0])
    doc = make_results(
        configs=(CONFIG,), branch=branch, sha=sha, event=event, n=n, processes=len(groups)
    )
    data: dict[str, Any] = json.loads(doc.to_json())
    ns, rounds, processes = [], [], []
    for r in range(len(groups[0])):
        for p, g in enumerate(groups):
            ns.append(max(1, int(g[r] * MS)))
            rounds.append(r)
            processes.append(p)
    data["configurations"][0]["samples"] = {"ns": ns, "round": rounds, "process": processes}
    return json.dumps(data).encode()


@dataclass
class Trial:
    number: int
    step: float
    culprit: int | None  # index in the range of COMMITS commits; None: no step
    seed: int
    shas: list[str] = field(default_factory=list)  # the before commit, then the range
    dispatches: int = 0

    @property
    def branch(self) -> str:
        return f"trial-{self.number}"

    def level(self, index: int) -> float:
        """The true time at range index `index` (-1: the before commit)."""
        return 1.0 + self.step if self.culprit is not None and index >= self.culprit else 1.0

    def rng(self, *tag: int) -> np.random.Generator:
        return np.random.default_rng([self.seed, self.number, *tag])


class Bench:
    def __init__(self, server_url: str, database_url: str, secret: str) -> None:
        self.url, self.database_url, self.secret = server_url, database_url, secret
        self.by_sha: dict[str, tuple[Trial, int]] = {}
        self.lock = threading.Lock()
        self.http = httpx.Client(timeout=120)

    def upload(self, branch: str, sha: str, groups: list[list[float]], **headers: str) -> str:
        event = "workflow_dispatch" if headers else "push"
        data = document(branch, sha, groups, event)
        r = self.http.post(
            f"{self.url}/api/v1/runs",
            content=data,
            headers={**signed_headers(self.secret, data), **headers},
        )
        if r.status_code != 201:
            raise RuntimeError(f"upload at {sha[:12]}: {r.status_code} {r.text[:300]}")
        return str(r.json()["run_id"])

    def run_workflow(self, dispatch: dict[str, Any]) -> None:
        """What the dispatched workflow does: check the commit out, measure, upload the run
        with the bisection's header."""
        sha, bisection = dispatch["inputs"]["commit"], dispatch["inputs"]["bisection"]
        trial, index = self.by_sha[sha]
        with self.lock:
            trial.dispatches += 1
            n = trial.dispatches
        groups = measure(trial.rng(1000 + n), trial.level(index), PROCESSES)
        self.upload(dispatch["ref"], sha, groups, **{"X-Kernalin-Bisection": bisection})

    def run_trial(self, trial: Trial, database: Any, timeout: float) -> tuple[str | None, int]:
        """Upload the ends, plant the change point, wait for the bisection to end; returns
        (the culprit it named or None, dispatches)."""
        rng = trial.rng(0)
        before_sha, after_sha = trial.shas[0], trial.shas[-1]
        before_groups = measure(rng, 1.0, PROCESSES)
        after_groups = measure(rng, trial.level(COMMITS - 1), PROCESSES)
        before_id = self.upload(trial.branch, before_sha, before_groups)
        after_id = self.upload(trial.branch, after_sha, after_groups)
        ratio = float(np.median(np.concatenate(after_groups)) / np.median(before_groups))
        with database.write() as conn:
            [repo] = repositories.named(conn, REPO)
            cp_id = change_points.insert_new(
                conn,
                change_points.NewChangePoint(
                    repository_id=repo.id,
                    branch=trial.branch,
                    environment_key="linux-x86_64-cpu-test",
                    workload="kernels/attention.py",
                    configuration=CONFIG_ID,
                    before_run_id=before_id,
                    before_sha=before_sha,
                    after_run_id=after_id,
                    after_sha=after_sha,
                    ratio=ratio,
                    low=ratio,
                    high=ratio,
                    p_value=0.0,
                    early=False,
                    end_run_id=None,
                    end_sha=None,
                ),
                undoes_id=None,
            )
            assert cp_id is not None
            enqueue_start(conn, cp_id)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with database.read() as conn:
                b = bisections.of_change_point(conn, cp_id)
            if b is not None and b.state != bisections.RUNNING:
                return b.culprit_sha, trial.dispatches
            time.sleep(0.1)
        raise RuntimeError(f"trial {trial.number}: the bisection did not end in {timeout:.0f} s")


def run(
    trials: int,
    budget: int,
    seed: int,
    database_url: str | None,
    concurrency: int,
    say: Callable[[str], None],
) -> dict[str, float]:
    rng = np.random.default_rng(seed)
    plan: list[Trial] = []
    for step in (0.10, 0.05, 0.0):
        for _ in range(trials):
            # the last commit is the after end itself: a step there is found without a dispatch
            culprit = int(rng.integers(0, COMMITS)) if step else None
            plan.append(Trial(len(plan), step, culprit, seed))
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    work: queue.Queue[dict[str, Any] | None] = queue.Queue()
    with tempfile.TemporaryDirectory() as tmp, fake_github.serve() as (api, state):
        drop_schema = None
        if database_url and database_url.startswith("postgresql"):
            # A schema of its own, dropped after: the trials' branches start empty.
            url, drop_schema = fresh_postgres_schema(database_url)
        else:
            url = database_url or f"sqlite:///{Path(tmp) / 'gate.db'}"
        install_app(state, key, {REPO: 77})
        workflow = WORKFLOW.format(branch="main", schedule="", action_note="", action_ref="a/b@v1")
        for t in plan:
            t.shas = [f"{t.number + 1:020x}{i:020x}" for i in range(COMMITS + 1)]
            add_commits(state, REPO, t.shas, branch=t.branch)
            state.repo(REPO).files[(t.branch, WORKFLOWS + "kernalin.yml")] = workflow
        commits(state).runner = work.put
        env = {
            "RNX_OUTBOX_POLL_MS": "20",
            "RNX_GITHUB_APP_ID": "314",
            "RNX_GITHUB_APP_PRIVATE_KEY": private_pem(key),
            "RNX_GITHUB_API_URL": api,
            "RNX_OIDC_AUDIENCE": "off",
            "RNX_BISECT_BUDGET": str(budget),
            "RNX_BISECT_IN_FLIGHT": "100",
            # Only the planted change points: a trial's two ends are no history to look at.
            "RNX_DETECT_CHANGES": "off",
        }
        token = create_token(url, branches=("trial-*",))
        server = start_server(url, Path(tmp), env=env)
        bench = Bench(server.url, url, token.secret)
        for t in plan:
            for i, sha in enumerate(t.shas[1:]):
                bench.by_sha[sha] = (t, i)
        errors: list[BaseException] = []

        def runner() -> None:
            while (d := work.get()) is not None:
                try:
                    bench.run_workflow(d)
                except BaseException as e:  # reported after the run, not lost in a thread
                    errors.append(e)

        runners = [threading.Thread(target=runner, daemon=True) for _ in range(concurrency)]
        for r in runners:
            r.start()
        database = open_database(url)
        started = time.monotonic()
        try:
            with ThreadPoolExecutor(concurrency) as pool:
                found = list(pool.map(lambda t: bench.run_trial(t, database, 600.0), plan))
        finally:
            wall = time.monotonic() - started
            for _ in runners:
                work.put(None)
            database.close()
            server.stop()
            if drop_schema is not None:
                drop_schema()
        if errors:
            raise errors[0]
        sent = len(commits(state).dispatches)
    out = {}
    for step in (0.10, 0.05, 0.0):
        mine = [(t, f) for t, f in zip(plan, found, strict=True) if t.step == step]
        used = [d for _, (_, d) in mine]
        named = sum(1 for _, (c, _) in mine if c is not None)
        right = sum(
            1
            for t, (c, d) in mine
            if t.culprit is not None and c == t.shas[1 + t.culprit] and d <= budget
        )
        n = len(mine)
        if step:
            share = right / n
            say(
                f"{step:.0%} step in {COMMITS} commits: pinned {right}/{n} ({share:.0%}) "
                f"within {budget} dispatches, dispatches median {np.median(used):.0f} "
                f"max {max(used)}"
            )
        else:
            share = 1 - named / n
            say(
                f"no step in {COMMITS} commits: no culprit named in {n - named}/{n} "
                f"({share:.0%}), dispatches median {np.median(used):.0f} max {max(used)}"
            )
        out[f"{step:.2f}"] = share
    backend = "PostgreSQL" if url.startswith("postgresql") else "SQLite"
    say(
        f"{len(plan)} bisections on one live server ({backend}), {sent} workflow dispatches "
        f"answered by the fake runner ({SAMPLES} samples x {PROCESSES} processes each), "
        f"wall {wall:.0f} s"
    )
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--trials", type=int, default=100, help="per step size")
    p.add_argument("--max-dispatches", type=int, default=5, help="the per-bisection budget")
    p.add_argument("--seed", type=int, default=32)
    p.add_argument(
        "--database-url",
        help="PostgreSQL (a schema of its own is made and dropped), e.g. "
        "postgresql+psycopg://postgres@127.0.0.1:5432/test; default: a new SQLite file",
    )
    p.add_argument("--concurrency", type=int, default=8, help="trials in flight at once")
    args = p.parse_args(argv)
    run(args.trials, args.max_dispatches, args.seed, args.database_url, args.concurrency, print)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
