"""Unchanged pull requests through the real gate: how many PASS?

Run `python -m benchmarks.quality.live_gate [--prs 10] [--pushes 3] [--compare baseline|paired]
[--budgets 0,3m]`. It starts `rnx serve` on loopback (SQLite in .live-gate/), creates a CI token,
and runs `rnx gate` as CI would, each a process of its own, with the product's defaults
(kernalin.yml sets only the benchmark, and `compare` when paired): `--pushes` pushes to main
become the baseline history, then `--prs` pull requests that leave the kernel unchanged and one
that makes it twice as slow. Prints each verdict, how long it took and how many processes it
measured (adaptive sampling adds some; docs/harness.md), then the PASS rate.
The kernel and the server's helpers are `make demo`'s (rnx_cli/demo.py).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from rnx_cli.demo import (
    FAST,
    REPOSITORY,
    SLOW,
    _clean_env,
    _commit,
    _create_token,
    _git,
    _outputs,
    _rnx,
    _serve,
)

WORKLOAD = "kernels/linear_relu.py"


def _config(compare: str, runtimes: str, batch_sizes: str) -> str:
    lines = ["version: 1"]
    if compare == "paired":
        lines += ["gate:", "  compare: paired"]
    lines += [
        "benchmarks:",
        f"  - workload: {WORKLOAD}",
        f"    runtimes: [{runtimes}]",
        f"    batch-sizes: [{batch_sizes}]",
        "    dtypes: [float32]",
    ]
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class Gated:
    tier: str
    summary: str
    wall_s: float
    processes: int  # worker processes per side, adaptive sampling's included
    notes: list[str]  # the harness's notes on fixed or adaptive sampling


def _gate(repo: Path, work: Path, flags: list[str], server: str, token: str, budget: str) -> Gated:
    output, results = work / "output.txt", work / "results"
    output.unlink(missing_ok=True)
    shutil.rmtree(results, ignore_errors=True)
    env = _clean_env(
        KERNALIN_URL=server,
        KERNALIN_TOKEN=token,
        GITHUB_OUTPUT=str(output),
        GITHUB_STEP_SUMMARY=str(work / "summary.md"),
        RNX_THREADS="1",
    )
    started = time.monotonic()
    argv = ["gate", "--repository", REPOSITORY, "--budget", budget, "--results-dir", str(results)]
    done = _rnx(*argv, *flags, cwd=repo, env=env)
    wall = time.monotonic() - started
    if done.returncode not in (0, 1):
        raise RuntimeError(f"rnx gate failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    out = _outputs(output)
    docs = [json.loads(p.read_text()) for p in results.glob("*.json")]
    processes = docs[0]["settings"]["processes"] if docs else 0
    notes = [
        line.removeprefix("[note] ")
        for line in done.stderr.splitlines()
        if "sampling" in line and line.startswith("[note]")
    ]
    return Gated(out.get("tier", "?"), out.get("summary", ""), wall, processes, notes)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.quality.live_gate", description=__doc__)
    p.add_argument("--prs", type=int, default=10, help="unchanged pull requests")
    p.add_argument("--pushes", type=int, default=3, help="pushes to main before them")
    p.add_argument("--compare", choices=("baseline", "paired"), default="baseline")
    p.add_argument(
        "--budgets",
        default="3m",
        help="rnx gate --budget, comma-separated (0: fixed sampling): each pull request is "
        "gated once per budget, back to back, so the budgets see the same machine",
    )
    # Issue 13 saw 5 of 5 unchanged pull requests WARN with these (and 2 pushes of baseline).
    p.add_argument("--runtimes", default="pytorch_eager, torch_compile")
    p.add_argument("--batch-sizes", default="1, 8")
    args = p.parse_args(argv)
    budgets = [b.strip() for b in args.budgets.split(",") if b.strip()]

    work = Path(".live-gate").resolve()
    shutil.rmtree(work, ignore_errors=True)
    repo = work / "repo"
    (repo / "kernels").mkdir(parents=True)
    (repo / "kernalin.yml").write_text(_config(args.compare, args.runtimes, args.batch_sizes))
    _git(repo, "init", "-q", "-b", "main")
    database_url = f"sqlite:///{work / 'gate.db'}"
    print(
        f"{args.pushes} pushes to main, {args.prs} unchanged pull requests and one 2x slower, "
        f"compare: {args.compare}, budgets {', '.join(budgets)}; runtimes {args.runtimes}, "
        f"batch sizes {args.batch_sizes}, float32, product defaults otherwise"
    )
    tiers: dict[str, list[str]] = {b: [] for b in budgets}
    walls: dict[str, list[float]] = {b: [] for b in budgets}
    slow_tier: dict[str, str] = {}
    # The server's defaults: not the demo's wider band of equivalence.
    with _serve(database_url, work, server_env={}) as url:
        token = _create_token(work, database_url)
        base = ""
        for i in range(args.pushes):
            base = _commit(repo, FAST, f"push {i + 1}")
            got = _gate(repo, work, ["--branch", "main", "--sha", base], url, token, budgets[0])
            print(f"push {i + 1}: {got.tier} in {got.wall_s:.0f}s, {got.processes} processes")
        for n in range(1, args.prs + 2):
            slow = n == args.prs + 1
            _git(repo, "checkout", "-q", "-B", f"pr-{n}", base)
            sha = _commit(repo, SLOW if slow else FAST, f"PR {n}")
            flags = ["--branch", f"pr-{n}", "--sha", sha, "--pr", str(n)]
            flags += ["--base-branch", "main", "--base-sha", base]
            for budget in budgets:
                got = _gate(repo, work, flags, url, token, budget)
                what = "2x slower" if slow else "unchanged"
                print(
                    f"PR {n} ({what}), budget {budget}: {got.tier} in {got.wall_s:.0f}s, "
                    f"{got.processes} processes; {got.summary[:160]}"
                )
                for note in got.notes:
                    print(f"    {note[:200]}")
                if slow:
                    slow_tier[budget] = got.tier
                else:
                    tiers[budget].append(got.tier)
                    walls[budget].append(got.wall_s)
            _git(repo, "checkout", "-q", "main")
    print()
    for budget in budgets:
        got_tiers = tiers[budget]
        mean_wall = sum(walls[budget]) / max(len(walls[budget]), 1)
        print(
            f"budget {budget}: unchanged pull requests {got_tiers.count('PASS')} of "
            f"{len(got_tiers)} PASS ({got_tiers.count('WARN')} WARN, "
            f"{got_tiers.count('BLOCK')} BLOCK), {mean_wall:.0f}s each on average; "
            f"the 2x slower one: {slow_tier.get(budget, '?')}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
