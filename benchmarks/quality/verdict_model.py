"""The verdict model's figures (issue 34, "What must hold"), per corpus and per configuration.

Run `python -m benchmarks.quality.verdict_model` (every recorded H200 corpus of `rnx bench`
runs in benchmarks/data/gpu-aa-*, the model's coverage and its re-gating cost; about 5 minutes
on 2 busy cores), with `--main PATH` (a `git worktree` of main) to run the same figures with
main's packages (statistics, verdict, adaptive rule) under this tree's harness in a subprocess
and print them side by side.

- Recorded runs (a directory of `rnx bench` results documents, one per run): each replay is one
  run as the head against --history others as its baseline runs (the server's most), drawn at
  random, its processes in an order drawn at random (the harness's first processes are any of
  the run's: shuffled_processes), gated by rnx.verdict.evaluate with the product's defaults, as
  the server gates. Per run: unchanged (--unchanged replays: PASS share and BLOCKs); per
  configuration, its head times x 1.05 (flagged: WARN or BLOCK) and x 1.40 (BLOCK),
  --per-config replays each. The weakest configuration is reported beside the range.
- Busy CPU (benchmarks/data/corpus-crossload*.npz, benchmarks/quality/cross_load_corpus.py:
  runs recorded quiet and runs recorded beside a hog on the same core): baseline runs recorded
  quiet and the head busy, and the reverse, by turns within each kind of replay below;
  --history baseline runs, processes of 10
  samples, stats.compare_many with the runs and stats.gate with the product's defaults. The
  head starts from 3 processes; a corpus of more a run (corpus-crossload-9proc) replays
  adaptive sampling from the rest, and its baseline runs are cut to each of --base-processes.
  Unchanged (--cpu-unchanged replays), and per configuration its head times x 1.15 (flagged)
  and x 1.40 (BLOCK), --cpu-per-config replays each; the 90% intervals' coverage of the true
  ratio (1, and 1.15 for the slowed configuration) over the unchanged and the 15% replays, and
  of the draws' central 50% and 98% intervals; the draws' median's squared error over their
  variance, by kernel; and that coverage and the 15% slowdowns flagged with the head quiet and
  with it busy.
- Coverage: the 90% intervals on data drawn from the model
  (benchmarks/quality/interval_coverage.py), 2-10 baseline runs, 3-9 processes, process
  spreads 0.5-5%: share holding the true ratio.
- Each weakest configuration is printed beside the range it would have by chance if every
  configuration were flagged at the pooled share: the weakest of 48 at 10 replays each reads 70%
  where all are flagged 93%. `--jobs N` splits every replay count over N processes, each with its
  own seed, and adds their figures up.
- Cost: the statistics of one re-gate (stats.compare_many with 6 baseline runs, then
  stats.gate) for 8 and 48 configurations x 3 processes x 10 samples, CPU ms, best of 15.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

DATA = Path(__file__).resolve().parents[1] / "data"


def load_runs(directory: Path) -> list[Any]:
    from rnx.schema import ResultsDocument

    paths = sorted(directory.glob("*.json"), key=lambda p: (len(p.stem), p.stem))
    return [ResultsDocument.model_validate_json(p.read_text()) for p in paths]


def slowed(doc: Any, cid: str, factor: float) -> Any:
    """doc with configuration cid's times multiplied by factor."""
    configs = []
    for cfg in doc.configurations:
        if cfg.id == cid and cfg.samples is not None:
            ns = [max(1, round(t * factor)) for t in cfg.samples.ns]
            cfg = cfg.model_copy(update={"samples": cfg.samples.model_copy(update={"ns": ns})})
        configs.append(cfg)
    return doc.model_copy(update={"configurations": configs})


def first_processes(doc: Any, n: int | dict[str, int]) -> Any:
    """doc with each configuration's samples of its first n processes (n per id, or for all)."""
    configs = []
    for cfg in doc.configurations:
        keep = n if isinstance(n, int) else n.get(cfg.id, 0)
        s = cfg.samples
        if s is not None and max(s.process, default=-1) >= keep:
            idx = [i for i, p in enumerate(s.process) if p < keep]
            cut = s.model_copy(
                update={
                    "ns": [s.ns[i] for i in idx],
                    "round": [s.round[i] for i in idx],
                    "process": [s.process[i] for i in idx],
                }
            )
            cfg = cfg.model_copy(update={"samples": cut})
        configs.append(cfg)
    return doc.model_copy(update={"configurations": configs})


def shuffled_processes(doc: Any, rng: np.random.Generator) -> Any:
    """doc with its processes renumbered by one random permutation, the same in every
    configuration (process i stays one worker across them). An H200 run's processes are
    exchangeable (the same job, one after another; no trend with their order on the 9-process
    corpora, `python -m benchmarks.quality.process_order`), so which of them a replay starts
    from is drawn: always the first ones recorded, every replay of a head shared those few
    processes' errors, and a corpus's figures were those of 12 fixed draws. (Not so on the
    busy-CPU corpora: busy_cpu_figures.)"""
    perm = rng.permutation(processes_of(doc))
    configs = []
    for cfg in doc.configurations:
        s = cfg.samples
        if s is not None:
            s = s.model_copy(update={"process": [int(perm[p]) for p in s.process]})
            cfg = cfg.model_copy(update={"samples": s})
        configs.append(cfg)
    return doc.model_copy(update={"configurations": configs})


def processes_of(doc: Any) -> int:
    return min(max(c.samples.process) + 1 for c in doc.configurations if c.samples)


def adaptive_tier(
    head: Any,
    base: list[Any],
    gate: Any,
    start: int,
    reports: list[Any] | None = None,
    only_open: bool = False,
) -> tuple[str, int]:
    """The tier after the product's adaptive sampling (bench_runner/adaptive_rule.py), replayed on
    a head recorded with more processes: from `start` processes, while the rule keeps any
    configuration open, every configuration gets its next recorded process (an added process
    measures all of them, as the harness's does; only the open ones with only_open, the rule
    before), until none is open, MAX_ADDED_PROCESSES were added or the recording has no more.
    Returns the tier and the processes added (and appends the final report to reports, if
    given)."""
    from bench_runner.adaptive_rule import (
        MAX_ADDED_PROCESSES,
        rows_of,
        still_open,
        verdicts,
        with_processes_doubled,
    )
    from rnx.verdict import evaluate

    try:  # the baselines prepared once, as the harness's adaptive loop does
        from rnx.verdict import PreparedBaselines

        extra: dict[str, Any] = {"prepared": PreparedBaselines(base)}
    except ImportError:  # a tree before it
        extra = {}
    recorded = processes_of(head)
    per = {c.id: start for c in head.configurations}
    confirmed: set[str] = set()
    for added in range(MAX_ADDED_PROCESSES + 1):
        doc = first_processes(head, per)
        report = evaluate(doc, base, gate, **extra)
        if reports is not None:
            reports.append(report)
        if added == MAX_ADDED_PROCESSES or start + added >= recorded:
            return report.tier, added
        rows = rows_of(report)
        projected = None
        if any(r.verdict == "undecided" for r in rows):
            projected = verdicts(evaluate(with_processes_doubled(doc), base, gate, **extra))
        found = still_open(report.tier, rows, confirmed, projected)
        if not found:
            return report.tier, added
        if reports is not None:
            reports.pop()  # not final
        for cid in [o.id for o in found] if only_open else per:
            per[cid] += 1
        confirmed |= {o.id for o in found if o.confirming}
    return report.tier, MAX_ADDED_PROCESSES


def run_figures(
    docs: list[Any],
    *,
    history: int,
    unchanged: int,
    per_config: int,
    seed: int,
    base_processes: int | None = None,
    head_processes: int = 3,
    only_open: bool = False,
    as_recorded: bool = False,
) -> dict[str, Any]:
    """Per configuration figures on recorded runs. Runs recorded with more processes than
    head_processes are replayed with adaptive sampling from head_processes; base_processes:
    the baseline runs' processes (all recorded if None), drawn from each run's
    (shuffled_processes; the first ones recorded with as_recorded)."""
    from rnx.config import GateSettings

    gate = GateSettings()
    rng = np.random.default_rng(seed)
    history = min(history, len(docs) - 1)
    recorded = processes_of(docs[0])
    bases = docs if base_processes is None else [first_processes(d, base_processes) for d in docs]
    added: list[int] = []

    def draw() -> tuple[int, Any, list[Any]]:
        """The head's recorded run, the head and its baseline runs."""
        order = rng.permutation(len(docs))
        head = docs[order[0]]
        if as_recorded:
            return int(order[0]), head, [bases[i] for i in order[1 : history + 1]]
        base = [
            first_processes(shuffled_processes(docs[i], rng), base_processes)
            if base_processes is not None and base_processes < recorded
            else bases[i]
            for i in order[1 : history + 1]
        ]
        return int(order[0]), shuffled_processes(head, rng), base

    # Coverage on the recorded runs: each configuration's 90% interval holds its true ratio,
    # 1 in an unchanged replay, 1.05 for the configuration slowed by 5%; by configuration and
    # by the recorded run that was the head (replays of one head share its errors).
    held: dict[str, np.ndarray] = {}  # per configuration: (covered, intervals) per head

    def tier(
        head: Any, base: list[Any], truth: dict[str, float] | None = None, run: int = -1
    ) -> str:
        reports: list[Any] = []
        start = min(head_processes, recorded)
        found, more = adaptive_tier(head, base, gate, start, reports, only_open)
        added.append(more)
        for c in reports[-1].comparisons if truth is not None else ():
            if c.id in truth and c.low is not None and c.high is not None:
                covered = c.low <= truth[c.id] <= c.high
                held.setdefault(c.id, np.zeros((len(docs), 2), dtype=int))[run] += (covered, 1)
        return found

    tiers = []
    ones = {c.id: 1.0 for c in docs[0].configurations}
    for _ in range(unchanged):
        run, head, base = draw()
        tiers.append(tier(head, base, ones, run))
    ids = [c.id for c in docs[0].configurations if c.status == "ok"]
    flagged: dict[str, float] = {}
    blocked: dict[str, float] = {}
    for cid in ids if per_config else ():
        small = big = 0
        for _ in range(per_config):
            run, head, base = draw()
            small += tier(slowed(head, cid, 1.05), base, {cid: 1.05}, run) != "PASS"
            big += tier(slowed(head, cid, 1.40), base) == "BLOCK"
        flagged[cid] = small / per_config
        blocked[cid] = big / per_config
    return {
        "runs": len(docs),
        "history": history,
        "recorded": recorded,
        "base_processes": base_processes or recorded,
        "added": float(np.mean(added)),
        "pass": tiers.count("PASS") / len(tiers),
        "block": tiers.count("BLOCK"),
        "replays": len(tiers),
        "per_config": per_config,
        "flagged_5": flagged,
        "blocked_40": blocked,
        **_coverage_counts(held),
    }


def busy_cpu_figures(
    path: Path,
    *,
    history: int,
    unchanged: int,
    per_config: int,
    seed: int,
    base_processes: int | None = None,
    only_open: bool = False,
) -> dict[str, Any]:
    """Per configuration figures on a cross-load CPU corpus (quiet against busy, both ways),
    and the coverage of its 90% intervals. A corpus recorded with more processes a run than the
    head's 3 replays adaptive sampling from them (benchmarks/quality/adaptive_quality.py's
    replay: the product's rule); base_processes: the baseline runs' (all recorded if None).
    A run's processes are replayed in their recorded order, the first ones first, as the
    harness starts them: on these corpora a run's first process is slower than the others
    (`python -m benchmarks.quality.process_order`), so they are not exchangeable."""
    from bench_runner.adaptive_rule import CONFIRM_PROCESSES, MAX_ADDED_PROCESSES
    from benchmarks.quality.adaptive_quality import replay
    from benchmarks.quality.verdict_runs import Scenario, _side, load

    corpus = load(path)
    assert corpus.runs is not None, f"{path}: a corpus recorded as runs"
    rng = np.random.default_rng(seed)
    recorded = min(len(r) for r in corpus.runs)
    scen = Scenario(corpus, recorded, rng)
    base_p = recorded if base_processes is None else min(base_processes, recorded)
    head_p = min(3, recorded)
    quiet = [i for i, r in enumerate(corpus.runs) if not corpus.busy[r].any()]
    busy = [i for i, r in enumerate(corpus.runs) if corpus.busy[r].all()]
    history = min(history, len(quiet) - 1, len(busy) - 1)
    n_k, n_l, n_r = corpus.data.shape[1:4]
    names = corpus.kernels or [str(k) for k in range(n_k)]
    ids = [f"{names[k]}[{lv}]" for k in range(n_k) for lv in range(n_l)]  # (level: a copy)
    # The head's condition alternates within each kind of replay (unchanged, 15%, 40% slower),
    # so each kind has as many busy heads as quiet ones.
    turns: dict[float, itertools.count[int]] = {}
    held: dict[str, np.ndarray] = {}  # per configuration: (covered, intervals) per head
    # Per head condition (quiet, busy): intervals holding the truth, and 15% slowdowns flagged.
    # And of the 15% slowdowns that PASSed, those whose slowed configuration read `slower` on its
    # own: the run's family control over every configuration, not the noise, kept them PASS.
    by_condition = {k: np.zeros((2, 2), dtype=int) for k in ("covered", "flagged", "missed")}
    # The draws' central 50% and 98% intervals too: where the 90% ones cover more than 90%, is
    # the spread too wide at every level, or are the errors' tails shaped unlike the draws'?
    levels = {"50": np.zeros(2, dtype=int), "98": np.zeros(2, dtype=int)}
    # Per configuration, the draws' median's squared error and the draws' variance, summed: is
    # the spread too wide on average, and for which kernels?
    errors = {cid: np.zeros(2) for cid in ids}
    added: list[int] = []

    def tier(slow: int | None, factor: float, truth: float | None = None) -> str:
        head_busy = next(turns.setdefault(factor, itertools.count())) % 2 == 0
        pools = (quiet, busy) if head_busy else (busy, quiet)
        base_runs, head_jobs = scen.draw(history, *pools)
        head_run = next(i for i, r in enumerate(corpus.runs) if r[0] == head_jobs[0])
        base_runs = [b[:base_p] for b in base_runs]
        labels = [i for i, b in enumerate(base_runs) for _ in b]
        base = _side(corpus.data, np.concatenate(base_runs), 0, 10, rng)
        starts = rng.integers(0, n_r - min(10, n_r) + 1, size=len(head_jobs))

        def head_of(c: int, p: int) -> np.ndarray:
            k, lv = divmod(c, n_l)
            times = corpus.data[head_jobs[p], k, lv, starts[p] : starts[p] + 10, 1]
            return times * factor if c == slow else times

        got = replay(
            base,
            head_of,
            initial=head_p,
            max_added=min(MAX_ADDED_PROCESSES, recorded - head_p),
            confirm=CONFIRM_PROCESSES,
            paired=False,
            base_of=None,
            seed=int(rng.integers(2**31)),
            slowed=slow,
            base_runs=labels,
            only_open=only_open,
        )
        added.append(got.processes - head_p)
        if truth is not None:
            for c, comp in enumerate(got.comparisons):
                if comp.low is not None and comp.high is not None:
                    covered = comp.low <= (truth if c == slow else 1.0) <= comp.high
                    per_head = held.setdefault(ids[c], np.zeros((len(corpus.runs), 2), int))
                    per_head[head_run] += (covered, 1)
                    by_condition["covered"][int(head_busy)] += (covered, 1)
            true_logs = np.log([truth if c == slow else 1.0 for c in range(len(ids))])
            draws = np.stack([comp.log_ratio_draws for comp in got.comparisons])
            ends = np.quantile(draws, [0.25, 0.75, 0.01, 0.99], axis=1)
            squared = (np.median(draws, axis=1) - true_logs) ** 2
            for cid, sq, var in zip(ids, squared, draws.var(axis=1), strict=True):
                errors[cid] += (sq, var)
            for i, level in enumerate(levels):
                inside = (ends[2 * i] <= true_logs) & (true_logs <= ends[2 * i + 1])
                levels[level] += (int(inside.sum()), inside.size)
        if slow is not None and factor == 1.15:
            by_condition["flagged"][int(head_busy)] += (got.tier != "PASS", 1)
            if got.tier == "PASS":
                slower = got.comparisons[slow].verdict == "slower"
                by_condition["missed"][int(head_busy)] += (slower, 1)
        return got.tier

    tiers = [tier(None, 1.0, 1.0) for _ in range(unchanged)]
    flagged: dict[str, float] = {}
    blocked: dict[str, float] = {}
    for c, cid in enumerate(ids if per_config else ()):
        flagged[cid] = sum(tier(c, 1.15, 1.15) != "PASS" for _ in range(per_config)) / per_config
        blocked[cid] = sum(tier(c, 1.40) == "BLOCK" for _ in range(per_config)) / per_config
    return {
        "runs": len(corpus.runs),
        "history": history,
        "recorded": recorded,
        "base_processes": base_p,
        "added": float(np.mean(added)) if added else 0.0,
        "pass": tiers.count("PASS") / max(len(tiers), 1),
        "block": tiers.count("BLOCK"),
        "replays": len(tiers),
        "per_config": per_config,
        "flagged_15": flagged,
        "blocked_40": blocked,
        **_coverage_counts(held),
        "errors": {k: v.tolist() for k, v in errors.items()},
        "by_condition": {k: v.tolist() for k, v in by_condition.items()},
        "levels": {k: v.tolist() for k, v in levels.items()},
    }


def _coverage_counts(held: dict[str, np.ndarray]) -> dict[str, Any]:
    """The recorded runs' coverage counts, from (covered, intervals) per configuration and head:
    per configuration, per head, and both."""
    return {
        "coverage": {k: (int(v[:, 0].sum()), int(v[:, 1].sum())) for k, v in held.items()},
        "coverage_by_head": np.sum(list(held.values()), axis=0).tolist() if held else [],
        "coverage_by_config_head": {k: v.tolist() for k, v in held.items()},
    }


def coverage_figures(
    sims: int, seed: int, grid: Iterable[tuple[int, int, float]] | None = None
) -> list[dict[str, Any]]:
    """Coverage on model draws for each (baseline runs, processes, run-to-run sd) of `grid`
    (by default 2-10 runs x 3 or 9 processes x 0.5-5% sd)."""
    from benchmarks.quality.interval_coverage import coverage

    out = []
    if grid is None:
        grid = itertools.product((2, 3, 6, 10), (3, 9), (0.005, 0.02, 0.05))
    for i, (runs, processes, sd_e) in enumerate(grid):
        got = coverage(
            runs=runs,
            processes=processes,
            sd_e=sd_e,
            sims=sims,
            configs=8,
            shift=0.05,
            samples=20,
            sd_sample=0.03,
            outliers=0.05,
            seed=seed + i,
        )
        out.append({"runs": runs, "processes": processes, "sd_e": sd_e, **got})
    return out


def cost_figures(repeat: int) -> dict[str, float]:
    """CPU ms of compare_many + gate for 8 and 48 configurations (a head of 3 processes)
    against 6 baseline runs of 3 processes (keys "8", "48") and of 9, the product's baseline
    runs ("8/9", "48/9")."""
    import stats
    from benchmarks.quality.interval_coverage import draw_run

    out = {}
    rng = np.random.default_rng(0)
    for n, base_p in itertools.product((8, 48), (3, 9)):
        mu = np.log(rng.uniform(1e4, 1e6, n))
        args = (10, 0.01, 0.03, 0.05, 0.02, 0.01)
        runs = [draw_run(rng, mu, np.zeros(n), base_p, *args) for _ in range(6)]
        head = draw_run(rng, mu, np.zeros(n), 3, *args)
        # The server's base sides: read-only arrays parsed once per baseline set.
        pairs = [
            (list(stats.frozen_groups([g.tolist() for run in runs for g in run[c]])), head[c])
            for c in range(n)
        ]
        labels = [[r for r in range(6) for _ in range(base_p)]] * n
        # Prepared once, as the server does per baseline set (a tree before stats.prepare_baseline
        # keeps the base sides in its own caches instead).
        prepare = getattr(stats, "prepare_baseline", None)
        extra: dict[str, Any] = (
            {"baseline": prepare([p[0] for p in pairs], labels)}
            if prepare
            else {"base_runs": labels}
        )

        def regate(pairs: list[Any] = pairs, extra: dict[str, Any] = extra) -> None:
            cs = stats.compare_many(pairs, seed=0, **extra)
            stats.gate({str(i): c for i, c in enumerate(cs)})

        regate()  # the first call's imports and kept base sides are not a re-gate's
        times = []
        for _ in range(repeat):
            c0 = time.process_time()
            regate()
            times.append(time.process_time() - c0)
        out[str(n) if base_p == 3 else f"{n}/{base_p}"] = min(times) * 1e3
    return out


def _baseline_cuts(name: str, recorded: int, base_processes: str) -> list[tuple[str, int]]:
    """(label, processes) per replay setting of a corpus recorded with `recorded` processes a
    run: one of more than 3 has its baseline runs cut to each of --base-processes, one of 3 or
    fewer is replayed as recorded."""
    if recorded <= 3:
        return [(name, recorded)]
    cuts = sorted({min(int(x), recorded) for x in base_processes.split(",")})
    return [(f"{name}, baseline runs of {n} processes", n) for n in cuts]


def figures(args: argparse.Namespace) -> dict[str, Any]:
    from benchmarks.quality.verdict_runs import load

    only_open = args.added_process == "open"
    corpora = {}
    for d in args.runs_dir or sorted(DATA.glob("gpu-aa-*")):
        docs = load_runs(d)
        if len(docs) < 3:
            continue
        for name, n in _baseline_cuts(d.name, processes_of(docs[0]), args.base_processes):
            corpora[name] = run_figures(
                docs,
                history=args.history,
                unchanged=args.unchanged,
                per_config=args.per_config,
                seed=args.seed,
                base_processes=n,
                only_open=only_open,
                as_recorded=args.as_recorded,
            )
    busy = {}
    if args.cpu_per_config or args.cpu_unchanged:
        for path in args.cpu_corpus or sorted(DATA.glob("corpus-crossload*.npz")):
            recorded = min(len(r) for r in load(path).runs or [[]])
            for name, n in _baseline_cuts(path.stem, recorded, args.base_processes):
                busy[name] = busy_cpu_figures(
                    path,
                    history=args.history,
                    unchanged=args.cpu_unchanged,
                    per_config=args.cpu_per_config,
                    seed=args.seed,
                    base_processes=n,
                    only_open=only_open,
                )
    return {
        "corpora": corpora,
        "busy_cpu": busy,
        "coverage": coverage_figures(args.sims, args.seed) if args.sims else [],
        "sims": args.sims,
        "cost_ms": cost_figures(args.repeat) if args.repeat else {},
    }


def _weakest(figures: dict[str, Any], key: str) -> str:
    """The range of figures[key] (a share per configuration) and its weakest configuration,
    beside the range (5-95%) the weakest would have by chance alone if every configuration
    were flagged at the pooled share: the weakest of 48 configurations at 10 replays each
    reads 70% where every one is flagged 93%."""
    shares: dict[str, float] = figures[key]
    per_config: int = figures["per_config"]
    k = min(shares, key=lambda x: shares[x])
    pooled = sum(shares.values()) / len(shares)
    lo, hi = _worst_by_chance(np.full(len(shares), per_config), pooled)
    return (
        f"{min(shares.values()):.0%}-{max(shares.values()):.0%} (weakest {k}: {shares[k]:.0%}; "
        f"pooled {pooled:.1%} of {per_config} a configuration, where the weakest would be "
        f"{lo:.0%}-{hi:.0%} by chance)"
    )


def _by_condition_lines(split: dict[str, list[list[int]]] | None) -> list[str]:
    """The busy-CPU figures by the head's condition: where a one-condition history misreads it."""
    if not split:
        return []
    out = []
    for key, what in (
        ("covered", "coverage"),
        ("flagged", "15% slower flagged, pooled"),
        ("missed", "15% slower PASSed with the slowed configuration itself `slower`"),
    ):
        parts = [
            f"head {cond} {n / total:.3f} of {total}"
            for cond, (n, total) in zip(
                ("quiet", "busy"), split.get(key, ((0, 0),) * 2), strict=True
            )
            if total
        ]
        if parts:
            out.append(f"  {what} by the head's condition: " + ", ".join(parts))
    return out


def _by_kernel(counts: dict[str, Any]) -> str:
    """Ratios pooled over each kernel's configurations ("conv2d[3]": a copy of conv2d), from
    (numerator, denominator) per configuration: a share from (held, of)."""
    by_kernel: dict[str, list[float]] = {}
    for cid, (held, n) in counts.items():
        kept = by_kernel.setdefault(cid.split("[")[0], [0, 0])
        kept[0] += held
        kept[1] += n
    return ", ".join(f"{k} {h / n:.3f}" for k, (h, n) in by_kernel.items() if n)


def pooled_coverage(cov: dict[str, tuple[int, int]]) -> float:
    """The share of a corpus's 90% intervals that held the truth, over its configurations
    (nan with none)."""
    total = sum(n for _, n in cov.values())
    return sum(h for h, _ in cov.values()) / total if total else float("nan")


def _coverage_line(cov: dict[str, tuple[int, int]], by_head: list[list[int]] | None) -> str:
    """Coverage of the 90% intervals on recorded runs, pooled and per configuration, beside
    the range the worst configuration's share would have (5-95%) if every interval covered
    exactly 90% and the replays were independent: with a few hundred intervals each, the worst
    of many configurations is low by chance alone (and more so on a corpus of few runs, whose
    replays share their heads). The pooled share's 90% interval resamples the recorded runs
    that were heads (by_head: covered and intervals per run): a corpus of 12 runs holds 12
    heads' errors, however many replays reuse them."""
    shares = {k: h / n for k, (h, n) in cov.items() if n}
    pooled = pooled_coverage(cov)
    spread = ""
    heads = np.array([r for r in by_head or () if r[1]])
    if len(heads) > 1:
        lo_p, hi_p = _resampling_heads([heads])
        spread = f" ({lo_p:.3f}-{hi_p:.3f} resampling its {len(heads)} heads)"
    k = min(shares, key=lambda x: shares[x])
    lo, hi = _worst_by_chance(np.array([n for _, n in cov.values() if n]), 0.9)
    return (
        f"  coverage of 90% intervals on these runs: {pooled:.3f} pooled{spread}; per "
        "configuration "
        f"{min(shares.values()):.3f}-{max(shares.values()):.3f} (worst {k}; at exactly 90% and "
        f"independent replays, the worst would be {lo:.3f}-{hi:.3f}: replays share their "
        "recorded heads, so the worst strays further)"
    )


def _own_coverage_lines(by_config_head: dict[str, list[list[int]]] | None) -> list[str]:
    """Is a configuration's coverage its own, or that of the few recorded heads its replays
    shared? Its share over half of the heads against its share over the other half: a
    configuration whose intervals are off by its own make (a kernel that moves its own way
    under load) is off in both halves, one off by the heads it happened to get is not. The rank
    correlation of the halves over the configurations, averaged over random halvings, beside
    the same with each head's counts shuffled among the configurations (the configurations made
    alike, each head's errors kept); and the worst configurations' shares in two halves."""
    if not by_config_head or len(by_config_head) < 3:
        return []
    counts = np.array(list(by_config_head.values()), dtype=float)  # (config, head, 2)
    counts = counts[:, counts[:, :, 1].sum(axis=0) > 0]  # the heads some replay had
    if counts.shape[1] < 4:
        return []
    rng = np.random.default_rng(0)
    halvings = [rng.permutation(counts.shape[1]) < counts.shape[1] // 2 for _ in range(20)]

    def halves(c: np.ndarray, half: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        a, b = c[:, half].sum(axis=1), c[:, ~half].sum(axis=1)
        return a[:, 0] / np.maximum(a[:, 1], 1), b[:, 0] / np.maximum(b[:, 1], 1)

    def agreement(c: np.ndarray) -> float:
        return float(np.mean([_rank_correlation(*halves(c, h)) for h in halvings]))

    seen = agreement(counts)
    alike = []
    for _ in range(200):
        shuffled = counts.copy()
        for h in range(counts.shape[1]):
            shuffled[:, h] = counts[rng.permutation(len(counts)), h]
        alike.append(agreement(shuffled))
    lo, hi = np.quantile(alike, [0.05, 0.95])
    p = (1 + sum(a >= seen for a in alike)) / (1 + len(alike))
    a, b = halves(counts, halvings[0])
    share = counts[:, :, 0].sum(axis=1) / counts[:, :, 1].sum(axis=1)
    names = list(by_config_head)
    worst = ", ".join(f"{names[i]} {a[i]:.2f} / {b[i]:.2f}" for i in np.argsort(share)[:3])
    return [
        "  coverage per configuration, its own or its heads': over two halves of the heads, rank "
        f"correlation {seen:.2f} (configurations made alike: {lo:.2f} to {hi:.2f}; p = {p:.3f}); "
        f"the worst in two halves: {worst}"
    ]


def _rank_correlation(x: np.ndarray, y: np.ndarray) -> float:
    """Spearman's rank correlation (0 where either is constant)."""
    from scipy.stats import rankdata

    rx, ry = rankdata(x), rankdata(y)
    if rx.std() == 0 or ry.std() == 0:
        return 0.0
    return float(np.corrcoef(rx, ry)[0, 1])


def _pooled_coverage_lines(corpora: dict[str, Any], what: str) -> list[str]:
    """Coverage pooled over the corpora replayed with baseline runs of the same processes, its
    5-95% range resampling each corpus's heads within it: one corpus of 12 runs holds only 12
    heads' errors, and its share strays 3-4 points either way; several recorded on different
    days hold more."""
    by_setting: dict[int, list[np.ndarray]] = {}
    for f in corpora.values():
        heads = np.array([r for r in f.get("coverage_by_head") or () if r[1]])
        if len(heads) > 1:
            by_setting.setdefault(f["base_processes"], []).append(heads)
    lines = []
    for processes, sets in sorted(by_setting.items()):
        if len(sets) < 2:
            continue
        covered = sum(int(h[:, 0].sum()) for h in sets)
        total = sum(int(h[:, 1].sum()) for h in sets)
        lo, hi = _resampling_heads(sets)
        lines.append(
            f"coverage of 90% intervals, the {len(sets)} {what} with baseline runs of {processes} "
            f"processes pooled: {covered / total:.3f} ({lo:.3f}-{hi:.3f} resampling each "
            f"corpus's heads; {sum(len(h) for h in sets)} heads)"
        )
    return lines


def _resampling_heads(sets: list[np.ndarray]) -> tuple[float, float]:
    """5-95% range of the coverage pooled over `sets` (per corpus, covered and intervals per
    head), resampling each corpus's heads within it."""
    rng = np.random.default_rng(0)
    draws = sum(h[rng.integers(len(h), size=(2000, len(h)))].sum(axis=1) for h in sets)
    lo, hi = np.quantile(draws[:, 0] / draws[:, 1], [0.05, 0.95])
    return float(lo), float(hi)


def expected_worst(sims: int, settings: int, configs: int = 8) -> tuple[float, float]:
    """5-95% range of the worst of settings x configs coverage shares, each of sims
    intervals, if every interval covered exactly 90%."""
    return _worst_by_chance(np.full(settings * configs, sims), 0.9)


def _worst_by_chance(sizes: np.ndarray, share: float) -> tuple[float, float]:
    """5-95% range of the lowest of len(sizes) shares, share i of sizes[i] independent trials
    that each succeed with probability `share`."""
    rng = np.random.default_rng(0)
    worst = (rng.binomial(sizes, share, (2000, len(sizes))) / sizes).min(axis=1)
    lo, hi = np.quantile(worst, [0.05, 0.95])
    return float(lo), float(hi)


def report(name: str, got: dict[str, Any]) -> list[str]:
    lines = [f"[{name}]"]
    for corpus, f in got["corpora"].items():
        lines += [
            f"{corpus}: {f['runs']} runs, {f['history']} baseline runs a replay; head from 3 "
            f"of {f['recorded']} recorded processes, {f['added']:.2f} added on average",
            f"  unchanged: PASS {f['pass']:.1%}, BLOCK {f['block']} of {f['replays']}",
        ]
        if f["flagged_5"]:
            lines += [
                f"  5% slower, flagged per configuration: {_weakest(f, 'flagged_5')}",
                f"  40% slower, BLOCK per configuration: {_weakest(f, 'blocked_40')}",
            ]
        if f.get("coverage"):
            lines.append(_coverage_line(f["coverage"], f.get("coverage_by_head")))
            lines += _own_coverage_lines(f.get("coverage_by_config_head"))
    lines += _pooled_coverage_lines(got["corpora"], "GPU corpora")
    for corpus, f in got.get("busy_cpu", {}).items():
        lines += [
            f"{corpus} (busy CPU): {f['runs']} runs, {f['history']} baseline runs a replay, "
            "quiet against busy and busy against quiet by turns; head from 3 of "
            f"{f['recorded']} recorded processes, {f['added']:.2f} added on average",
            f"  unchanged: PASS {f['pass']:.1%}, BLOCK {f['block']} of {f['replays']}",
        ]
        if f["flagged_15"]:
            lines += [
                f"  15% slower, flagged per configuration: {_weakest(f, 'flagged_15')}",
                f"  40% slower, BLOCK per configuration: {_weakest(f, 'blocked_40')}",
            ]
        if f.get("coverage"):
            lines.append(_coverage_line(f["coverage"], f.get("coverage_by_head")))
            lines += _own_coverage_lines(f.get("coverage_by_config_head"))
        lines += _by_condition_lines(f.get("by_condition"))
        if f.get("coverage"):
            lines.append(f"  coverage by kernel: {_by_kernel(f['coverage'])}")
        if f.get("errors") and any(v for _, v in f["errors"].values()):
            lines.append(
                "  the draws' median's squared error over their variance, by kernel: "
                + _by_kernel(f["errors"])
            )
        if f["flagged_15"]:
            flagged = {
                c: (v * f["per_config"], f["per_config"]) for c, v in f["flagged_15"].items()
            }
            lines.append(f"  15% slower flagged by kernel: {_by_kernel(flagged)}")
        if f.get("levels") and all(n for _, n in f["levels"].values()):
            (h50, n50), (h98, n98) = f["levels"]["50"], f["levels"]["98"]
            lines.append(
                f"  the draws' central 50% intervals cover {h50 / n50:.3f}, their 98% ones "
                f"{h98 / n98:.3f}"
            )
    lines += _pooled_coverage_lines(got.get("busy_cpu", {}), "busy-CPU corpora")
    if got["coverage"]:
        cov = got["coverage"]
        every = [c[k] for c in cov for k in ("changed", "unchanged")]
        lines.append(
            f"coverage of 90% intervals, model draws ({len(cov)} settings): "
            f"{min(every):.3f}-{max(every):.3f}; worst single configuration "
            f"{min(c['worst'] for c in cov):.3f} (at exactly 90%, the worst of these would be "
            "{:.3f}-{:.3f})".format(*expected_worst(got.get("sims", 300), len(cov)))
        )
        for c in cov:
            lines.append(
                f"  runs {c['runs']:>2} processes {c['processes']} sd_e {c['sd_e']:<5}: "
                f"changed {c['changed']:.3f} unchanged {c['unchanged']:.3f} "
                f"worst {c['worst']:.3f}"
            )
    cost = got["cost_ms"]
    if not cost:
        return lines
    line = f"re-gate statistics, CPU ms: 8 configurations {cost['8']:.1f}, 48 {cost['48']:.1f}"
    if "8/9" in cost:
        line += (
            f"; against baseline runs of 9 processes: 8 {cost['8/9']:.1f}, 48 {cost['48/9']:.1f}"
        )
    lines.append(line)
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs-dir", type=Path, action="append", help="a directory of runs")
    p.add_argument("--history", type=int, default=6, help="baseline runs a replay (6)")
    p.add_argument("--unchanged", type=int, default=1000, help="unchanged replays (1000)")
    p.add_argument("--per-config", type=int, default=40, help="replays per configuration (40)")
    p.add_argument("--sims", type=int, default=300, help="coverage: draws per setting (300)")
    p.add_argument("--repeat", type=int, default=15, help="re-gate cost: best of (15; 0: none)")
    p.add_argument("--cpu-corpus", type=Path, action="append", help="a busy-CPU corpus of runs")
    p.add_argument(
        "--cpu-unchanged", type=int, default=200, help="busy CPU: unchanged replays (200)"
    )
    p.add_argument(
        "--cpu-per-config", type=int, default=20, help="busy CPU: replays per configuration (20)"
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--base-processes",
        default="3,6,9",
        help="baseline runs' processes, for corpora recorded with more than 3 (3,6,9)",
    )
    p.add_argument(
        "--added-process",
        choices=("every", "open"),
        default="every",
        help="what a process added by adaptive sampling measures: every configuration (every, "
        "the harness's rule) or the configurations still open (open, the rule before)",
    )
    p.add_argument(
        "--as-recorded",
        action="store_true",
        help="replay each recorded H200 run's first processes, not a random draw of them (the "
        "replays before 2026-12-05)",
    )
    p.add_argument(
        "--jobs",
        type=int,
        default=1,
        help="split the replays over this many processes, each with its own seed (1)",
    )
    p.add_argument("--main", type=Path, help="a worktree of main: its figures side by side")
    p.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = p.parse_args(argv)
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores", file=sys.stderr)
    if args.main is not None:
        # The same figures with main's statistics: this script, main's packages first.
        theirs = json.loads(_run_with_main_packages(args.main, ["--json", *_argv(args)]))
        theirs.setdefault("sims", args.sims)
    got = figures(args) if args.jobs <= 1 else _sharded(args)
    if args.json:
        print(json.dumps(got))
        return 0
    print("\n".join(report("this tree", got)))
    if args.main is not None:
        print("\n".join(report(f"main ({args.main})", theirs)))
    return 0


def _argv(args: argparse.Namespace, **override: Any) -> list[str]:
    """The flags that make these figures (override: some of them changed), for a subprocess."""
    values = {**vars(args), **override}
    out = []
    for flag in ("history", "unchanged", "per_config", "sims", "repeat", "seed"):
        out += [f"--{flag.replace('_', '-')}", str(values[flag])]
    for flag in ("cpu_unchanged", "cpu_per_config", "base_processes", "added_process", "jobs"):
        out += [f"--{flag.replace('_', '-')}", str(values[flag])]
    if values["as_recorded"]:
        out.append("--as-recorded")
    for d in values["cpu_corpus"] or []:
        out += ["--cpu-corpus", str(d.resolve())]
    for d in values["runs_dir"] or []:
        out += ["--runs-dir", str(d.resolve())]
    return out


def _sharded(args: argparse.Namespace) -> dict[str, Any]:
    """figures(args) from --jobs processes side by side, each with its own seed and its share
    of every replay count (the model draws and the cost in the first alone), merged: replays of
    one corpus are independent draws, so shares and counts add up."""
    n = args.jobs

    def share(count: int) -> int:
        return -(-count // n)  # at least the asked-for count in all

    jobs = []
    for i in range(n):
        argv = _argv(
            args,
            jobs=1,
            seed=args.seed + 1000 * i,
            unchanged=share(args.unchanged),
            per_config=share(args.per_config),
            cpu_unchanged=share(args.cpu_unchanged),
            cpu_per_config=share(args.cpu_per_config),
            sims=args.sims if i == 0 else 0,
            repeat=args.repeat if i == 0 else 0,
        )
        script = str(Path(__file__).resolve())
        jobs.append(
            subprocess.Popen([sys.executable, script, "--json", *argv], stdout=subprocess.PIPE)
        )
    shards = []
    for job in jobs:
        out, _ = job.communicate()
        if job.returncode:
            raise SystemExit(f"a shard of the figures failed (exit {job.returncode})")
        shards.append(json.loads(out))
    return merge_shards(shards)


def merge_shards(shards: list[dict[str, Any]]) -> dict[str, Any]:
    """Figures of several shards as one: shares weighted by their replays, counts summed."""
    first = shards[0]
    merged = {**first}
    for kind in ("corpora", "busy_cpu"):
        merged[kind] = {}
        for name, f in first[kind].items():
            parts = [s[kind][name] for s in shards]
            replays = sum(p["replays"] for p in parts)
            per_config = sum(p["per_config"] for p in parts)
            one = {**f, "replays": replays, "per_config": per_config}
            one["pass"] = sum(p["pass"] * p["replays"] for p in parts) / max(replays, 1)
            one["block"] = sum(p["block"] for p in parts)
            one["added"] = float(np.mean([p["added"] for p in parts]))
            for key in ("flagged_5", "flagged_15", "blocked_40"):
                if key in f:
                    one[key] = {
                        c: sum(p[key][c] * p["per_config"] for p in parts) / max(per_config, 1)
                        for c in f[key]
                    }
            for pairs in ("coverage", "errors"):  # (held, of) or (squared error, variance)
                if pairs in f:
                    seen = dict.fromkeys(c for p in parts for c in p[pairs])  # in their order
                    one[pairs] = {
                        c: [sum(p[pairs].get(c, (0, 0))[i] for p in parts) for i in (0, 1)]
                        for c in seen
                    }
            one["coverage_by_head"] = np.sum([p["coverage_by_head"] for p in parts], 0).tolist()
            per_head = [p["coverage_by_config_head"] for p in parts]
            one["coverage_by_config_head"] = {
                c: np.sum([p[c] for p in per_head if c in p], 0).tolist()
                for c in dict.fromkeys(c for p in per_head for c in p)  # in their order
            }
            for counts in ("levels", "by_condition"):  # (busy CPU) tables of counts
                if counts in f:
                    one[counts] = {
                        k: np.sum([p[counts][k] for p in parts], 0).tolist() for k in f[counts]
                    }
            merged[kind][name] = one
    return merged


def _run_with_main_packages(main_tree: Path, argv: list[str]) -> str:
    """This script's stdout, run with main's packages (stats, rnx, bench_runner, ...) and this
    tree's benchmarks, so both sides are measured by the same harness."""
    root = Path(__file__).resolve().parents[2]
    path = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    with tempfile.TemporaryDirectory() as links:
        for pkg in main_tree.resolve().iterdir():
            if (pkg / "__init__.py").exists() and pkg.name != "benchmarks":
                (Path(links) / pkg.name).symlink_to(pkg)
        done = subprocess.run(
            [sys.executable, str(Path(__file__).resolve()), *argv],
            env={**os.environ, "PYTHONPATH": os.pathsep.join([links, str(root), *path])},
            cwd=root,
            capture_output=True,
            text=True,
            check=True,
        )
    return done.stdout


if __name__ == "__main__":
    raise SystemExit(main())
