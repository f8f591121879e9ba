"""`rnx check`: the gate's pre-flight on a developer's (or an agent's) machine: the working
tree's workloads gated as CI would gate them, exit code as in CI. Against the stored baseline
when the gate server (KERNALIN_URL, KERNALIN_TOKEN) has one for this machine's environment and
the base branch, as the server would gate an upload; else in paired mode against the
merge-base with the base branch, checked out in a git worktree. Each workload says which and
why."""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from action.baseline_fetch import NotFetched, with_server_thresholds
from action.gate import exit_code
from action.git import git_output
from action.paired import base_worktree
from rnx.config import Benchmark, KernalinConfig, load_config, override
from rnx.errors import UserError
from rnx.schema import GateReport, Tier
from rnx_cli.compare import format_table
from rnx_cli.stored_baseline import read_stored_baseline

_WORST = {"PASS": 0, "WARN": 1, "BLOCK": 2}


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="rnx check",
        description="Benchmark the working tree against the stored baseline of the base "
        "branch when the gate server (KERNALIN_URL, KERNALIN_TOKEN) has one for this machine, "
        "else against the merge-base (paired mode, in a git worktree), and print the verdict; "
        "exit 1 when the gate would BLOCK in enforce mode, as in CI.",
    )
    p.add_argument("workloads", nargs="*", help="workload paths (default: kernalin.yml's)")
    p.add_argument("--base", default="main", help="the branch a PR would merge into (main)")
    p.add_argument("--config", help="kernalin.yml (default: the repository's, when present)")
    p.add_argument("--samples", type=int, help="samples per configuration and side")
    p.add_argument("--processes", type=int, help="worker processes the samples are spread over")
    p.add_argument("--time-budget", type=float, help="seconds per configuration (harness)")
    p.add_argument("--batch-sizes", help="comma list, e.g. 1,8")
    p.add_argument("--runtimes", help="comma list, e.g. pytorch_eager")
    p.add_argument(
        "--against",
        choices=("auto", "stored", "paired"),
        default="auto",
        help="auto: the stored baseline where the server has one, else paired (default); "
        "stored: the stored baseline or an error; paired: the merge-base",
    )
    p.add_argument(
        "--repository",
        help="OWNER/NAME on the gate server (default: GITHUB_REPOSITORY, else the CI token's)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object, not a table")
    return p


def merge_base(root: Path, base: str) -> str:
    """The commit the working tree's branch forked from `base` (origin/<base> when only the
    remote branch is there)."""
    for ref in (base, f"origin/{base}"):
        found = subprocess.run(
            ["git", "merge-base", "HEAD", ref], cwd=root, capture_output=True, text=True
        )
        if found.returncode == 0:
            return found.stdout.strip()
    raise UserError(f"no merge-base of HEAD and {base!r}; name the base branch with --base")


def _benchmarks(args: argparse.Namespace, config: KernalinConfig, root: Path) -> list[Benchmark]:
    chosen = [Benchmark(workload=w) for w in args.workloads] or list(config.benchmarks)
    if not chosen:
        raise UserError(
            "no workloads: name them (rnx check kernels/attention.py) or list them "
            "under benchmarks: in kernalin.yml"
        )
    changes = {"batch-sizes": args.batch_sizes, "runtimes": args.runtimes}
    found = []
    for bench in chosen:
        path = (root / bench.workload).resolve()
        if not path.is_relative_to(root) or not path.is_file():
            raise UserError(f"{bench.workload}: not a file inside the repository {root}")
        found.append(override(bench, changes, source="command line", key_prefix="--"))
    return found


def check(args: argparse.Namespace, root: Path) -> tuple[Tier, str, list[dict[str, Any]]]:
    """Each workload measured and gated: the worst tier, the gate's mode, and per workload
    the verdict and what it was gated against."""
    config = load_config(
        args.config or (root / "kernalin.yml" if (root / "kernalin.yml").is_file() else None)
    )
    harness = override(
        config.harness,
        {"samples": args.samples, "processes": args.processes, "time-budget": args.time_budget},
        source="command line",
        key_prefix="--",
    )
    benchmarks = _benchmarks(args, config, root)
    results = []
    paired: list[tuple[Benchmark, str]] = []
    for bench in benchmarks:
        stored = _against_stored(args, config, harness, root, bench)
        if isinstance(stored, dict):
            results.append(stored)
        else:
            paired.append((bench, stored))
    if paired:
        results += _against_merge_base(args, config, harness, root, paired)
    tier = max((r["report"].tier for r in results), key=_WORST.__getitem__)
    return tier, config.gate.mode, results


def _against_stored(
    args: argparse.Namespace,
    config: KernalinConfig,
    harness: Any,
    root: Path,
    bench: Benchmark,
) -> dict[str, Any] | str:
    """The workload gated against the stored baseline, or why not (then it goes paired)."""
    if args.against == "paired":
        return "--against paired"
    from bench_runner import run_benchmark
    from bench_runner.environment import collect_environment
    from rnx.verdict import evaluate

    environment = collect_environment()
    found = read_stored_baseline(
        os.environ,
        repository=args.repository or os.environ.get("GITHUB_REPOSITORY") or None,
        branch=args.base,
        environment=environment.key,
        workload=bench.workload,
    )
    if isinstance(found, NotFetched) or not found.documents:
        why = (
            found.why
            if isinstance(found, NotFetched)
            else f"the server has no baseline of {args.base} for this environment yet"
        )
        if args.against == "stored":
            raise UserError(f"{bench.workload}: no stored baseline to gate against: {why}")
        return why
    against = (
        f"the stored baseline: {len(found.documents)} run(s) of {args.base} in {environment.key}"
    )
    print(f"rnx check: {bench.workload} against {against}", file=sys.stderr, flush=True)
    document = run_benchmark(
        bench.model_copy(update={"workload": str(root / bench.workload)}),
        harness,
        environment=environment,
        progress=sys.stderr,
    )
    report = evaluate(document, found.documents, with_server_thresholds(config.gate, found.gate))
    return {"workload": bench.workload, "against": against, "report": report}


def _against_merge_base(
    args: argparse.Namespace,
    config: KernalinConfig,
    harness: Any,
    root: Path,
    paired: list[tuple[Benchmark, str]],
) -> list[dict[str, Any]]:
    from action.measure import local_report
    from bench_runner import run_benchmark

    sha = merge_base(root, args.base)
    results: list[dict[str, Any]] = []
    with base_worktree(root, sha) as base_root:
        for bench, why in paired:
            base_file = base_root / bench.workload
            against = f"the merge-base {sha[:12]} in paired mode ({why})"
            print(f"rnx check: {bench.workload} against {against}", file=sys.stderr, flush=True)
            document = run_benchmark(
                bench.model_copy(update={"workload": str(root / bench.workload)}),
                harness,
                base_workload=str(base_file) if base_file.is_file() else None,
                progress=sys.stderr,
            )
            report = local_report(document, config)
            results.append({"workload": bench.workload, "against": against, "report": report})
    return results


def _shown(report: GateReport) -> str:
    # The table carries the reasons; a run with nothing compared has only reasons.
    if report.comparisons:
        return format_table(report)
    return "\n".join(f"- {reason}" for reason in report.reasons)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(sys.argv[1:] if argv is None else argv)
    # Stopped (an agent's budget spent, Ctrl-C's cousin from a supervisor): unwind, so the
    # base worktree is removed and the harness's workers are stopped.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    root = Path(git_output(Path.cwd(), "rev-parse", "--show-toplevel")).resolve()
    tier, mode, results = check(args, root)
    code = exit_code(tier, mode)
    if args.json:
        print(
            json.dumps(
                {
                    "tier": tier,
                    "mode": mode,
                    "exit_code": code,
                    "workloads": [
                        {
                            "workload": r["workload"],
                            "against": r["against"],
                            **json.loads(r["report"].model_dump_json()),
                        }
                        for r in results
                    ],
                }
            )
        )
        return code
    for r in results:
        print(f"{r['workload']}: {r['report'].tier} (against {r['against']})")
        print(f"{_shown(r['report'])}\n")
    print(f"rnx check: {tier} (gate.mode {mode}: exit {code}, as CI would)")
    return code
