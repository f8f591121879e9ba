"""The action's own overhead on this machine: everything but the benchmark itself.

Runs what a pull-request job runs, side by side in one process tree:
  install   action/install.sh into a fresh RUNNER_TEMP (cold: venv + pip), then again (warm)
  gate      `python -m rnx_cli gate` against the real gate server (SQLite, loopback) and the
            fake GitHub API (loopback), for a pull request, N times
and splits each gate run into: interpreter start and imports, setup (inputs, kernalin.yml,
identity), the benchmark (the harness: what is not overhead), upload, reports (summary,
comment, status). Prints medians and the overhead as a ratio of the benchmark time.

    .venv/bin/python -m benchmarks.harness.action_overhead [--runs 3] [--samples 10] [--processes 2]

Network latency to a real server and to api.github.com is not in these figures (loopback).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from testbed.fakes.fake_github import State, Token, serve
from testbed.gate_helpers import create_token, start_server

REPO_ROOT = Path(__file__).resolve().parents[2]

TIMINGS = re.compile(
    r"timings: setup (?P<setup>[\d.]+)s, benchmark (?P<benchmark>[\d.]+)s, "
    r"upload (?P<upload>[\d.]+)s, reports (?P<reports>[\d.]+)s"
)
REPOSITORY = "acme/kernels"


def _copy_action(dst: Path) -> None:
    files = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    for name in files:
        if name.split("/")[0] in (
            "action.yml",
            "pyproject.toml",
            "README.md",
            "action",
            "rnx",
            "stats",
            "bench_runner",
            "gate_server",
        ):
            target = dst / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO_ROOT / name, target)


def time_install(work: Path) -> tuple[float, float, str]:
    action = work / "action-src"
    _copy_action(action)
    runner_temp = work / "runner-temp"
    runner_temp.mkdir()
    env = {
        **os.environ,
        "GITHUB_ACTION_PATH": str(action),
        "RUNNER_TEMP": str(runner_temp),
        "GITHUB_OUTPUT": str(work / "install-output"),
        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
    }
    times = []
    for _ in range(2):
        t0 = time.perf_counter()
        subprocess.run(["bash", str(action / "action" / "install.sh")], env=env, check=True)
        times.append(time.perf_counter() - t0)
    python = (work / "install-output").read_text().splitlines()[-1].split("=", 1)[1]
    return times[0], times[1], python


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--samples", type=int, default=10)
    parser.add_argument("--processes", type=int, default=2)
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="rnx-overhead-"))
    cold, warm, python = time_install(work)
    repo = work / "repo"
    (repo / "kernels").mkdir(parents=True)
    shutil.copy2(REPO_ROOT / "tests" / "data" / "action-kernel.py", repo / "kernels" / "k.py")
    (repo / "kernalin.yml").write_text(
        f"version: 1\nharness: {{samples: {args.samples}, processes: {args.processes}, "
        f"warmup: 2}}\n"
    )
    db = f"sqlite:///{work / 'gate.db'}"
    token = create_token(db, repository=REPOSITORY, branches=("main",))
    server = start_server(db, work)
    state = State()
    state.tokens["ghs_job"] = Token("github-actions[bot]", is_app=True)
    rows: list[dict[str, float]] = []
    try:
        with serve(state) as (api, _):
            for i in range(args.runs):
                env = {
                    k: v
                    for k, v in os.environ.items()
                    if not k.startswith(("GITHUB_", "RNX_", "KERNALIN_", "INPUT_"))
                }
                env.update(
                    KERNALIN_URL=server.url,
                    KERNALIN_TOKEN=token.secret,
                    GITHUB_TOKEN="ghs_job",
                    GITHUB_API_URL=api,
                    GITHUB_REPOSITORY=REPOSITORY,
                    GITHUB_JOB="gate",
                    GITHUB_OUTPUT=str(work / "output"),
                    GITHUB_STEP_SUMMARY=str(work / "summary"),
                    INPUT_WORKLOAD="kernels/k.py",
                )
                branch = (
                    ["--branch", "main", "--sha", f"{i:040x}"]
                    if i == 0
                    else [
                        "--branch",
                        "feature",
                        "--sha",
                        f"{i:040x}",
                        "--pr",
                        "1",
                        "--base-branch",
                        "main",
                    ]
                )
                t0 = time.perf_counter()
                done = subprocess.run(
                    [python, "-m", "rnx_cli", "gate", *branch],
                    cwd=repo,
                    env=env,
                    capture_output=True,
                    text=True,
                )
                total = time.perf_counter() - t0
                m = TIMINGS.search(done.stdout)
                if not m:
                    print(done.stdout, done.stderr, file=sys.stderr)
                    return 1
                phases = {k: float(v) for k, v in m.groupdict().items()}
                phases["start+imports"] = total - sum(phases.values())
                phases["total"] = total
                rows.append(phases)
                print(f"run {i + 1}: " + ", ".join(f"{k} {v:.3f}s" for k, v in phases.items()))
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)

    med = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
    # Per run, then the median: a difference of medians would mix different runs.
    overhead = statistics.median(r["total"] - r["benchmark"] for r in rows)
    ratio = statistics.median((r["total"] - r["benchmark"]) / r["benchmark"] for r in rows)
    print(
        f"\nmachine: {os.cpu_count()} CPUs; harness {args.samples} samples x "
        f"{args.processes} processes; {args.runs} gate runs (first a push, then PRs)"
    )
    print(f"{'phase':<16}{'median s':>10}{'share':>9}")
    for k in ("start+imports", "setup", "benchmark", "upload", "reports", "total"):
        print(f"{k:<16}{med[k]:>10.3f}{med[k] / med['total']:>9.1%}")
    print(f"{'install (cold)':<16}{cold:>10.3f}   once per job: venv + pip install")
    print(f"{'install (warm)':<16}{warm:>10.3f}   a second step in the same job")
    print(
        f"\noverhead of a gate run (all but the benchmark): {overhead:.3f}s = "
        f"{ratio:.1%} of the benchmark time (medians over the runs)"
    )
    print(
        f"with the cold install: {overhead + cold:.3f}s = "
        f"{(overhead + cold) / med['benchmark']:.1%} of the median benchmark time"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
