"""Samples and wall time to a decision: sampling policies against today's fixed 3 x 10.

Run `python -m benchmarks.quality.time_to_decision` (every corpus in benchmarks/data, both modes) or
with `--corpus PATH` (repeatable), `--runs N` (replayed runs per corpus and mode). A policy is
processes x rounds per process, fixed, or adaptive from there (bench_runner/adaptive_rule.py's
rule, as
benchmarks/quality/adaptive_quality.py replays it: one fresh process at a time for the
configurations
undecided but within reach, or about to BLOCK, at most 6 more; 'a3x10' is the product's default,
whose 3-minute budget holds all 6), judged by the statistics as they are now; or today's product
when issue 13 was filed ('o3x10'): fixed, compare_many without baseline runs (every baseline
process an exchangeable group) and benchmarks/quality/verdict_runs.py's old rule (Holm; any slower
or
undecided configuration WARNs), in paired mode on the same paired comparisons, as verdict_runs'
"old" rows. Every policy replays the same
runs: a run is a head that starts at one recorded process (in baseline mode the baseline is
the `--history` runs of the policy's processes recorded just before it; on the cross-load
corpus, whose recorded runs alternate quiet and busy, the head starts at a recorded run's
first process, and processes past its 3 come from the next run, under the other load) and a
slice of the corpus's rounds: one chunk of the reference's rounds (10); a policy of fewer rounds
takes the chunk's first ones, one of more (2 x 15) takes as many from the chunk's start, moved
back to end at the recording's last round where the chunk is too late for it. The baseline is
taken with the policy's own sampling, as it would be were the policy the product's default.

Per run (48 configurations), the error rates of issue 13 point 5, with counts:
- A/A: every configuration unchanged: PASS rate and BLOCK rate;
- 40%: one configuration the recorded 40% slowdown: the run's BLOCK rate;
- 15%: one configuration the twin times 1.15: the run flagged (WARN or BLOCK) rate, and
  "named": the run WARNs or BLOCKs on that configuration (flagged counts a run that WARNs on
  another, unchanged configuration, as paired mode's A/A runs often do).
A rate marked `*` is worse than the reference's (the first policy under the new rule: fixed
3 x 10) beyond the corpus's sampling error, one marked `+` better than today's (the first
under the old rule) beyond it: a one-sided two-proportion z-test at 5% (z > 1.645, pooled).

Wall time is modelled from costs measured in the real harness (benchmarks/harness/sampling_cost.py):
`--fixed-s` per run, `--process-s` per worker process, `--sample-s` per sample of one
configuration; paired mode measures two sides, so twice the processes and samples.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bench_runner.adaptive_rule import CONFIRM_PROCESSES, MAX_ADDED_PROCESSES
from benchmarks.quality.adaptive_quality import (
    SCENARIOS,
    SLOW_40,
    Groups,
    Outcome,
    Window,
    _load,
    replay,
)
from benchmarks.quality.verdict_runs import old_flags, old_tier

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "benchmarks" / "data"
CORPORA = ("corpus-quiet", "corpus", "corpus-contiguous", "corpus-crossload", "corpus-gpu")
CONFIGURATIONS = 48
POLICIES = "o3x10,3x10,3x5,3x3,5x3,4x4,5x4,6x5,2x15,4x5,a3x5,a3x10"


@dataclass(frozen=True)
class Policy:
    processes: int
    rounds: int
    added: int = 0  # adaptive: the most processes added; 0: fixed
    old_rule: bool = False  # judged as before issue 13 (today's product when it was filed)

    @property
    def name(self) -> str:
        shape = f"{self.processes} x {self.rounds}"
        if self.old_rule:
            return f"today's: fixed {shape}, rule before issue 13"
        return f"adaptive from {shape}" if self.added else f"fixed {shape}"


def parse_policy(text: str) -> Policy:
    """'3x10' (fixed), 'a3x5' (adaptive from 3 processes of 5 rounds) or 'o3x10' (fixed,
    judged by the rule before issue 13)."""
    kind = text[0] if text[0] in "ao" else ""
    processes, rounds = (int(x) for x in text.removeprefix(kind).split("x"))
    added = MAX_ADDED_PROCESSES if kind == "a" else 0
    return Policy(processes, rounds, added, old_rule=kind == "o")


def reference(policies: list[Policy]) -> Policy:
    """The policy the `*` marks compare with: the first under the new rule."""
    return next(p for p in policies if not p.old_rule)


def head_step(path: Path) -> int:
    """Where a head may start: at any process (1), or at a recorded run's first process when
    the corpus's runs were recorded under different conditions (cross-load: quiet and busy
    runs), so that a head of the recorded run size shares one run's conditions."""
    with np.load(path) as z:
        levels = json.loads(str(z["meta"]))["levels"]
        if levels[SLOW_40] != 0.40:
            raise SystemExit(f"{path.name}: level {SLOW_40} is not the 40% slowdown")
        if "run" not in z.files or len(np.unique(z["hog"])) < 2:
            return 1
        return int(np.bincount(z["run"]).max())


def windows(
    path: Path, policies: list[Policy], *, runs: int, history: int, paired: bool, seed: int
) -> list[tuple[int, int]]:
    """(head's first process, first round) of each replayed run, shared by every policy. The
    chunks are the reference's rounds, so that a policy of more rounds (2 x 15) does not halve
    the distinct runs of every other."""
    jobs, _, _, n_rounds = _load(path).shape[:4]
    if max(p.rounds for p in policies) > n_rounds:
        raise SystemExit(f"{path.name}: {n_rounds} rounds, fewer than a policy's")
    before = 0 if paired else max(history * p.processes for p in policies)
    after = max(p.processes + p.added for p in policies)
    chunk = reference(policies).rounds
    step = head_step(path)
    heads = [h for h in range(before, jobs - after + 1) if h % step == 0]
    starts = [(h, c * chunk) for c in range(n_rounds // chunk) for h in heads]
    rng = np.random.default_rng(seed)
    return [starts[i] for i in rng.permutation(len(starts))[:runs]]


def policy_rounds(policy: Policy, lo: int, n_rounds: int) -> tuple[int, int]:
    """The policy's rounds of the chunk starting at lo: its first ones, moved back to end at
    the recording's last round when the policy has more than the recording has left."""
    first = min(lo, n_rounds - policy.rounds)
    return first, first + policy.rounds


def replay_policy(
    data: np.ndarray, policy: Policy, head: int, lo: int, r: int, *, history: int, paired: bool
) -> dict[str, Outcome]:
    """One run of the policy, per scenario."""
    n_k, n_l, n_rounds = data.shape[1:4]
    configs = [(k, lv) for k in range(n_k) for lv in range(n_l)]
    lo, hi = policy_rounds(policy, lo, n_rounds)
    n_base = 0 if paired else history * policy.processes
    first_base = head - n_base
    base = [[data[first_base + j, k, lv, lo:hi, 0] for j in range(n_base)] for k, lv in configs]
    slowed = (r % n_k) * n_l  # kernel r % 6: its block 0 (15%) or its 40% block
    judge = judge_old if policy.old_rule else judge_new
    out = {}
    for scenario in SCENARIOS:
        window = Window(data, configs, head, lo, hi, scenario, slowed)
        target = {"40%": slowed + SLOW_40, "15%": slowed}.get(scenario)
        out[scenario] = judge(window, base, policy, target=target, seed=r, paired=paired)
    return out


def judge_new(
    window: Window,
    base: list[Groups],
    policy: Policy,
    *,
    target: int | None,
    seed: int,
    paired: bool,
) -> Outcome:
    """The policy's run under the statistics as they are now (adaptive_quality's replay)."""
    return replay(
        base,
        window.head,
        initial=policy.processes,
        max_added=policy.added,
        confirm=CONFIRM_PROCESSES,
        paired=paired,
        base_of=window.base,
        seed=seed,
        slowed=target,
        base_runs=[j // policy.processes for j in range(len(base[0]))],
    )


def judge_old(
    window: Window,
    base: list[Groups],
    policy: Policy,
    *,
    target: int | None,
    seed: int,
    paired: bool,
) -> Outcome:
    """The policy's run as today's product judged it when issue 13 was filed: fixed, the
    baseline's processes pooled (no runs), the old rule on every configuration at once."""
    import stats

    n = len(base)
    heads = [[window.head(c, p) for p in range(policy.processes)] for c in range(n)]
    if paired:
        base = [[window.base(c, p) for p in range(policy.processes)] for c in range(n)]
    comparisons = stats.compare_many(list(zip(base, heads, strict=True)), seed=seed, paired=paired)
    flags = old_flags(comparisons)
    verdicts = [c.verdict for c in comparisons]
    return Outcome(
        tier=old_tier(comparisons),
        flagged=("slower" in verdicts) if target is None else verdicts[target] == "slower",
        blocked_slowed=target is not None and flags.get(target) == "BLOCK",
        samples=[sum(len(g) for g in h) for h in heads],
        processes=policy.processes,
        confirmations=0,
        undecided_left=verdicts.count("undecided"),
        named_slowed=target is not None and target in flags,
    )


def worse(hits: int, ref_hits: int, n: int, higher_is_better: bool) -> bool:
    """Worse than the reference beyond sampling error (one-sided two-proportion z, 5%)."""
    pooled = (hits + ref_hits) / (2 * n)
    se = math.sqrt(2 * pooled * (1 - pooled) / n)
    if se == 0:
        return False
    diff = (ref_hits - hits) if higher_is_better else (hits - ref_hits)
    return diff / (n * se) > 1.645


def marks(hits: int, ref_hits: int, today_hits: int | None, n: int, higher: bool) -> str:
    """`*`: worse than the reference beyond sampling error; `+`: better than today's."""
    mark = "*" if worse(hits, ref_hits, n, higher) else ""
    # Better than today's is today's worse than this one, by the same test.
    if today_hits is not None and worse(today_hits, hits, n, higher):
        mark += "+"
    return mark


@dataclass(frozen=True)
class Costs:
    fixed_s: float
    process_s: float
    sample_s: float

    def wall(self, o: Outcome, sides: int) -> float:
        return self.fixed_s + sides * (
            o.processes * self.process_s + sum(o.samples) * self.sample_s
        )


RATES = (  # column, scenario, hit, higher is better
    ("A/A PASS", "A/A", lambda o: o.tier == "PASS", True),
    ("A/A BLOCK", "A/A", lambda o: o.tier == "BLOCK", False),
    ("40% BLOCK", "40%", lambda o: o.tier == "BLOCK", True),
    ("15% flagged", "15%", lambda o: o.tier in ("WARN", "BLOCK"), True),
    ("15% named", "15%", lambda o: o.named_slowed, True),
)


def table(results: dict[Policy, list[dict[str, Outcome]]], costs: Costs, sides: int) -> str:
    lines = [
        "| policy | " + " | ".join(r[0] for r in RATES) + " | samples/config (A/A, 40%) | "
        "processes/run (A/A, 40%) | modelled wall/run (A/A) |",
        "|---|" + "---|" * (len(RATES) + 3),
    ]
    ref = results[reference(list(results))]
    today = next((runs for p, runs in results.items() if p.old_rule), None)
    for policy, runs in results.items():
        n = len(runs)
        cells = []
        for _, scenario, hit, higher in RATES:
            k = sum(hit(run[scenario]) for run in runs)
            ref_k = sum(hit(run[scenario]) for run in ref)
            today_k = None if today is None else sum(hit(run[scenario]) for run in today)
            cells.append(f"{100 * k / n:.1f}% ({k}/{n}){marks(k, ref_k, today_k, n, higher)}")
        aa = [run["A/A"] for run in runs]
        s40 = [run["40%"] for run in runs]
        samples = [float(np.mean([np.mean(o.samples) for o in x])) for x in (aa, s40)]
        procs = [float(np.mean([o.processes for o in x])) for x in (aa, s40)]
        wall = float(np.mean([costs.wall(o, sides) for o in aa]))
        lines.append(
            f"| {policy.name} | "
            + " | ".join(cells)
            + f" | {samples[0]:.1f}, {samples[1]:.1f} | {procs[0]:.2f}, {procs[1]:.2f} | "
            f"{wall:.2f}s |"
        )
    return "\n".join(lines)


def analyse(path: Path, policies: list[Policy], costs: Costs, args: argparse.Namespace) -> None:
    data = _load(path)
    for mode in args.modes.split(","):
        paired = mode == "paired"
        started = time.monotonic()
        picked = windows(
            path, policies, runs=args.runs, history=args.history, paired=paired, seed=args.seed
        )
        results: dict[Policy, list[dict[str, Outcome]]] = {p: [] for p in policies}
        for r, (head, lo) in enumerate(picked):
            for policy in policies:
                results[policy].append(
                    replay_policy(data, policy, head, lo, r, history=args.history, paired=paired)
                )
        print(
            f"\n#### {path.name}, {mode} mode: {len(picked)} runs "
            f"({time.monotonic() - started:.0f} s, load average {os.getloadavg()[0]:.2f})\n"
        )
        print(table(results, costs, 2 if paired else 1))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.quality.time_to_decision", description=__doc__
    )
    p.add_argument("--corpus", action="append", type=Path)
    p.add_argument("--runs", type=int, default=60, help="replayed runs per corpus and mode")
    p.add_argument("--history", type=int, default=2, help="baseline runs in the base")
    p.add_argument(
        "--policies",
        default=POLICIES,
        help="comma-separated: '3x10' fixed, 'a3x5' adaptive from 3 x 5, 'o3x10' fixed under "
        "the rule before issue 13 (the `+` marks' today's); the first of the new rule is the "
        "reference of the `*` marks",
    )
    p.add_argument("--fixed-s", type=float, default=3.97, help="measured cost of a run")
    p.add_argument("--process-s", type=float, default=0.599, help="measured cost of a process")
    p.add_argument(
        "--sample-s",
        type=float,
        default=0.00136,
        help="measured cost of one configuration's sample",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--modes", default="baseline,paired")
    args = p.parse_args(argv)
    policies = [parse_policy(x) for x in args.policies.split(",")]
    corpora = args.corpus or [DATA / f"{n}.npz" for n in CORPORA if (DATA / f"{n}.npz").exists()]
    costs = Costs(args.fixed_s, args.process_s, args.sample_s)
    print(
        f"policies {', '.join(x.name for x in policies)} (adaptive: at most "
        f"{MAX_ADDED_PROCESSES} processes added, {CONFIRM_PROCESSES} fresh to confirm a BLOCK); "
        f"baseline {args.history} runs of the policy's processes; up to {args.runs} runs per "
        f"corpus and mode; wall modelled as {costs.fixed_s}s/run + {costs.process_s}s/process + "
        f"{1000 * costs.sample_s}ms/sample x {CONFIGURATIONS} configurations; `*` worse than "
        f"{reference(policies).name}, `+` better than today's, beyond sampling error; load "
        f"average {os.getloadavg()[0]:.2f}"
    )
    for path in corpora:
        analyse(path, policies, costs, args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
