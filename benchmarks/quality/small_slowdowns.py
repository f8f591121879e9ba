"""Why a recorded 5% slowdown is or is not flagged: the slowed configuration's own comparison.

Run `python -m benchmarks.quality.small_slowdowns --corpus benchmarks/data/corpus-gpu.npz`. Pull
requests
are drawn as benchmarks/quality/verdict_runs.py draws them (a head run of --processes processes, the
baseline runs beside it, --history of them or as many as the corpus has), with one
configuration, kernel by kernel in turn, its recorded 5% variant. Per kernel: how many runs were
flagged (WARN or BLOCK), how often the configuration's own verdict was `slower`, and the medians
of its ratio, its 90% interval's width and its resolution (the change its comparison resolves).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from benchmarks.quality.verdict_quality import server_history
from benchmarks.quality.verdict_runs import Scenario, _side, load, new_tier


def main(argv: list[str] | None = None) -> int:
    import stats

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--corpus", type=Path, required=True)
    p.add_argument("--processes", type=int, default=3)
    p.add_argument("--history", type=int, help="baseline runs (the server's, or all there are)")
    p.add_argument("--level", type=float, default=0.05, help="the recorded level (0.05)")
    p.add_argument("--runs", type=int, default=60, help="pull requests, spread over kernels")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    corpus = load(args.corpus)
    n_runs = len(corpus.runs) if corpus.runs is not None else corpus.data.shape[0]
    history = min(args.history or server_history(), n_runs - 1)
    rng = np.random.default_rng(args.seed)
    scen = Scenario(corpus, args.processes, rng)
    n_k, n_l = corpus.data.shape[1:3]
    li = corpus.levels.index(args.level)
    rows: dict[int, list[tuple[bool, bool, float, float, float]]] = {k: [] for k in range(n_k)}
    for r in range(args.runs):
        base_runs, head_jobs = scen.draw(history, None, None)
        labels = [i for i, b in enumerate(base_runs) for _ in b]
        base = _side(corpus.data, np.concatenate(base_runs), 0, 10, rng)
        twin = _side(corpus.data, head_jobs, 1, 10, rng)
        slowed = _side(corpus.data, head_jobs, 2, 10, rng)
        k = r % n_k
        c = k * n_l + li
        head = twin[:c] + [slowed[c]] + twin[c + 1 :]
        pairs = list(zip(base, head, strict=True))
        cs = stats.compare_many(pairs, seed=r, base_runs=[labels] * len(pairs))
        one = cs[c]
        flagged = new_tier(cs) in ("WARN", "BLOCK")
        rows[k].append(
            (flagged, one.verdict == "slower", one.ratio, one.high - one.low, one.resolution)
        )
    print(
        f"{args.corpus.name}: recorded {args.level:.0%} slowdown, head {args.processes} processes "
        f"against {history} baseline runs, {args.runs} pull requests\n"
        "| kernel | runs | run flagged | configuration `slower` | ratio | 90% interval width | "
        "resolution |\n|---|---|---|---|---|---|---|"
    )
    for k, got in rows.items():
        a = np.array(got, dtype=float)
        name = corpus.kernels[k] if corpus.kernels else str(k)
        print(
            f"| {name} | {len(got)} | {a[:, 0].mean():.0%} | "
            f"{a[:, 1].mean():.0%} | {np.median(a[:, 2]):.3f} | {np.median(a[:, 3]):.1%} | "
            f"{np.median(a[:, 4]):.1%} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
