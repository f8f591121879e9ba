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
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from action.annotations import BROKEN_STATUSES, annotate
from action.baseline_fetch import NotFetched, fetch_baseline, with_server_thresholds
from action.context import RunContext, read_context
from action.inputs import GateInputs, read_inputs
from action.lfs import fetch_lfs
from action.measure import (
    Measured,
    maybe_base_checkout,
    measure,
    measured_elsewhere,
    measurement_notes,
)
from action.overlay import effective_config
from action.plain_log import render
from action.publish import github_client, publish
from action.trace_upload import upload_traces
from action.upload import (
    OUTAGE_TITLES,
    Clock,
    Credential,
    Outage,
    UploadAnswer,
    oidc_token,
    upload,
    upload_body,
)
from action.workflow import Workflow
from bench_runner.adaptive import AdaptiveSampling, Baseline
from rnx.branches import branch_matches
from rnx.config import Benchmark, KernalinConfig
from rnx.errors import InvalidData, UserError
from rnx.formatting import format_headline
from rnx.schema import GateReport, Tier
from rnx_github.comment import Combined, PartResult, combine, worst


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="rnx gate",
        description="Benchmark the workloads, upload to the gate server and report; "
        "the exit code is 1 only when the gate BLOCKs in enforce mode.",
        epilog="environment: KERNALIN_URL (the gate server, e.g. https://gate.example.com), "
        "KERNALIN_TOKEN (its CI token; keep it in a masked CI secret), GITHUB_TOKEN (optional: "
        "the PR comment and commit status on GitHub). Outside GitHub Actions the report is "
        "written to this log; on GitHub to the job summary and the pull request.",
    )
    p.add_argument("--workload", action="append", help="workload file (repeatable)")
    p.add_argument("--runtimes", help="comma-separated, e.g. pytorch_eager,torch_compile")
    p.add_argument("--batch-sizes", help='comma-separated, e.g. "1,8"')
    p.add_argument("--dtypes", help="comma-separated, e.g. float32,float16")
    p.add_argument("--mode", help="enforce | soft-fail | report-only")
    p.add_argument("--config", help="kernalin.yml path (default: ./kernalin.yml if present)")
    p.add_argument("--environment", help="a name for this machine's environment")
    p.add_argument(
        "--budget",
        help="the most time to measure one workload, e.g. 3m (adaptive sampling; 0: off)",
    )
    p.add_argument("--repository", help="OWNER/NAME (default: GITHUB_REPOSITORY)")
    p.add_argument("--branch", help="the branch being gated (default: from GitHub)")
    p.add_argument("--sha", help="the commit being gated (default: GITHUB_SHA or git HEAD)")
    p.add_argument("--base-branch", help="a pull request's base branch")
    p.add_argument("--base-sha", help="a pull request's base commit (paired mode)")
    p.add_argument("--pr", type=int, help="pull request number")
    p.add_argument(
        "--results-dir",
        help="also keep here, per run, the bytes uploaded (RUN.json), the server's answer "
        "(RUN.answer.json) and its receipt (RUN.receipt)",
    )
    p.add_argument(
        "--from-results",
        action="extend",
        nargs="+",
        metavar="FILE",
        help="gate results documents measured elsewhere instead of running the harness "
        "(the workflow_run pattern for forks); their identity is replaced by this run's",
    )
    return p


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


@dataclass(frozen=True)
class NotUploaded:
    """Why a part was not sent to the gate server, and the tier that leaves it with."""

    tier: Tier
    why: str


NO_SERVER = NotUploaded(
    "WARN",
    "no gate server is set (the kernalin-url input, or KERNALIN_URL outside GitHub Actions), "
    "so there is no stored baseline to compare with (set it, or use compare: paired in "
    "kernalin.yml)",
)


def upload_target(inputs: GateInputs, config: KernalinConfig, ctx: RunContext) -> str | NotUploaded:
    """The gate server the parts go to, or why they stay here.

    gate.baseline-branches, when set, says which branches' pushes are baseline candidates: a
    run that is not for a pull request, on any other branch, is measured and checked but not
    uploaded. (What becomes a baseline the server still decides, by the token's branches.)"""
    patterns = config.gate.baseline_branches
    if (
        patterns is not None
        and not ctx.git.is_pull_request
        and not branch_matches(patterns, ctx.git.branch)
    ):
        return NotUploaded(
            "PASS",
            f"{ctx.git.branch} is not a baseline branch (gate.baseline-branches: "
            f"{', '.join(patterns) or 'none'}), so this run was measured and checked but not "
            f"uploaded",
        )
    return inputs.kernalin_url or NO_SERVER


def _broken(report: GateReport) -> bool:
    return any(c.status in BROKEN_STATUSES or c.verdict == "broken" for c in report.comparisons)


def decide(
    measured: Measured,
    answer: UploadAnswer | Outage | NotUploaded,
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
        notes=measurement_notes(measured.document),
        # A paired run's own verdict stands without the server: so does what it could not see.
        inconclusive=local.inconclusive if paired else None,
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
        # The server's answer says what its statistics could not see (the same rule,
        # rnx.verdict.inconclusive); a paired run's own verdict counts too.
        blind = answer.inconclusive or part.inconclusive
        return replace(
            part,
            tier=tier,
            reasons=reasons,
            comparisons=comparisons,
            url=answer.url,
            inconclusive=blind,
        )
    outage = answer.cause if isinstance(answer, Outage) else None
    if paired or _broken(local):
        return replace(part, outage=outage)
    if isinstance(answer, Outage):
        lead = OUTAGE_TITLES[answer.kind][1]
        return replace(part, tier="WARN", reasons=[f"{lead} ({outage})"], outage=outage)
    return replace(part, tier=answer.tier, reasons=[answer.why])


def exit_code(tier: Tier, mode: str) -> int:
    return 1 if tier == "BLOCK" and mode == "enforce" else 0


def headline(parts: list[PartResult], tier: Tier) -> str:
    """The tier, or for a PASS or WARN that could not have seen a block-sized slowdown, what
    it could not resolve (the widest of its parts)."""
    blind = [p.inconclusive.resolution for p in parts if p.inconclusive and p.tier != "BLOCK"]
    return format_headline(tier, max(blind) if blind else None)


def one_line(parts: list[PartResult], tier: Tier) -> str:
    if headline(parts, tier) != tier:
        return headline(parts, tier)
    first = next((r for p in parts for r in p.reasons), "")
    return f"{tier}: {first}" if first else tier


# ---- the steps of `rnx gate`


@dataclass(frozen=True)
class Run:
    """What this gate run works from, settled before anything is measured."""

    args: argparse.Namespace
    env: Mapping[str, str]
    root: Path
    inputs: GateInputs
    config: KernalinConfig
    ctx: RunContext


def _prepare(args: argparse.Namespace, env: Mapping[str, str], wf: Workflow, root: Path) -> Run:
    flags = ("runtimes", "batch_sizes", "dtypes", "config", "mode", "environment", "budget")
    inputs = read_inputs(
        env, root=root, workloads=args.workload, **{f: getattr(args, f) for f in flags}
    )
    for secret in (inputs.kernalin_token, inputs.github_token):
        wf.mask(secret or "")
    config = effective_config(inputs, root=root, require_benchmarks=not args.from_results)
    identity = ("repository", "branch", "sha", "base_branch", "pr")
    ctx = read_context(env, root=root, **{f: getattr(args, f) for f in identity})
    return Run(args, env, root, inputs, config, ctx)


def _adaptive(run: Run, bench: Benchmark) -> AdaptiveSampling | None:
    """Adaptive sampling for one workload: in paired mode against its own base; else against
    the stored baseline, fetched from the gate server once the environment is known (a
    server that is not set, down or old leaves the run on fixed sampling, with a note)."""
    gate = run.config.gate
    if gate.budget <= 0:
        return None
    if gate.compare == "paired":
        return AdaptiveSampling(gate, gate.budget)
    target = upload_target(run.inputs, run.config, run.ctx)
    if not isinstance(target, str):
        return None

    def baselines(environment_key: str) -> Baseline | str:
        secret = run.inputs.kernalin_token or oidc_token(run.env)
        if not secret:
            return "no kernalin-token (or OIDC token) to read the baseline with"
        found = fetch_baseline(
            url=target,
            secret=secret,
            repository=run.ctx.repository,
            branch=run.ctx.git.base_branch or run.ctx.git.branch,
            environment=environment_key,
            workload=bench.workload,
        )
        if isinstance(found, NotFetched):
            return found.why
        # The server's thresholds judge the interim verdict.
        server = None if found.gate is None else with_server_thresholds(gate, found.gate)
        return Baseline(found.documents, server)

    return AdaptiveSampling(gate, gate.budget, baselines)


def _measure_all(run: Run) -> list[Measured]:
    if run.args.from_results:
        return [measured_elsewhere(path, run.ctx, run.config) for path in run.args.from_results]
    with maybe_base_checkout(run.root, run.config, run.ctx, run.args.base_sha) as base_root:
        for b in run.config.benchmarks:  # an LFS pointer is fetched, never measured
            for root in (run.root, base_root):
                if root is not None and (root / b.workload).is_file():
                    _say_fetched(fetch_lfs(root, b.workload))
        return [
            measure(
                b,
                run.config,
                run.ctx,
                base_root=base_root,
                environment=run.inputs.environment,
                progress=sys.stderr,
                adaptive=_adaptive(run, b),
            )
            for b in run.config.benchmarks
        ]


def _say_fetched(paths: list[str]) -> None:
    if paths:
        print(f"rnx-benchmark: fetched from Git LFS: {', '.join(paths)}", file=sys.stderr)


def _upload(
    m: Measured, url: str, run: Run, wf: Workflow, clock: Clock | None
) -> UploadAnswer | Outage:
    # Per upload: the server spends an OIDC token on first use.
    credentials = _credentials(run.inputs, run.env, wf)
    bisection = run.env.get("INPUT_BISECTION", "").strip() or None
    answer = upload(m.document, url=url, credentials=credentials, clock=clock, bisection=bisection)
    if isinstance(answer, Outage):
        title, lead = OUTAGE_TITLES[answer.kind]
        wf.warning(
            f"rnx-benchmark {lead}, not failing the build: {answer.cause}",
            title=f"rnx-benchmark: {title}",
        )
    elif run.config.harness.keep_traces:
        _upload_traces(m, answer, url, run, wf)
    return answer


def _upload_traces(m: Measured, answer: UploadAnswer, url: str, run: Run, wf: Workflow) -> None:
    """The kept traces to the server beside the run, so its page offers them (failing open)."""
    from bench_runner.runner import TRACE_DIR  # where the harness kept them (cwd)

    def credential() -> Credential | None:
        found = _credentials(run.inputs, run.env, wf)
        return found[0] if found else None

    kept, problems = upload_traces(
        m.document, answer.run_id, Path(TRACE_DIR).resolve(), url=url, credential=credential
    )
    if kept:
        print(f"rnx-benchmark: kept {kept} profile trace(s) on the gate server", file=sys.stderr)
    for problem in problems:
        wf.warning(f"rnx-benchmark did not keep a profile trace on the server: {problem}")


def _gate_one(m: Measured, run: Run, wf: Workflow, clock: Clock | None) -> PartResult:
    """Keep the document if asked, upload it unless it stays here, decide and annotate."""
    target = upload_target(run.inputs, run.config, run.ctx)
    answer = target if isinstance(target, NotUploaded) else _upload(m, target, run, wf, clock)
    if run.args.results_dir:
        _keep(Path(run.args.results_dir), m, answer)
    environment = m.document.environment.name or m.document.environment.key
    part = decide(m, answer, ctx=run.ctx, config=run.config, environment=environment)
    annotate(wf, part, root=run.root, block_threshold=run.config.gate.block_threshold)
    return part


def _keep(out: Path, m: Measured, answer: UploadAnswer | Outage | NotUploaded) -> None:
    """The bytes uploaded (the ones the receipt's body_sha256 covers), and the server's answer
    and receipt when it gave them: `rnx receipt verify RUN.receipt --results RUN.json` checks
    them offline."""
    out.mkdir(parents=True, exist_ok=True)
    run_id = m.document.run_id
    (out / f"{run_id}.json").write_bytes(upload_body(m.document))
    if isinstance(answer, UploadAnswer):
        (out / f"{run_id}.answer.json").write_text(answer.model_dump_json(indent=2) + "\n")
        if answer.receipt:
            (out / f"{run_id}.receipt").write_text(answer.receipt + "\n")


def _report(run: Run, parts: list[PartResult], wf: Workflow) -> Tier:
    """The sticky comment and status on a pull request, the job summary and the outputs."""
    tier = worst([p.tier for p in parts])
    combined: Combined = combine([], parts, sha=run.ctx.git.sha)
    if run.ctx.git.pr_number and run.inputs.github_token:
        with github_client(run.ctx.api_url, run.inputs.github_token) as gh:
            published = publish(
                gh,
                repository=run.ctx.repository,
                pr=run.ctx.git.pr_number,
                sha=run.ctx.git.sha,
                status_sha=run.ctx.status_sha,
                parts=parts,
                mode=run.config.gate.mode,
                target_url=next((p.url for p in parts if p.url), run.ctx.run_url),
            )
        for warning in published.warnings:
            wf.warning(warning, title="rnx-benchmark: GitHub report")
        combined = published.combined or combined
    wf.append_summary(combined.body)
    wf.set_output("tier", tier)
    wf.set_output("run-url", next((p.url for p in parts if p.url), ""))
    wf.set_output("summary", one_line(parts, tier))
    if headline(parts, tier) != tier:
        # Before the tier's own line: a PASS that could not have seen a block-sized slowdown.
        wf.log(f"rnx-benchmark: {headline(parts, tier)}")
    return tier


def main(
    argv: list[str], *, env: Mapping[str, str] | None = None, clock: Clock | None = None
) -> int:
    args = _parser().parse_args(argv)
    env = dict(os.environ if env is None else env)
    wf = Workflow(env)
    started = time.monotonic()
    try:
        run = _prepare(args, env, wf, Path.cwd())
        setup_s = time.monotonic() - started
        measured = _measure_all(run)
    except (UserError, InvalidData) as e:
        wf.error(str(e), title="rnx-benchmark: cannot run")
        wf.append_summary(f"### ❌ rnx-benchmark could not run\n\n{e}")
        return 2
    benchmark_s = time.monotonic() - started - setup_s
    upload_started = time.monotonic()
    parts = [_gate_one(m, run, wf, clock) for m in measured]
    upload_s = time.monotonic() - upload_started
    tier = _report(run, parts, wf)
    reports_s = time.monotonic() - upload_started - upload_s
    mode = run.config.gate.mode
    if wf.on_github:
        wf.log(f"rnx-benchmark: {tier} ({mode})")
    else:
        wf.log("\n".join(render(parts, tier, mode)))
    # One parseable line: benchmarks/harness/action_overhead.py reads it to split the action's time.
    wf.log(
        f"rnx-benchmark timings: setup {setup_s:.3f}s, benchmark {benchmark_s:.3f}s, "
        f"upload {upload_s:.3f}s, reports {reports_s:.3f}s"
    )
    code = exit_code(tier, mode)
    if code:
        wf.error(
            f"rnx-benchmark BLOCKs this change: {one_line(parts, tier)}",
            title="rnx-benchmark: BLOCK",
        )
    return code
