"""`rnx gate`: benchmark, upload, report and decide the exit code; what the action runs in CI.

Flow: inputs + kernalin.yml -> harness (per workload) -> local verdict (paired mode, or a
broken runtime) -> upload to the gate server (fail-open) -> job summary, annotations, outputs,
sticky PR comment and commit status -> exit code from the tier and the mode.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TextIO

from action.annotations import BROKEN_STATUSES, annotate
from action.context import RunContext, read_context
from action.inputs import GateInputs, read_inputs
from action.overlay import effective_config
from action.paired import base_worktree
from action.publish import github_client, publish
from action.upload import Clock, Credential, Outage, UploadAnswer, oidc_token, upload
from action.workflow import Workflow
from rnx.config import Benchmark, KernalinConfig
from rnx.errors import UserError
from rnx.schema import GateReport, ResultsDocument, Tier, load_results
from rnx_github.comment import PartResult, combine, worst


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="rnx gate",
        description="Benchmark the workloads, upload to the gate server and report; "
        "the exit code is 1 only when the gate BLOCKs in enforce mode.",
    )
    p.add_argument("--workload", action="append", help="workload file (repeatable)")
    p.add_argument("--runtimes", help="comma-separated, e.g. pytorch_eager,torch_compile")
    p.add_argument("--batch-sizes", help='comma-separated, e.g. "1,8"')
    p.add_argument("--dtypes", help="comma-separated, e.g. float32,float16")
    p.add_argument("--mode", help="enforce | soft-fail | report-only")
    p.add_argument("--config", help="kernalin.yml path (default: ./kernalin.yml if present)")
    p.add_argument("--environment", help="a name for this machine's environment")
    p.add_argument("--repository", help="OWNER/NAME (default: GITHUB_REPOSITORY)")
    p.add_argument("--branch", help="the branch being gated (default: from GitHub)")
    p.add_argument("--sha", help="the commit being gated (default: GITHUB_SHA or git HEAD)")
    p.add_argument("--base-branch", help="a pull request's base branch")
    p.add_argument("--base-sha", help="a pull request's base commit (paired mode)")
    p.add_argument("--pr", type=int, help="pull request number")
    p.add_argument("--results-dir", help="also write each results document here")
    p.add_argument(
        "--from-results",
        action="extend",
        nargs="+",
        metavar="FILE",
        help="gate results documents measured elsewhere instead of running the harness "
        "(the workflow_run pattern for forks); their identity is replaced by this run's",
    )
    return p


@dataclass(frozen=True)
class Measured:
    benchmark: Benchmark
    document: ResultsDocument
    local: GateReport


def _credentials(inputs: GateInputs, env: Mapping[str, str], wf: Workflow) -> list[Credential]:
    creds = []
    oidc = oidc_token(env)
    if oidc:
        wf.mask(oidc)

        def renew() -> str | None:
            # Each retry needs a fresh OIDC token: the server refuses a replayed one.
            fresh = oidc_token(env)
            if fresh:
                wf.mask(fresh)
            return fresh

        creds.append(Credential("oidc", oidc, renew))
    if inputs.kernalin_token:
        creds.append(Credential("token", inputs.kernalin_token))
    return creds


def local_report(document: ResultsDocument, config: KernalinConfig) -> GateReport:
    """What this job can decide without the server: a paired verdict, and broken runtimes."""
    from rnx.verdict import evaluate

    return evaluate(document, [], config.gate)


def _broken(report: GateReport) -> bool:
    return any(c.status in BROKEN_STATUSES or c.verdict == "broken" for c in report.comparisons)


def decide(
    measured: Measured,
    answer: UploadAnswer | Outage | None,
    *,
    ctx: RunContext,
    config: KernalinConfig,
    environment: str,
) -> PartResult:
    local = measured.local
    paired = measured.document.settings.mode == "paired"
    part = PartResult(
        workload=measured.benchmark.workload,
        job=ctx.job,
        environment=environment,
        tier=local.tier,
        reasons=list(local.reasons),
        comparisons=list(local.comparisons),
        compare="paired" if paired else "baseline",
        mode=config.gate.mode,
    )
    if isinstance(answer, UploadAnswer):
        tier: Tier = answer.tier
        # A runtime broken here blocks whatever the server says; a paired verdict counts too.
        if paired or _broken(local):
            tier = worst([tier, local.tier])
        reasons = list(answer.reasons)
        if tier != answer.tier:
            reasons = list(local.reasons) + reasons
        comparisons = list(answer.comparisons) or part.comparisons
        return replace(part, tier=tier, reasons=reasons, comparisons=comparisons, url=answer.url)
    outage = answer.cause if isinstance(answer, Outage) else None
    if paired or _broken(local):
        return replace(part, outage=outage)
    why = (
        f"gate server not reached ({outage})"
        if outage
        else "no kernalin-url is set, so there is no stored baseline to compare with "
        "(set kernalin-url, or use compare: paired in kernalin.yml)"
    )
    return replace(part, tier="WARN", reasons=[why], outage=outage)


def exit_code(tier: Tier, mode: str) -> int:
    return 1 if tier == "BLOCK" and mode == "enforce" else 0


@contextmanager
def _maybe_base_checkout(
    root: Path, config: KernalinConfig, ctx: RunContext, base_sha: str | None
) -> Iterator[Path | None]:
    # A push has no base to pair with: it is measured alone and, uploaded, becomes a baseline.
    if config.gate.compare != "paired" or not ctx.git.is_pull_request:
        yield None
        return
    sha = base_sha or ctx.git.base_sha
    if not sha:
        raise UserError(
            "compare: paired needs the pull request's base commit; GitHub's pull_request "
            "event has it; elsewhere pass --base-sha SHA (or use compare: baseline)"
        )
    with base_worktree(root, sha) as path:
        yield path


def measure(
    bench: Benchmark,
    config: KernalinConfig,
    ctx: RunContext,
    *,
    base_root: Path | None,
    environment: str | None,
    progress: TextIO,
) -> Measured:
    from bench_runner import run_benchmark

    base_workload = None
    if base_root is not None and (base_root / bench.workload).is_file():
        base_workload = str(base_root / bench.workload)
    document = run_benchmark(
        bench,
        config.harness,
        repository=ctx.repository,
        git=ctx.git,
        base_workload=base_workload,
        environment_name=environment,
        progress=progress,
    )
    return Measured(bench, document, local_report(document, config))


def _measured_elsewhere(path: str, ctx: RunContext, config: KernalinConfig) -> Measured:
    """A document from an untrusted job (a fork's PR): its numbers are gated, but who it is
    for (repository, commit, PR) comes from this trusted run, never from the file."""
    document = load_results(path)
    document = document.model_copy(update={"repository": ctx.repository, "git": ctx.git})
    bench = Benchmark(workload=document.workload.path)
    return Measured(bench, document, local_report(document, config))


def one_line(parts: list[PartResult], tier: Tier) -> str:
    first = next((r for p in parts for r in p.reasons), "")
    return f"{tier}: {first}" if first else tier


def main(
    argv: list[str], *, env: Mapping[str, str] | None = None, clock: Clock | None = None
) -> int:
    args = _parser().parse_args(argv)
    env = dict(os.environ if env is None else env)
    wf = Workflow(env)
    root = Path.cwd()
    started = time.monotonic()
    try:
        inputs = read_inputs(
            env,
            root=root,
            workloads=args.workload,
            runtimes=args.runtimes,
            batch_sizes=args.batch_sizes,
            dtypes=args.dtypes,
            config=args.config,
            mode=args.mode,
            environment=args.environment,
        )
        for secret in (inputs.kernalin_token, inputs.github_token):
            wf.mask(secret or "")
        config = effective_config(inputs, root=root, require_benchmarks=not args.from_results)
        ctx = read_context(
            env,
            root=root,
            repository=args.repository,
            branch=args.branch,
            sha=args.sha,
            base_branch=args.base_branch,
            pr=args.pr,
        )
        setup_s = time.monotonic() - started
        if args.from_results:
            measured = [_measured_elsewhere(path, ctx, config) for path in args.from_results]
        else:
            with _maybe_base_checkout(root, config, ctx, args.base_sha) as base_root:
                measured = [
                    measure(
                        b,
                        config,
                        ctx,
                        base_root=base_root,
                        environment=inputs.environment,
                        progress=sys.stderr,
                    )
                    for b in config.benchmarks
                ]
    except UserError as e:
        wf.error(str(e), title="rnx-benchmark: cannot run")
        wf.append_summary(f"### ❌ rnx-benchmark could not run\n\n{e}")
        return 2
    benchmark_s = time.monotonic() - started - setup_s
    upload_started = time.monotonic()

    parts = []
    for m in measured:
        if args.results_dir:
            out = Path(args.results_dir)
            out.mkdir(parents=True, exist_ok=True)
            (out / f"{m.document.run_id}.json").write_text(m.document.to_json(indent=2))
        answer: UploadAnswer | Outage | None = None
        if inputs.kernalin_url:
            # Per upload: the server spends an OIDC token on first use.
            credentials = _credentials(inputs, env, wf)
            answer = upload(
                m.document, url=inputs.kernalin_url, credentials=credentials, clock=clock
            )
            if isinstance(answer, Outage):
                wf.warning(
                    f"rnx-benchmark did not reach the gate server, not failing the build: "
                    f"{answer.cause}",
                    title="rnx-benchmark: gate server unavailable",
                )
        environment = m.document.environment.name or m.document.environment.key
        part = decide(m, answer, ctx=ctx, config=config, environment=environment)
        parts.append(part)
        annotate(wf, part, root=root, block_threshold=config.gate.block_threshold)

    upload_s = time.monotonic() - upload_started
    tier = worst([p.tier for p in parts])
    combined = combine([], parts, sha=ctx.git.sha)
    if ctx.git.pr_number and inputs.github_token:
        with github_client(ctx.api_url, inputs.github_token) as gh:
            published = publish(
                gh,
                repository=ctx.repository,
                pr=ctx.git.pr_number,
                sha=ctx.git.sha,
                status_sha=ctx.status_sha,
                parts=parts,
                mode=config.gate.mode,
                target_url=next((p.url for p in parts if p.url), ctx.run_url),
            )
        for warning in published.warnings:
            wf.warning(warning, title="rnx-benchmark: GitHub report")
        combined = published.combined or combined

    wf.append_summary(combined.body)
    wf.set_output("tier", tier)
    wf.set_output("run-url", next((p.url for p in parts if p.url), ""))
    wf.set_output("summary", one_line(parts, tier))
    reports_s = time.monotonic() - upload_started - upload_s
    wf.log(f"rnx-benchmark: {tier} ({config.gate.mode})")
    # One parseable line: benchmarks/action_overhead.py reads it to split the action's time.
    wf.log(
        f"rnx-benchmark timings: setup {setup_s:.3f}s, benchmark {benchmark_s:.3f}s, "
        f"upload {upload_s:.3f}s, reports {reports_s:.3f}s"
    )
    code = exit_code(tier, config.gate.mode)
    if code:
        wf.error(
            f"rnx-benchmark BLOCKs this change: {one_line(parts, tier)}",
            title="rnx-benchmark: BLOCK",
        )
    return code
