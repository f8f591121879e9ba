"""How well are change points found? Histories built from the recorded timing corpora, with
injected steps and drifts, scored for stats.detect and for a plain rule users know.

Run `python -m benchmarks.quality.changepoint_quality` (the three corpora, a few minutes) or
`--quick`
(corpus Q only, few histories: a smoke test). Each history point is one run made the way the
harness makes one: `--processes` (3) separate processes of the corpus, each `--samples` (10)
consecutive samples of one kernel from a random start, so a history has the corpus's real
process-to-process and run-to-run noise (a third of its processes ran beside a CPU hog). Runs are
drawn independently: a history has no slow seasons, which real runners may have. Every sample
time of a run after an injected change is multiplied by the change's factor, and the run is
summarised by stats.run_location, as the server will summarise a stored run.

After every run stats.detect is called as the server calls it: on the newest `--window` runs,
with the change points it reported before as `known`. A change counts as found when a change
point slower than 1 is reported within 2 runs of where it happened, in time (a revert: faster,
and ours must say that it undoes the step). The plain rule is the one of PyTorch's regression
report: the last 2 runs are both more than 10% slower (or both faster) than the median of the
10 runs before them; it fires when that becomes true, on the same run locations. It is also
scored with 5% instead of 10%. See docs/statistics.md#change-points.
"""

from __future__ import annotations

import argparse
import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

import stats
from stats.bootstrap import LOW, point_location
from stats.changepoints import ChangePoint, KnownChange

ROOT = Path(__file__).resolve().parents[2]
CORPORA = {
    "Q": ROOT / "benchmarks" / "data" / "corpus-quiet.npz",
    "A": ROOT / "benchmarks" / "data" / "corpus.npz",
    "B": ROOT / "benchmarks" / "data" / "corpus-contiguous.npz",
}
NEAR = 2  # a reported change within this many runs of the injected one counts as finding it
PLAIN_THRESHOLDS = (0.10, 0.05)  # PyTorch report's 10%, and a tighter variant
PLAIN_LAST = 2
PLAIN_TRAILING = 10
OURS = "ours"
AA = "unchanged"  # the name of the histories without any change
CALL_SECONDS: list[float] = []  # CPU time of every detect call in the last measure()


# ---------------------------------------------------------------- runs from a corpus


class Corpus:
    """Unchanged timings of one recorded corpus: per job, kernel, block and variant 30 rounds."""

    def __init__(self, path: Path, processes: int, samples: int, location: str = "band") -> None:
        with np.load(path) as z:
            times = z["data"] / z["reps"][:, :, None, None, None]
        # Variants 0 and 1 of every block time the kernel itself (variant 2 adds busy work), so
        # each job has 16 unchanged 30-round stretches per kernel.
        self.times = times[..., :2]
        self.jobs, self.kernels, self.blocks, self.rounds, _ = self.times.shape
        self.processes = processes
        self.samples = samples
        self.location = location
        if processes > self.jobs or samples > self.rounds:
            raise SystemExit(f"{path} has {self.jobs} jobs of {self.rounds} rounds; ask for less")

    def run(self, kernel: int, factor: float, rng: np.random.Generator) -> float:
        """One run: `processes` distinct jobs, each a random stretch of `samples` rounds."""
        groups = []
        for job in rng.choice(self.jobs, size=self.processes, replace=False):
            block, variant = rng.integers(self.blocks), rng.integers(2)
            start = rng.integers(0, self.rounds - self.samples + 1)
            stretch = self.times[job, kernel, block, start : start + self.samples, variant]
            groups.append(stretch * factor)
        if self.location == "mean":  # the plain mean of the processes' band means, to compare
            return float(np.mean([point_location([np.log(g)], LOW) for g in groups]))
        return stats.run_location(groups)


# ---------------------------------------------------------------- the two detectors, run by run


@dataclass
class Tracker:
    """What the server does after every stored run: detect on the newest `window` runs, with
    the change points reported so far as known, and remember the new ones."""

    window: int
    p_value: float
    runs: list[float] = field(default_factory=list)
    reported: list[tuple[int, ChangePoint]] = field(default_factory=list)  # (absolute after, cp)
    seconds: list[float] = field(default_factory=list)  # CPU time of each detect call

    def add(self, run: float) -> list[tuple[int, ChangePoint]]:
        self.runs.append(run)
        start = max(0, len(self.runs) - self.window)
        inside = [(a - start, cp) for a, cp in self.reported if a > start]
        before = [(a - start, cp) for a, cp in self.reported if a <= start][-1:]
        known = [KnownChange(a, cp.ratio, cp.low, cp.high, key=cp) for a, cp in before + inside]
        started = time.process_time()
        new = stats.detect(self.runs[start:], known=known, p_value=self.p_value)
        self.seconds.append(time.process_time() - started)
        found = [(cp.after + start, cp) for cp in new]
        self.reported = sorted(self.reported + found, key=lambda x: x[0])
        return found


@dataclass
class PlainRule:
    """The last PLAIN_LAST runs all beyond `threshold` of the median of the PLAIN_TRAILING runs
    before them, both slower or both faster; fires once when that becomes true."""

    threshold: float
    locations: list[float] = field(default_factory=list)
    firing: bool = False

    def add(self, run: float) -> list[tuple[int, float]]:
        """What fired with this run: (index of the first run after the change, ratio)."""
        self.locations.append(run)
        n = len(self.locations)
        if n < PLAIN_LAST + PLAIN_TRAILING:
            return []
        last = np.array(self.locations[-PLAIN_LAST:])
        median = float(np.median(self.locations[-PLAIN_LAST - PLAIN_TRAILING : -PLAIN_LAST]))
        bound = math.log1p(self.threshold)
        beyond = bool(np.all(last - median > bound) or np.all(median - last > bound))
        fired = beyond and not self.firing
        self.firing = beyond
        return [(n - PLAIN_LAST, math.exp(float(np.mean(last)) - median))] if fired else []


# ---------------------------------------------------------------- scenarios


@dataclass(frozen=True)
class Scenario:
    """A history: run i's times are multiplied by factors[i]; `changes` are the runs where the
    typical time changed (the first changed run) that a detector should find."""

    name: str
    factors: np.ndarray
    changes: tuple[int, ...]
    within: int  # found when reported at most this many runs after the last change (inclusive)
    reverted: bool = False  # the last change takes the first one back


def _pre(rng: np.random.Generator) -> int:
    """Runs of history before the injected change: the server has some, never a full window."""
    return int(rng.integers(30, 121))


def step(size: float, within: int) -> Callable[[np.random.Generator], Scenario]:
    def make(rng: np.random.Generator) -> Scenario:
        pre = _pre(rng)
        factors = np.concatenate([np.ones(pre), np.full(within, 1 + size)])
        return Scenario(f"{size:.0%} step, within {within} runs", factors, (pre,), within)

    return make


def stairs(rng: np.random.Generator) -> Scenario:
    """Five consecutive 2-3% steps (five merged pull requests), 5-15 runs apart."""
    pre = _pre(rng)
    gaps = rng.integers(5, 16, size=4)
    at = [pre, *(pre + np.cumsum(gaps)).tolist()]
    sizes = rng.uniform(0.02, 0.03, size=5)
    factors = np.ones(at[-1] + 20)
    for a, s in zip(at, sizes, strict=True):
        factors[a:] *= 1 + s
    return Scenario("five 2-3% steps, by 20 runs after the last", factors, tuple(at), 20)


def drift(rng: np.random.Generator) -> Scenario:
    """A gradual slowdown: 10% spread evenly over 40 runs, then steady for 20."""
    pre = _pre(rng)
    ramp = np.exp(np.linspace(0, math.log(1.10), 41)[1:])
    factors = np.concatenate([np.ones(pre), ramp, np.full(20, 1.10)])
    return Scenario(
        "10% drift over 40 runs, by 20 runs after", factors, tuple(range(pre, pre + 40)), 20
    )


def revert(rng: np.random.Generator) -> Scenario:
    """A 10% step reverted 10 runs later: the revert should be found within 10 runs, and (ours)
    say that it undoes the step."""
    pre = _pre(rng)
    factors = np.concatenate([np.ones(pre), np.full(10, 1.10), np.ones(10)])
    return Scenario(
        "10% step reverted 10 runs later, within 10 runs",
        factors,
        (pre, pre + 10),
        10,
        reverted=True,
    )


# ---------------------------------------------------------------- scoring


@dataclass(frozen=True)
class Report:
    """One change a detector reported."""

    at: int  # the run after which it was reported
    after: int  # the first run after the change, as reported
    ratio: float
    change: object = None  # our ChangePoint (None for the plain rule)
    undoes: object = None  # the ChangePoint it undoes


def play(
    corpus: Corpus, kernel: int, scenario: Scenario, tracker: Tracker, rng: np.random.Generator
) -> dict[str, list[Report]]:
    """Run one history through every detector (all see the same runs); what each reported."""
    plain = {f"plain {t:.0%}": PlainRule(t) for t in PLAIN_THRESHOLDS}
    reports: dict[str, list[Report]] = {OURS: [], **{name: [] for name in plain}}
    for i, factor in enumerate(scenario.factors):
        run = corpus.run(kernel, float(factor), rng)
        for after, cp in tracker.add(run):
            undoes = cp.undoes.key if isinstance(cp.undoes, KnownChange) else cp.undoes
            reports[OURS].append(Report(i, after, cp.ratio, cp, undoes))
        for name, rule in plain.items():
            reports[name] += [Report(i, after, ratio) for after, ratio in rule.add(run)]
    return reports


@dataclass
class Score:
    """One detector's results on one scenario (and corpus): found in time, and false reports."""

    histories: int = 0
    found: int = 0
    delays: list[int] = field(default_factory=list)  # runs stored since the change, when found
    exact: int = 0  # found steps whose first run after is placed exactly
    runs: int = 0
    false: int = 0  # reported changes near no injected change

    def add(self, scenario: Scenario, reports: list[Report]) -> None:
        self.histories += 1
        self.runs += len(scenario.factors)
        if not scenario.changes:
            self.false += len(reports)
            return
        first, last = scenario.changes[0], scenario.changes[-1]
        near = [r for r in reports if first - NEAR <= r.after <= last + NEAR]
        self.false += len(reports) - len(near)
        in_time = [r for r in near if r.at <= last + scenario.within - 1]
        if scenario.reverted:
            # The step, then the revert reported as faster; ours must also say that it undoes
            # the step (the plain rule cannot, so firing twice is all it can do).
            up = [r for r in near if r.ratio > 1 and abs(r.after - first) <= NEAR]
            down = [r for r in in_time if r.ratio < 1 and abs(r.after - last) <= NEAR]
            hits = [d for d in down if d.change is None or any(d.undoes is u.change for u in up)]
            hits = hits if up else []
        else:
            hits = [r for r in in_time if r.ratio > 1]
        if hits:
            self.found += 1
            # Runs stored from the change (the first, for several; the revert, for a revert) up
            # to the report, the change's own run included.
            since = last if scenario.reverted else first
            self.delays.append(min(r.at for r in hits) - since + 1)
            self.exact += any(r.after == since for r in hits)

    def merge(self, other: Score) -> None:
        self.histories += other.histories
        self.found += other.found
        self.delays += other.delays
        self.exact += other.exact
        self.runs += other.runs
        self.false += other.false

    def cell(self, aa: bool) -> str:
        if aa:
            return f"{1000 * self.false / max(1, self.runs):.2f} ({self.false} in {self.runs})"
        if not self.histories:
            return "-"
        delay = f", median {np.median(self.delays):.0f}" if self.delays else ""
        return f"{100 * self.found / self.histories:.0f}%{delay}"


# ---------------------------------------------------------------- main


def measure(
    corpora: dict[str, Corpus],
    makers: list[Callable[[np.random.Generator], Scenario]],
    *,
    histories: int,
    aa_runs: int,
    window: int,
    p_value: float,
    seed: int,
) -> dict[tuple[str, str, str], Score]:
    """Scores per (scenario name, corpus label, detector)."""
    scores: dict[tuple[str, str, str], Score] = {}
    CALL_SECONDS.clear()
    rng = np.random.default_rng(seed)
    for label, corpus in corpora.items():
        jobs = [(h % corpus.kernels, make(rng)) for h in range(histories) for make in makers]
        jobs += [(k, Scenario(AA, np.ones(aa_runs), (), 0)) for k in range(corpus.kernels)]
        for kernel, scenario in jobs:
            tracker = Tracker(window, p_value)
            for name, reports in play(corpus, kernel, scenario, tracker, rng).items():
                scores.setdefault((scenario.name, label, name), Score()).add(scenario, reports)
            CALL_SECONDS.extend(tracker.seconds)
    return scores


def table(scores: dict[tuple[str, str, str], Score], labels: list[str]) -> str:
    names = list(dict.fromkeys(k[0] for k in scores if k[0] != AA))
    detectors = list(dict.fromkeys(k[2] for k in scores))
    head = ["corpus", "detector", *names, "false per 1,000 unchanged runs"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for label in [*labels, "all"] if len(labels) > 1 else labels:
        for det in detectors:
            cells = []
            for name in [*names, AA]:
                total = Score()
                for lab in labels if label == "all" else [label]:
                    total.merge(scores[(name, lab, det)])
                cells.append(total.cell(name == AA))
            lines.append(f"| {label} | {det} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def placement(scores: dict[tuple[str, str, str], Score]) -> str:
    """How often our found single steps are placed exactly (the commit range is right)."""
    steps = [s for (name, _, det), s in scores.items() if det == OURS and "% step," in name]
    exact, found = sum(s.exact for s in steps), sum(s.found for s in steps)
    return f"ours: {exact} of {found} found single steps placed exactly at their first run"


def call_times() -> str:
    """What detect cost in the histories above, call by call (CPU time, so a busy machine
    does not count against it; sizes of segments change from call to call, as on a server)."""
    ms = np.array(CALL_SECONDS) * 1e3
    q99, top = np.quantile(ms, 0.99), ms.max()
    return (
        f"incremental: {ms.size} detect calls, CPU time per call mean {ms.mean():.2f} ms, "
        f"99th percentile {q99:.1f} ms, max {top:.0f} ms"
    )


def speed(corpus: Corpus, window: int, rng: np.random.Generator) -> str:
    """One upload's detection work: 48 configurations, each a full window of unchanged runs."""
    histories = [
        [corpus.run(k % corpus.kernels, 1.0, rng) for _ in range(window)] for k in range(48)
    ]
    best_wall, best_cpu = math.inf, math.inf
    for _ in range(5):
        t0, c0 = time.perf_counter(), time.process_time()
        for h in histories:
            stats.detect(h)
        best_wall = min(best_wall, time.perf_counter() - t0)
        best_cpu = min(best_cpu, time.process_time() - c0)
    return (
        f"speed: stats.detect on 48 configurations x {window} runs: {best_wall * 1e3:.0f} ms "
        f"wall clock, {best_cpu * 1e3:.0f} ms CPU (best of 5; load average "
        f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument(
        "--quick", action="store_true", help="corpus Q, few histories: a smoke test"
    )
    parser.add_argument("--histories", type=int, default=60, help="per scenario and corpus")
    parser.add_argument("--aa-runs", type=int, default=1000, help="unchanged runs per kernel")
    parser.add_argument("--window", type=int, default=200, help="newest runs passed to detect")
    parser.add_argument("--processes", type=int, default=3, help="per run")
    parser.add_argument("--samples", type=int, default=10, help="per process")
    parser.add_argument("--p-value", type=float, default=0.0005, help="passed to detect")
    parser.add_argument(
        "--location",
        choices=("band", "mean"),
        default="band",
        help="run location: stats.run_location, or the mean of the processes' band means",
    )
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    labels = ["Q"] if args.quick else list(CORPORA)
    histories, aa_runs = (4, 150) if args.quick else (args.histories, args.aa_runs)
    corpora = {
        label: Corpus(CORPORA[label], args.processes, args.samples, args.location)
        for label in labels
    }
    makers = [step(0.10, 3), step(0.05, 10), stairs, drift, revert]
    started = time.monotonic()
    scores = measure(
        corpora,
        makers,
        histories=histories,
        aa_runs=aa_runs,
        window=args.window,
        p_value=args.p_value,
        seed=args.seed,
    )
    print(
        f"corpora {', '.join(labels)}: {histories} histories per scenario and corpus, "
        f"{aa_runs} unchanged runs per kernel (6 kernels) and corpus; {args.processes} processes "
        f"x {args.samples} samples per run, location {args.location}; window {args.window} "
        f"runs; p_value {args.p_value:g}; "
        f"{time.monotonic() - started:.0f} s\n"
    )
    print("share of histories where the change was found in time, median runs to find it\n")
    print(table(scores, labels))
    print()
    print(placement(scores))
    print(call_times())
    print(speed(next(iter(corpora.values())), args.window, np.random.default_rng(args.seed)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
