"""`rnx bisect GOOD BAD --workload PATH`: find the commit that slowed a workload down, on the
user's own machine, without a server. Each commit tried is checked out in a git worktree and
measured in paired mode against both ends of the range; the range halves until one commit is
left, stepping around commits whose workload does not run (as `git bisect skip` does)."""

from __future__ import annotations

import argparse
import json
import math
import signal
import subprocess
import sys
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from action.git import git_output
from action.lfs import fetch_lfs
from action.paired import base_worktree
from rnx.config import Benchmark, HarnessSettings, KernalinConfig, load_config, override
from rnx.errors import UserError
from rnx.schema import GateReport

Side = Literal["good", "bad"]


@dataclass(frozen=True)
class Measured:
    """One paired measurement of a configuration: head/base time, its 90% interval."""

    ratio: float
    low: float
    high: float

    def text(self) -> str:
        return f"{self.ratio:.3f}x [{self.low:.3f}, {self.high:.3f}]"


@dataclass(frozen=True)
class Commit:
    sha: str
    subject: str
    author: str


@dataclass
class Step:
    """One commit tried: what it measured against each end, and what that made it."""

    sha: str
    verdict: Literal["good", "bad", "undecided", "skipped"]
    vs_good: Measured | None = None
    vs_bad: Measured | None = None
    processes: int = 0
    why: str = ""
    attempts: int = 1  # measurements against both ends (more when undecided at first)


@dataclass
class Outcome:
    """How the bisection ended: the culprit, or the narrowed range and why not further."""

    good: str
    bad: str
    configuration: str
    ends: Measured | None
    steps: list[Step] = field(default_factory=list)
    culprit: Commit | None = None
    range_left: list[str] = field(default_factory=list)
    why: str = ""


# A measurement of head against base at two commits, for one configuration: a Measured, or
# why the head's workload could not be measured (the commit is then skipped).
Measure = Callable[[str, str, int], "Measured | str"]


def side_of(measured: Measured, ends_ratio: float, end: Side) -> Side | None:
    """Which end a commit is credibly closer to, from its ratio against one end: its interval
    lies wholly on one side of the range's geometric midpoint (sqrt of the ends' ratio against
    the good end, its inverse against the bad end); None when the interval straddles it."""
    middle = math.sqrt(ends_ratio) if end == "good" else 1 / math.sqrt(ends_ratio)
    if measured.high < middle:
        return "good"
    if measured.low > middle:
        return "bad"
    return None


def classify(vs_good: Measured, vs_bad: Measured, ends_ratio: float) -> Side | None:
    """good or bad when at least one end decides and the other does not contradict it."""
    votes = {side_of(vs_good, ends_ratio, "good"), side_of(vs_bad, ends_ratio, "bad")} - {None}
    return votes.pop() if len(votes) == 1 else None


def _pick(lo: int, hi: int, skipped: set[int]) -> int | None:
    """The untried commit strictly between lo and hi nearest their middle (skips stepped around)."""
    middle = (lo + hi) / 2
    inside = [i for i in range(lo + 1, hi) if i not in skipped]
    return min(inside, key=lambda i: (abs(i - middle), i)) if inside else None


def bisect(
    commits: list[str],
    measure: Measure,
    *,
    ends_ratio: float,
    processes: int,
    retries: int,
    report: Callable[[Step, int], None] = lambda step, left: None,
) -> tuple[int, int, list[Step], str]:
    """Halve commits[0] (good) .. commits[-1] (bad), the bad end `ends_ratio` times the good
    end's time. Returns the last good and first bad index, the steps, and why it stopped short
    when hi - lo > 1."""
    lo, hi = 0, len(commits) - 1
    skipped: set[int] = set()
    steps: list[Step] = []
    while hi - lo > 1:
        index = _pick(lo, hi, skipped)
        if index is None:
            return lo, hi, steps, "every commit left in the range was skipped"
        step = _step(commits, index, measure, ends_ratio, processes, retries)
        steps.append(step)
        if step.verdict == "skipped":
            skipped.add(index)
        elif step.verdict == "good":
            lo = index
        elif step.verdict == "bad":
            hi = index
        report(step, hi - lo - 1)
        if step.verdict == "undecided":
            return (
                lo,
                hi,
                steps,
                (
                    f"{step.sha[:12]} measured neither credibly closer to the good end nor to the "
                    f"bad end with {step.processes} processes: {step.why}"
                ),
            )
    return lo, hi, steps, ""


def _step(
    commits: list[str],
    index: int,
    measure: Measure,
    ends_ratio: float,
    processes: int,
    retries: int,
) -> Step:
    sha = commits[index]
    last = Step(sha, "undecided")
    for attempt in range(retries + 1):
        # Undecided: measure again with twice the processes (more independent runs narrow
        # the interval most), up to the retries allowed.
        n = processes * 2**attempt
        vs_good = measure(sha, commits[0], n)
        if isinstance(vs_good, str):
            return Step(sha, "skipped", processes=n, why=vs_good, attempts=attempt + 1)
        vs_bad = measure(sha, commits[-1], n)
        if isinstance(vs_bad, str):
            return Step(sha, "skipped", processes=n, why=vs_bad, attempts=attempt + 1)
        side = classify(vs_good, vs_bad, ends_ratio)
        if side is not None:
            return Step(sha, side, vs_good, vs_bad, n, attempts=attempt + 1)
        why = f"the midpoint {math.sqrt(ends_ratio):.3f}x lies inside the intervals"
        last = Step(sha, "undecided", vs_good, vs_bad, n, why, attempts=attempt + 1)
    return last


# ---- git and the harness


def commit_range(root: Path, good: str, bad: str) -> list[str]:
    """good, then the commits from good to bad along the first-parent ancestry path, bad last."""
    good_sha = git_output(root, "rev-parse", "--verify", f"{good}^{{commit}}")
    bad_sha = git_output(root, "rev-parse", "--verify", f"{bad}^{{commit}}")
    if subprocess.run(
        ["git", "merge-base", "--is-ancestor", good_sha, bad_sha], cwd=root
    ).returncode:
        raise UserError(f"{good} is not an ancestor of {bad}: give the older, good commit first")
    between = git_output(
        root, "rev-list", "--reverse", "--first-parent", "--ancestry-path", f"{good_sha}..{bad_sha}"
    ).split()
    if not between:
        raise UserError(f"{good} and {bad} are the same commit: nothing to bisect")
    return [good_sha, *between]


def describe(root: Path, sha: str) -> Commit:
    subject, author = git_output(root, "show", "-s", "--format=%s%x00%an <%ae>", sha).split("\x00")
    return Commit(sha, subject, author)


class PairedMeasure:
    """Paired runs of one workload between commits, each checked out once in a worktree."""

    def __init__(
        self,
        root: Path,
        stack: ExitStack,
        bench: Benchmark,
        harness: HarnessSettings,
        config: KernalinConfig,
    ) -> None:
        self.root = root
        self.stack = stack  # each worktree is removed when the stack closes
        self.bench = bench
        self.harness = harness
        self.config = config
        self.trees: dict[str, Path] = {}
        self.configuration: str | None = None

    def tree(self, sha: str) -> Path:
        if sha not in self.trees:
            tree = self.stack.enter_context(base_worktree(self.root, sha))
            if (tree / self.bench.workload).is_file():
                fetch_lfs(tree, self.bench.workload)  # a pointer is fetched, never timed
            self.trees[sha] = tree
        return self.trees[sha]

    def report(self, head: str, base: str, processes: int) -> GateReport | str:
        """The paired run's local gate report, or why the head's workload could not run."""
        from action.measure import local_report
        from bench_runner import run_benchmark

        paths = [self.tree(sha) / self.bench.workload for sha in (head, base)]
        for sha, path in zip((head, base), paths, strict=True):
            if not path.is_file():
                return f"{self.bench.workload} does not exist at {sha[:12]}"
        harness = self.harness.model_copy(
            update={"processes": processes, "samples": max(self.harness.samples, processes)}
        )
        try:
            document = run_benchmark(
                self.bench.model_copy(update={"workload": str(paths[0])}),
                harness,
                base_workload=str(paths[1]),
                progress=None,
            )
        except UserError as e:
            return f"the workload did not run: {e}"
        return local_report(document, self.config)

    def choose(self, report: GateReport) -> str | None:
        """The configuration the ends' run makes worth bisecting, or None when the gate saw no
        slowdown over the whole run. Picking the most-moved of several configurations from one
        run favours noise, so the pick is only made among those the gate's own family-wise
        decision flagged (a PASS means nothing credible moved)."""
        if report.tier == "PASS":
            return None
        slower = [c for c in report.comparisons if c.verdict == "slower" and c.ratio is not None]
        return max(slower, key=lambda c: c.ratio or 0).id if slower else None

    def __call__(self, head: str, base: str, processes: int) -> Measured | str:
        report = self.report(head, base, processes)
        if isinstance(report, str):
            return report
        chosen = [c for c in report.comparisons if c.id == self.configuration]
        usable = [c for c in chosen if c.status == "ok" and c.ratio is not None]
        if not usable:
            reasons = [f"{c.reason or c.status}" for c in chosen]
            return f"{self.configuration} did not run: {'; '.join(reasons) or 'not planned'}"
        c = usable[0]
        return Measured(c.ratio or 0, c.low or 0, c.high or 0)


# ---- the command


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="rnx bisect",
        description="Find the commit between GOOD and BAD that slowed WORKLOAD down: each "
        "commit tried is checked out in a git worktree and measured in paired mode against "
        "both ends. Needs no server; exit 0 when a culprit is named, 1 when the range "
        "could only be narrowed.",
    )
    p.add_argument("good", help="a commit before the slowdown (older)")
    p.add_argument("bad", help="a commit after it (newer)")
    p.add_argument("--workload", required=True, help="the workload's path in the repository")
    p.add_argument("--configuration", help="configuration id (default: the one that moved most)")
    p.add_argument("--config", help="kernalin.yml (default: the repository's, when present)")
    p.add_argument("--samples", type=int, help="samples per configuration and side")
    p.add_argument("--processes", type=int, help="worker processes per measurement")
    p.add_argument("--time-budget", type=float, help="seconds per configuration (harness)")
    p.add_argument("--batch-sizes", help="comma list, e.g. 1,8")
    p.add_argument("--runtimes", help="comma list, e.g. pytorch_eager")
    p.add_argument(
        "--retries",
        type=int,
        default=1,
        help="re-measurements of an undecided commit, each with twice the processes (1)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object at the end")
    return p


def run(args: argparse.Namespace, root: Path, out: Any = sys.stdout) -> Outcome:
    """The bisection the command line asks for, each step printed to `out` as it ends."""
    config = load_config(
        args.config or (root / "kernalin.yml" if (root / "kernalin.yml").is_file() else None)
    )
    harness = override(
        config.harness,
        {"samples": args.samples, "processes": args.processes, "time-budget": args.time_budget},
        source="command line",
        key_prefix="--",
    ).model_copy(update={"profile": False})  # profiles explain; bisection only needs times
    bench = override(
        Benchmark(workload=args.workload),
        {"batch-sizes": args.batch_sizes, "runtimes": args.runtimes},
        source="command line",
        key_prefix="--",
    )
    commits = commit_range(root, args.good, args.bad)
    with ExitStack() as stack:
        measure = PairedMeasure(root, stack, bench, harness, config)
        report = measure.report(commits[-1], commits[0], harness.processes)
        if isinstance(report, str):
            raise UserError(f"could not measure {args.bad} against {args.good}: {report}")
        measure.configuration = args.configuration or measure.choose(report)
        found = [c for c in report.comparisons if c.id == measure.configuration]
        if measure.configuration is None or not found or found[0].ratio is None:
            outcome = Outcome(commits[0], commits[-1], args.configuration or "", None)
            outcome.why = (
                _nothing_to_find(report, args.bad, args.good)
                if measure.configuration is None
                else f"{measure.configuration} was not measured at both ends"
            )
            return outcome
        c = found[0]
        ends = Measured(c.ratio or 0, c.low or 0, c.high or 0)
        outcome = Outcome(commits[0], commits[-1], measure.configuration, ends)
        print(
            f"rnx bisect: {len(commits) - 1} commits, {outcome.configuration}: bad against "
            f"good {ends.text()}",
            file=out,
            flush=True,
        )
        if ends.low <= 1:
            outcome.why = "the bad end is not credibly slower than the good end: nothing to find"
            return outcome
        lo, hi, outcome.steps, outcome.why = bisect(
            commits,
            measure,
            ends_ratio=ends.ratio,
            processes=harness.processes,
            retries=args.retries,
            report=lambda step, left: print(_step_line(step, left), file=out, flush=True),
        )
    if hi - lo == 1:
        outcome.culprit = describe(root, commits[hi])
    else:
        outcome.range_left = commits[lo + 1 : hi + 1]
    return outcome


def _nothing_to_find(report: GateReport, bad: str, good: str) -> str:
    """Why the ends' run stops the bisection, naming what moved most for `--configuration`."""
    why = f"the gate finds no credible slowdown of {bad} against {good} ({report.tier})"
    moved = [c for c in report.comparisons if c.ratio is not None and c.low is not None]
    if moved:
        c = max(moved, key=lambda c: c.ratio or 0)
        why += (
            f"; the most moved, {c.id} at {c.ratio:.3f}x [{c.low:.3f}, {c.high or 0:.3f}], "
            f"is followed anyway with --configuration {c.id}"
        )
    return why + ": nothing to find"


def _step_line(step: Step, left: int) -> str:
    if step.verdict == "skipped":
        return f"  {step.sha[:12]}  skipped: {step.why}"
    vs_good = step.vs_good.text() if step.vs_good else "-"
    vs_bad = step.vs_bad.text() if step.vs_bad else "-"
    return (
        f"  {step.sha[:12]}  vs good {vs_good}  vs bad {vs_bad}  "
        f"-> {step.verdict} ({step.processes} processes; commits left: {left})"
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(sys.argv[1:] if argv is None else argv)
    # Stopped by a CI's timeout or a supervisor: unwind, so every worktree is removed.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if args.retries < 0:
        raise UserError("--retries must be 0 or more")
    root = Path(git_output(Path.cwd(), "rev-parse", "--show-toplevel")).resolve()
    outcome = run(args, root)
    if args.json:
        print(json.dumps(asdict(outcome)))
    elif outcome.culprit:
        c = outcome.culprit
        print(f"rnx bisect: the culprit is {c.sha} {c.subject!r} by {c.author}")
    else:
        print(
            f"rnx bisect: no single commit: {outcome.why}"
            + (
                f"; the first bad commit is among {' '.join(s[:12] for s in outcome.range_left)}"
                if outcome.range_left
                else ""
            )
        )
    return 0 if outcome.culprit else 1
