"""The action against every outage mode, with the real clock: mode -> outcome -> time taken.

    .venv/bin/python -m benchmarks.reliability.action_faults [--parallel 4] [--modes
    http-500,trickle]

Each mode runs the real `rnx gate` command (a fresh Python process, as in CI) on a results
document measured elsewhere (--from-results), with KERNALIN_URL pointing at a loopback server
that fails in that mode (tests/reliability/misbehaving.py), or at nothing (connection refused),
an unresolvable name (nonexistent.invalid) or a plain-HTTP port behind https:// (TLS error).
The promise: exit 0, an ::warning naming the cause, tier WARN, all within the minute the
upload is allowed. Modes run a few at a time; each process waits on its socket, not the CPU.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from testbed.factories import make_results
from testbed.misbehaving import OUTAGE_MODES, outage

ROOT = Path(__file__).resolve().parents[2]

REPO = "acme/kernels"
BUDGET_S = 60.0


@dataclass(frozen=True)
class Outcome:
    mode: str
    exit_code: int
    tier: str
    requests: int
    seconds: float
    warning: str

    @property
    def ok(self) -> bool:
        return (
            self.exit_code == 0
            and self.tier == "WARN"
            and bool(self.warning)
            and self.seconds <= BUDGET_S + 5  # + the interpreter's own start
        )


def _tier(output: Path) -> str:
    lines = output.read_text().splitlines() if output.exists() else []
    for i, line in enumerate(lines):
        if line.startswith("tier<<"):
            return lines[i + 1]
    return "?"


def run_mode(mode: str, work: Path) -> Outcome:
    folder = work / mode
    folder.mkdir()
    results = folder / "results.json"
    results.write_text(make_results(repository=REPO, branch="feature", pr_number=3).to_json())
    with outage(mode) as server:
        env = {
            "PATH": "/usr/bin:/bin",
            "KERNALIN_URL": server.url,
            "KERNALIN_TOKEN": "rnx_ci_not-a-real-token",
            "GITHUB_REPOSITORY": REPO,
            "GITHUB_EVENT_NAME": "pull_request",
            "GITHUB_OUTPUT": str(folder / "output"),
            "GITHUB_STEP_SUMMARY": str(folder / "summary.md"),
        }
        argv = [sys.executable, "-m", "rnx_cli", "gate", "--from-results", str(results)]
        argv += ["--pr", "3", "--sha", "a" * 40, "--branch", "feature", "--base-branch", "main"]
        started = time.monotonic()
        done = subprocess.run(
            argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=BUDGET_S + 60
        )
        seconds = time.monotonic() - started
    warning = next(
        (
            line.split("::", 2)[-1]
            for line in done.stdout.splitlines()
            if line.startswith("::warning") and "gate server" in line
        ),
        "",
    )
    return Outcome(
        mode, done.returncode, _tier(folder / "output"), server.requests, seconds, warning
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--parallel", type=int, default=4)
    p.add_argument("--modes", help="comma-separated subset of: " + ", ".join(OUTAGE_MODES))
    args = p.parse_args(argv)
    modes = args.modes.split(",") if args.modes else list(OUTAGE_MODES)
    work = Path(tempfile.mkdtemp(prefix="rnx-action-faults-"))
    started = time.monotonic()
    with ThreadPoolExecutor(args.parallel) as pool:
        outcomes = list(pool.map(lambda m: run_mode(m, work), modes))
    print(
        "| mode | exit | tier | requests | seconds | ok | the warning's cause (cut at 120 chars) |"
    )
    print("|---|---|---|---|---|---|---|")
    for o in outcomes:
        cause = o.warning.split("not failing the build: ", 1)[-1]
        cause = cause.split("(within 60s): ", 1)[-1].replace("|", "/")[:120]
        print(
            f"| {o.mode} | {o.exit_code} | {o.tier} | {o.requests} | {o.seconds:.1f} | "
            f"{'yes' if o.ok else 'NO'} | {cause} |"
        )
    failed = [o.mode for o in outcomes if not o.ok]
    print(
        f"\n{len(outcomes)} modes, {len(outcomes) - len(failed)} gave a warning and exit 0 "
        f"within {BUDGET_S:.0f} s, {len(failed)} did not{(': ' + ', '.join(failed)) * bool(failed)}"
        f"; wall {time.monotonic() - started:.0f} s, {args.parallel} at a time"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
