"""The gate's tier per run, on every recorded corpus: what a pull request sees.

Run `python -m benchmarks.quality.verdict_runs` (all corpora in benchmarks/data; about 15 minutes
on 2
busy cores) or `--corpus benchmarks/data/corpus.npz` for one. Each simulated pull request is
one head run of --processes worker processes against --history baseline runs (the server's most,
and 1), 48 configurations, with the product's defaults (rope 2%, probability 0.95, block
threshold 25%, no kernalin.yml tuning). Per run it records the tier for:

- unchanged: every configuration is the A/A twin (v0', timed in the same rounds as v0);
- one configuration 40% slower: one configuration, chosen at random, is its recorded variant
  with 40% injected work (v2 at level 40%), the other 47 unchanged;
- 15% slower: the same, with the A/A twin's times multiplied by 1.15 (the CPU corpora have no
  recorded 15% level; the GPU corpus has, and is scored on it too);
- 5% slower: the recorded 5% level.

"new" is stats as it is now: baseline runs given to compare_many (the run-level model) and
stats.gate. "old" is the rule before issue 13, kept here to compare: compare_many without runs
(every baseline process an exchangeable group) and Holm's adjustment, with any "undecided" or
"slower" configuration making the run WARN.

Corpora without recorded runs (corpus-quiet, corpus, corpus-contiguous: one job = one process)
get runs of --processes jobs drawn at random, so their runs differ only as much as processes do.
Corpora with runs (corpus-crossload, corpus-gpu) keep each recorded run whole: its processes
shared their run's conditions. A recorded run of more processes than --processes (the GPU corpus
records 6, for replays of adaptive sampling) is scored by its first --processes, for the head and
for every baseline run alike, as a run of the harness's default would have measured it. A corpus
of fewer recorded runs than the server's history plus the head is scored with as many baseline
runs as it has beside the head; --run-size N cuts each recorded run into runs of N consecutive
processes instead (more runs, each sharing its recording run's conditions). The
cross-load corpus is scored quiet baselines against a busy head, the reverse, and like against
like.

Paired mode: each worker process times base and head round by round (v0 against v0' or v2);
one process of all its rounds is one paired run, scored by stats.gate now and by Holm before.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.quality.verdict_quality import ROOT, server_history

CORPORA = ("corpus-quiet", "corpus", "corpus-contiguous", "corpus-crossload", "corpus-gpu")
THRESHOLD = 0.25
SYNTHETIC = 0.15


@dataclass
class Corpus:
    name: str
    data: np.ndarray  # (jobs, kernels, levels, rounds, variants) time per call
    levels: list[float]
    runs: list[np.ndarray] | None  # job ids of each recorded run, if recorded as runs
    busy: np.ndarray  # (jobs,) ran beside a hog
    kernels: list[str] = field(default_factory=list)  # names, where the corpus records them


def load(path: Path, run_size: int | None = None) -> Corpus:
    """run_size: cut each recorded run into consecutive groups of that many processes, each
    then a run of its own (for a corpus of fewer, longer runs than the history needs)."""
    with np.load(path) as z:
        data = z["data"] / z["reps"][:, :, None, None, None]
        meta = json.loads(str(z["meta"]))
        run = z["run"] if "run" in z.files else None
        busy = z["hog"].astype(bool)
    runs = None
    if run is not None:
        runs = [np.flatnonzero(run == r) for r in np.unique(run)]
        if run_size:
            runs = [r[i : i + run_size] for r in runs for i in range(0, len(r), run_size)]
            runs = [r for r in runs if len(r) == run_size]
    return Corpus(path.stem, data, list(meta["levels"]), runs, busy, list(meta.get("kernels", [])))


@dataclass
class Tally:
    counts: dict[str, list[int]] = field(default_factory=dict)

    def add(self, key: str, hit: bool) -> None:
        c = self.counts.setdefault(key, [0, 0])
        c[0] += int(hit)
        c[1] += 1

    def rate(self, key: str) -> str:
        if key not in self.counts:
            return "-"
        hit, n = self.counts[key]
        return f"{100 * hit / n:.1f}%"

    def n(self, key: str) -> int:
        return self.counts.get(key, [0, 0])[1]


def old_flags(cs: list[Any], threshold: float = THRESHOLD) -> dict[int, str]:
    """The gate before issue 13, per configuration (index: BLOCK or WARN; unflagged ones left
    out): slower with Holm over P(ratio <= 1 + threshold) at 5% BLOCKs; undecided or slower
    WARNs."""
    import stats

    eligible = {str(i): c for i, c in enumerate(cs) if c.sufficient}
    adjusted = stats.holm({k: c.p_not_exceeding(threshold) for k, c in eligible.items()})
    flags = {}
    for i, c in enumerate(cs):
        if c.verdict == "slower" and adjusted.get(str(i), 1.0) <= 0.05:
            flags[i] = "BLOCK"
        elif c.verdict in ("slower", "undecided"):
            flags[i] = "WARN"
    return flags


def old_tier(cs: list[Any], threshold: float = THRESHOLD) -> str:
    """The run's tier before issue 13: the worst of its configurations' flags."""
    flags = set(old_flags(cs, threshold).values())
    return "BLOCK" if "BLOCK" in flags else "WARN" if flags else "PASS"


def new_tier(cs: list[Any]) -> str:
    import stats

    return stats.gate({str(i): c for i, c in enumerate(cs)}, block_threshold=THRESHOLD).tier


class Scenario:
    """Draws pull requests from a corpus: baseline runs and a head run, as job ids."""

    def __init__(self, corpus: Corpus, processes: int, rng: np.random.Generator) -> None:
        self.corpus, self.processes, self.rng = corpus, processes, rng

    def draw(
        self, history: int, base_pool: list[int] | None, head_pool: list[int] | None
    ) -> tuple[list[np.ndarray], np.ndarray]:
        """(base runs' job ids, head run's job ids)."""
        runs = self.corpus.runs
        if runs is None:
            jobs = self.rng.choice(
                self.corpus.data.shape[0], size=(history + 1) * self.processes, replace=False
            )
            chunks = jobs.reshape(history + 1, self.processes)
            return list(chunks[:history]), chunks[history]
        base_ids = list(range(len(runs))) if base_pool is None else base_pool
        head_ids = list(range(len(runs))) if head_pool is None else head_pool
        head = int(self.rng.choice(head_ids))
        others = [r for r in base_ids if r != head]
        base = self.rng.choice(others, size=history, replace=False)
        # A run recorded with more processes than a run has here gives its first ones, as the
        # harness starts them; the rest are there for adaptive sampling's extra processes.
        first = self.processes
        return [runs[int(r)][:first] for r in base], runs[head][:first]


def _side(
    data: np.ndarray, jobs: np.ndarray, variant: int, samples: int, rng: np.random.Generator
) -> list[list[np.ndarray]]:
    """Per configuration (kernel-major), one group of `samples` consecutive rounds per job."""
    _, n_k, n_l, n_r, _ = data.shape
    take = min(samples, n_r)
    starts = rng.integers(0, n_r - take + 1, size=len(jobs))
    return [
        [data[j, k, lv, s0 : s0 + take, variant] for j, s0 in zip(jobs, starts, strict=True)]
        for k in range(n_k)
        for lv in range(n_l)
    ]


def score_unpaired(
    corpus: Corpus,
    *,
    history: int,
    processes: int,
    samples: int,
    runs: int,
    old_runs: int,
    seed: int,
    base_pool: list[int] | None = None,
    head_pool: list[int] | None = None,
) -> dict[str, Tally]:
    import stats

    rng = np.random.default_rng(seed)
    scen = Scenario(corpus, processes, rng)
    data = corpus.data
    n_k, n_l = data.shape[1], data.shape[2]
    levels = corpus.levels
    recorded = {
        name: levels.index(x)
        for name, x in (("40%", 0.40), ("15%", 0.15), ("5%", 0.05))
        if x in levels
    }
    tallies = {"new": Tally(), "old": Tally()}
    for r in range(runs):
        base_runs, head_jobs = scen.draw(history, base_pool, head_pool)
        base_jobs = np.concatenate(base_runs)
        labels = np.concatenate([np.full(len(b), i) for i, b in enumerate(base_runs)])
        base = _side(data, base_jobs, 0, samples, rng)
        aa = _side(data, head_jobs, 1, samples, rng)
        slowed = _side(data, head_jobs, 2, samples, rng)
        kernel = int(rng.integers(n_k))
        heads: dict[str, list[list[np.ndarray]]] = {"unchanged": aa}
        for name, li in recorded.items():
            c = kernel * n_l + li
            heads[f"{name} recorded"] = aa[:c] + [slowed[c]] + aa[c + 1 :]
        c = int(rng.integers(n_k * n_l))
        heads["15% synthetic"] = aa[:c] + [[g * (1 + SYNTHETIC) for g in aa[c]]] + aa[c + 1 :]
        for name, head in heads.items():
            pairs = list(zip(base, head, strict=True))
            cs = stats.compare_many(pairs, seed=seed + r, base_runs=[list(labels)] * len(pairs))
            _record(tallies["new"], name, new_tier(cs))
            if r < old_runs:
                _record(tallies["old"], name, old_tier(stats.compare_many(pairs, seed=seed + r)))
    return tallies


def score_paired(corpus: Corpus, *, runs: int, seed: int) -> dict[str, Tally]:
    import stats

    rng = np.random.default_rng(seed)
    data = corpus.data
    jobs, n_k, n_l = data.shape[:3]
    levels = corpus.levels
    tallies = {"new": Tally(), "old": Tally()}
    for r in range(min(runs, jobs)):
        j = r
        v = [[data[j, k, lv, :, x] for k in range(n_k) for lv in range(n_l)] for x in range(3)]
        kernel = int(rng.integers(n_k))
        heads = {"unchanged": v[1]}
        for name, x in (("40%", 0.40), ("15%", 0.15), ("5%", 0.05)):
            if x in levels:
                c = kernel * n_l + levels.index(x)
                heads[f"{name} recorded"] = v[1][:c] + [v[2][c]] + v[1][c + 1 :]
        c = int(rng.integers(n_k * n_l))
        heads["15% synthetic"] = v[1][:c] + [v[1][c] * (1 + SYNTHETIC)] + v[1][c + 1 :]
        for name, head in heads.items():
            pairs = [([b], [h]) for b, h in zip(v[0], head, strict=True)]
            cs = stats.compare_many(pairs, seed=seed + r, paired=True)
            _record(tallies["new"], name, new_tier(cs))
            _record(tallies["old"], name, old_tier(cs))
    return tallies


def _record(t: Tally, scenario: str, tier: str) -> None:
    if scenario == "unchanged":
        for x in ("PASS", "WARN", "BLOCK"):
            t.add(f"unchanged {x}", tier == x)
    else:
        t.add(f"{scenario} BLOCK", tier == "BLOCK")
        t.add(f"{scenario} flagged", tier in ("WARN", "BLOCK"))


COLUMNS = (
    ("unchanged PASS", "unchanged PASS"),
    ("unchanged WARN", "unchanged WARN"),
    ("unchanged BLOCK", "unchanged BLOCK"),
    ("40% BLOCK", "40% recorded BLOCK"),
    ("15% flagged (synthetic)", "15% synthetic flagged"),
    ("15% flagged (recorded)", "15% recorded flagged"),
    ("5% flagged", "5% recorded flagged"),
    ("5% BLOCK", "5% recorded BLOCK"),
)


def table(rows: list[tuple[str, Tally]]) -> str:
    lines = [
        "| rule, scenario | runs | " + " | ".join(c[0] for c in COLUMNS) + " |",
        "|" + "---|" * (len(COLUMNS) + 2),
    ]
    for label, t in rows:
        cells = [t.rate(key) for _, key in COLUMNS]
        lines.append(f"| {label} | {t.n('unchanged PASS')} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def analyse(
    path: Path,
    *,
    processes: int,
    samples: int,
    runs: int,
    old_runs: int,
    seed: int,
    paired: bool,
    unpaired: bool = True,
    run_size: int | None = None,
    histories: list[int] | None = None,
) -> None:
    """histories: baseline runs per pull request (default: the server's most, and 1)."""
    corpus = load(path, run_size)
    started = time.monotonic()
    history = server_history()
    if corpus.runs is not None and len(corpus.runs) <= history:
        # Too few recorded runs for the server's history: as many as there are beside the head.
        history = len(corpus.runs) - 1
    depths = sorted(set(histories or [history, 1]), reverse=True)
    rows: list[tuple[str, Tally]] = []
    scenarios: list[tuple[str, list[int] | None, list[int] | None]] = [("", None, None)]
    if corpus.runs is not None and corpus.busy.any():
        quiet = [i for i, r in enumerate(corpus.runs) if not corpus.busy[r].any()]
        busy = [i for i, r in enumerate(corpus.runs) if corpus.busy[r].all()]
        scenarios = [
            ("base quiet, head busy", quiet, busy),
            ("base busy, head quiet", busy, quiet),
            ("base quiet, head quiet", quiet, quiet),
        ]
    for k in depths if unpaired else []:
        for label, base_pool, head_pool in scenarios:
            if base_pool is not None and len(base_pool) < k + (base_pool is head_pool):
                continue
            t = score_unpaired(
                corpus,
                history=k,
                processes=processes,
                samples=samples,
                runs=runs,
                old_runs=old_runs if k == history else 0,
                seed=seed,
                base_pool=base_pool,
                head_pool=head_pool,
            )
            what = f"{k} baseline run{'s' if k > 1 else ''}" + (f", {label}" if label else "")
            rows.append((f"new, {what}", t["new"]))
            if t["old"].counts:
                rows.append((f"old, {what}", t["old"]))
    if paired:
        t = score_paired(corpus, runs=runs, seed=seed)
        rows += [("new, paired (1 process)", t["new"]), ("old, paired (1 process)", t["old"])]
    shape = corpus.data.shape
    recorded_runs = "" if corpus.runs is None else f", {len(corpus.runs)} recorded runs"
    if run_size and corpus.runs is not None:
        recorded_runs = f", {len(corpus.runs)} runs of {run_size} (recorded runs cut in groups)"
    print(
        f"\n### {corpus.name}: {shape[0]} processes{recorded_runs}, "
        f"{shape[1] * shape[2]} configurations; head = 1 run of {processes} processes x "
        f"{samples} samples ({time.monotonic() - started:.0f} s)\n"
    )
    print(table(rows))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--corpus", type=Path, action="append", help="a corpus (default: all found)")
    p.add_argument("--processes", type=int, default=3, help="processes per run (3)")
    p.add_argument("--samples", type=int, default=10, help="samples per process (10)")
    p.add_argument("--runs", type=int, default=200, help="pull requests per row (200)")
    p.add_argument("--old-runs", type=int, default=100, help="of them scored the old way (100)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--run-size",
        type=int,
        help="cut each recorded run into runs of this many consecutive processes (default: whole)",
    )
    p.add_argument(
        "--histories",
        help="baseline runs per pull request, a comma list (default: the server's most, and 1)",
    )
    p.add_argument("--no-paired", action="store_true", help="skip paired mode")
    p.add_argument("--paired-only", action="store_true", help="only paired mode")
    args = p.parse_args(argv)
    paths: list[Path] = args.corpus or [
        ROOT / "benchmarks" / "data" / f"{name}.npz"
        for name in CORPORA
        if (ROOT / "benchmarks" / "data" / f"{name}.npz").exists()
    ]
    for path in paths:
        analyse(
            path,
            processes=args.processes,
            samples=args.samples,
            runs=args.runs,
            old_runs=min(args.old_runs, args.runs),
            seed=args.seed,
            paired=not args.no_paired,
            unpaired=not args.paired_only,
            run_size=args.run_size,
            histories=[int(h) for h in args.histories.split(",")] if args.histories else None,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
