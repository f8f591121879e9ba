"""Adaptive sampling against fixed sampling, replayed on the recorded corpora.

Run `python -m benchmarks.quality.adaptive_quality` (all corpora found in benchmarks/data) or with
`--corpus PATH` (repeatable). Each replay is one pull request's gate run, built from the
corpus's processes ("CI jobs", benchmarks/quality/verdict_quality.py) in the order they were
recorded:
the baseline is `--history` runs of `--processes` processes, the head's processes are the
jobs recorded next, and adaptive sampling adds the jobs after those, one at a time, so drift
over the recording (load coming and going) reaches the replay as it would reach CI.

A run has the corpus's 48 configurations (6 kernels x 8 blocks). Per run and mode:
- A/A: every configuration unchanged (the head is the in-round twin v0').
- 40%: one configuration is the recorded 40% slowdown, the others unchanged.
- 15%: one configuration is the twin times 1.15 (the corpus has no 15% level), the others
  unchanged; "flagged" means that configuration's verdict is "slower".
Fixed: the product's default, `--processes` processes x `--rounds` rounds (3 x 10 = 30 samples
per side). Adaptive: `--initial` processes, then one more process at a time for the
configurations bench_runner/adaptive_rule.py keeps open (undecided, or about to BLOCK and not yet
confirmed:
those get `--confirm` fresh processes), up to `--max-added` processes (the budget).
Paired mode replays base and head from the same processes (v0 and v0' of one round).

The wall time shown is a model, not a measurement: each process costs `--process-s` (start,
imports, build, warm-up) and each sample `--sample-s`; both are flags.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from bench_runner.adaptive_rule import CONFIRM_PROCESSES, MAX_ADDED_PROCESSES
from benchmarks.quality.verdict_quality import LEVELS

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "benchmarks" / "data"
CORPORA = ("corpus-quiet.npz", "corpus.npz", "corpus-contiguous.npz")
SLOW_40 = LEVELS.index(0.40)
THRESHOLD = 0.25
SCENARIOS = ("A/A", "40%", "15%")

Groups = list[np.ndarray]


@dataclass
class Outcome:
    tier: str
    flagged: bool  # the slowed configuration's verdict is "slower" (A/A: any configuration)
    blocked_slowed: bool
    samples: list[int]  # head samples per configuration
    processes: int  # head processes started
    confirmations: int  # processes added to confirm a BLOCK
    undecided_left: int
    named_slowed: bool = False  # the slowed configuration is one the run blocks or warns on
    comparisons: list = field(default_factory=list)  # the final ones, by configuration


@dataclass
class Tally:
    by: dict[tuple[str, str], list[Outcome]] = field(default_factory=dict)

    def add(self, scenario: str, policy: str, outcome: Outcome) -> None:
        self.by.setdefault((scenario, policy), []).append(outcome)


@dataclass(frozen=True)
class Window:
    """One replayed run's processes: the head's, in recorded order from `first_head`."""

    data: np.ndarray
    configs: list[tuple[int, int]]
    first_head: int
    lo: int
    hi: int
    scenario: str
    slowed: int  # kernel's first block: its 15% (synthetic) or, +SLOW_40, its recorded 40%

    def head(self, c: int, p: int) -> np.ndarray:
        k, lv = self.configs[c]
        j = self.first_head + p
        if self.scenario == "40%" and c == self.slowed + SLOW_40:
            return self.data[j, k, lv, self.lo : self.hi, 2]
        twin = self.data[j, k, lv, self.lo : self.hi, 1]
        return twin * 1.15 if self.scenario == "15%" and c == self.slowed else twin

    def base(self, c: int, p: int) -> np.ndarray:
        k, lv = self.configs[c]
        return self.data[self.first_head + p, k, lv, self.lo : self.hi, 0]


def _load(path: Path) -> np.ndarray:
    with np.load(path) as z:
        data: np.ndarray = z["data"] / z["reps"][:, :, None, None, None]
    return data


def _gate(comparisons: list, ids: list[str]) -> tuple[str, list]:
    import stats

    decision = stats.gate(dict(zip(ids, comparisons, strict=True)), block_threshold=THRESHOLD)
    return decision.tier, comparisons


def _rows(tier: str, ids: list[str], comparisons: list) -> list:
    from bench_runner.adaptive_rule import Row

    return [
        Row(cid, c.verdict, c.p_exceeds(THRESHOLD), c.reason, c.p_slower)
        for cid, c in zip(ids, comparisons, strict=True)
    ]


def _run_level() -> bool:
    """Whether these statistics take baseline runs (a run-level model, stats-core's)."""
    import inspect

    import stats

    return "base_runs" in inspect.signature(stats.compare_many).parameters


def replay(
    base: list[Groups],
    head_of: Callable[[int, int], np.ndarray],
    *,
    initial: int,
    max_added: int,
    confirm: int,
    paired: bool,
    base_of: Callable[[int, int], np.ndarray] | None,
    seed: int,
    slowed: int | None,
    base_runs: list[int] | None = None,
    only_open: bool = False,
) -> Outcome:
    """One run. head_of(config, process) is that process's head samples of the configuration
    (processes numbered in recorded order); base_of likewise in paired mode. base_runs: the
    baseline run of each base group, for statistics with a run-level model (then every step
    compares all configurations at once, as rnx.verdict does: the model fits them jointly).
    An added process measures every configuration, as the harness's does against baseline
    runs (bench_runner/adaptive.py); in paired mode, or with only_open (the rule before), only
    the open ones."""
    import stats
    from bench_runner.adaptive_rule import still_open

    n = len(base) if not paired else len(base)  # configurations
    ids = [str(i) for i in range(n)]
    head: list[Groups] = [[head_of(c, p) for p in range(initial)] for c in range(n)]
    pbase: list[Groups] = (
        [[base_of(c, p) for p in range(initial)] for c in range(n)] if paired and base_of else base
    )

    joint = base_runs is not None and not paired and _run_level()

    def compare(which: list[int], comparisons: list | None, twice: bool = False) -> list:
        if joint:
            which = list(range(n))
            runs: dict[str, Any] = {"base_runs": [base_runs] * n}
        else:
            runs = {}
        k = 2 if twice else 1  # twice: the head's processes doubled (the rule's projection)
        sides = [(pbase[c] * (k if paired else 1), head[c] * k) for c in which]
        fresh = stats.compare_many(sides, seed=seed, paired=paired, **runs)
        out = list(comparisons) if comparisons is not None else [None] * n
        for c, comp in zip(which, fresh, strict=True):
            out[c] = comp
        return out

    comparisons = compare(list(range(n)), None)
    tier, _ = _gate(comparisons, ids)
    processes, confirmations = initial, 0
    confirmed: dict[str, int] = {}  # id -> fresh processes still owed to its confirmation
    done_confirming: set[str] = set()
    while processes < initial + max_added:
        rows = _rows(tier, ids, comparisons)
        projected = None
        undecided = [int(r.id) for r in rows if r.verdict == "undecided"]
        if undecided:
            doubled = compare(undecided, comparisons, twice=True)
            projected = {ids[c]: doubled[c].verdict for c in undecided}
        open_ = still_open(tier, rows, done_confirming, projected)
        if not open_:
            break
        for o in open_:
            if o.confirming and o.id not in confirmed:
                confirmed[o.id] = confirm
        which = sorted(int(o.id) for o in open_) if paired or only_open else list(range(n))
        p = processes
        for c in which:
            head[c].append(head_of(c, p))
            if paired and base_of is not None:
                pbase[c].append(base_of(c, p))
        processes += 1
        if any(o.confirming for o in open_):
            confirmations += 1
        for cid in [o.id for o in open_ if o.id in confirmed]:
            if cid in done_confirming:
                continue
            confirmed[cid] -= 1
            if confirmed[cid] <= 0:
                done_confirming.add(cid)
        comparisons = compare(which, comparisons)
        tier, _ = _gate(comparisons, ids)
    verdicts = [c.verdict for c in comparisons]
    if slowed is None:
        flagged = any(v == "slower" for v in verdicts)
        blocked_slowed = named_slowed = False
    else:
        flagged = verdicts[slowed] == "slower"
        import stats as st

        decision = st.gate(dict(zip(ids, comparisons, strict=True)), block_threshold=THRESHOLD)
        blocked_slowed = ids[slowed] in decision.blocked
        named_slowed = blocked_slowed or ids[slowed] in decision.warned
    return Outcome(
        tier=tier,
        flagged=flagged,
        blocked_slowed=blocked_slowed,
        samples=[sum(len(g) for g in head[c]) for c in range(n)],
        processes=processes,
        confirmations=confirmations,
        undecided_left=sum(v == "undecided" for v in verdicts),
        named_slowed=named_slowed,
        comparisons=comparisons,
    )


def analyse(
    path: Path,
    *,
    runs: int,
    history: int,
    processes: int,
    rounds: int,
    initial: list[int],
    max_added: int,
    confirm: int,
    paired: bool,
    seed: int,
) -> Tally:
    data = _load(path)
    jobs, n_k, n_l, n_r, _ = data.shape
    configs = [(k, lv) for k in range(n_k) for lv in range(n_l)]
    n_base = 0 if paired else history * processes
    span = n_base + max(processes, max(initial) + max_added)
    chunks = n_r // rounds
    starts = [(s, ch) for ch in range(chunks) for s in range(jobs - span + 1)]
    rng = np.random.default_rng(seed)
    picked = [starts[i] for i in rng.permutation(len(starts))[:runs]]
    tally = Tally()
    for r, (s, ch) in enumerate(picked):
        lo, hi = ch * rounds, (ch + 1) * rounds
        first_head = s + n_base
        base = [[data[s + j, k, lv, lo:hi, 0] for j in range(n_base)] for k, lv in configs]
        slowed = (r % n_k) * n_l  # kernel r % 6: its block 0 (15%) or its 40% block
        for scenario in SCENARIOS:
            window = Window(data, configs, first_head, lo, hi, scenario, slowed)
            target = None
            if scenario == "40%":
                target = slowed + SLOW_40
            elif scenario == "15%":
                target = slowed

            def run(
                first: int,
                most: int,
                fresh: int,
                window: Window = window,
                base: list[Groups] = base,
                at: int = seed + r,
                target: int | None = target,
            ) -> Outcome:
                return replay(
                    base,
                    window.head,
                    initial=first,
                    max_added=most,
                    confirm=fresh,
                    paired=paired,
                    base_of=window.base,
                    seed=at,
                    slowed=target,
                    base_runs=[j // processes for j in range(n_base)],
                )

            tally.add(scenario, "fixed", run(processes, 0, confirm))
            for first in initial:
                name = f"adaptive from {first}"
                adaptive = run(first, max_added, confirm)
                tally.add(scenario, name, adaptive)
                # Without a confirmation the replay is the same, unless one was made.
                unconfirmed = run(first, max_added, 0) if adaptive.confirmations else adaptive
                tally.add(scenario, f"{name}, no confirmation", unconfirmed)
    return tally


def _pct(xs: list[bool]) -> str:
    return f"{100 * sum(xs) / len(xs):.1f}%"


def report(tally: Tally, *, process_s: float, sample_s: float, rounds: int) -> str:
    lines = [
        "| policy | A/A PASS | A/A WARN | A/A BLOCK | 40% BLOCK | 15% flagged | "
        "samples/config (A/A) | processes/run (A/A) | modelled wall (A/A) | confirm processes "
        "(A/A, 40%) | undecided left/run (A/A) |",
        "|---|" + "---|" * 10,
    ]
    for policy in dict.fromkeys(policy for _, policy in tally.by):
        aa = tally.by[("A/A", policy)]
        slow40 = tally.by[("40%", policy)]
        slow15 = tally.by[("15%", policy)]
        samples = float(np.mean([np.mean(o.samples) for o in aa]))
        procs = float(np.mean([o.processes for o in aa]))
        wall = float(np.mean([o.processes * process_s + sum(o.samples) * sample_s for o in aa]))
        lines.append(
            f"| {policy} | {_pct([o.tier == 'PASS' for o in aa])} | "
            f"{_pct([o.tier == 'WARN' for o in aa])} | {_pct([o.tier == 'BLOCK' for o in aa])} | "
            f"{_pct([o.blocked_slowed for o in slow40])} | {_pct([o.flagged for o in slow15])} | "
            f"{samples:.1f} | {procs:.2f} | {wall:.1f}s | "
            f"{np.mean([o.confirmations for o in aa]):.2f}, "
            f"{np.mean([o.confirmations for o in slow40]):.2f} | "
            f"{np.mean([o.undecided_left for o in aa]):.2f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.quality.adaptive_quality", description=__doc__
    )
    p.add_argument("--corpus", action="append", type=Path)
    p.add_argument("--runs", type=int, default=40, help="replayed runs per corpus and mode")
    p.add_argument("--history", type=int, default=2, help="baseline runs in the base")
    p.add_argument("--processes", type=int, default=3, help="fixed: processes per run")
    p.add_argument("--rounds", type=int, default=10, help="rounds per process (both)")
    p.add_argument(
        "--initial",
        default="3,2",
        help="adaptive: processes at first (comma-separated: one policy each)",
    )
    p.add_argument(
        "--max-added",
        type=int,
        default=MAX_ADDED_PROCESSES,
        help="adaptive: the most processes added (bench_runner/adaptive_rule.py's)",
    )
    p.add_argument(
        "--confirm", type=int, default=CONFIRM_PROCESSES, help="fresh processes before a BLOCK"
    )
    p.add_argument("--process-s", type=float, default=4.0, help="modelled cost of a process")
    p.add_argument("--sample-s", type=float, default=0.002, help="modelled cost of a sample")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--modes", default="baseline,paired")
    args = p.parse_args(argv)
    corpora = args.corpus or [DATA / name for name in CORPORA if (DATA / name).exists()]
    corpora += sorted(DATA.glob("corpus-crossload*.npz")) if not args.corpus else []
    print(
        f"fixed {args.processes} processes x {args.rounds} rounds; adaptive {args.initial} "
        f"processes x {args.rounds} rounds, then 1 process at a time for open configurations, "
        f"at most {args.max_added} more, {args.confirm} fresh processes to confirm a BLOCK; "
        f"base {args.history} baseline runs x {args.processes} processes; {args.runs} runs per "
        f"corpus and mode; wall modelled as {args.process_s}s/process + {args.sample_s}s/sample"
    )
    for path in corpora:
        for mode in args.modes.split(","):
            started = time.monotonic()
            tally = analyse(
                path,
                runs=args.runs,
                history=args.history,
                processes=args.processes,
                rounds=args.rounds,
                initial=[int(x) for x in args.initial.split(",")],
                max_added=args.max_added,
                confirm=args.confirm,
                paired=mode == "paired",
                seed=args.seed,
            )
            print(f"\n#### {path.name}, {mode} mode ({time.monotonic() - started:.0f} s)\n")
            print(
                report(tally, process_s=args.process_s, sample_s=args.sample_s, rounds=args.rounds)
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
