"""Are a run's processes exchangeable? Does a process's place in its run move its times?

Run `python -m benchmarks.quality.process_order PATH [PATH ...]`, each a directory of `rnx bench`
results documents (one per run: benchmarks/data/gpu-aa-*) or a cross-load CPU corpus
(benchmarks/data/corpus-crossload*.npz). Per process index: each process's location (the band
mean of its log-times, as the verdict model reads a process, stats/bootstrap.LOW) less its run's
median process, averaged over the configurations, then its mean over the runs with that mean's
standard error, in %. Then a chi-square of those means over their standard errors against no
order effect (degrees of freedom: the indices less one, the run medians being taken out).

benchmarks/quality/verdict_model.py draws which of a run's processes a replay starts from on
this ground; a trend (a first process always slower, say) would show here as a small p.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
from scipy.stats import chi2

from stats.bootstrap import LOW


def _location(times: np.ndarray) -> float:
    """The band mean of the log-times with equal weights: LOW's band of the sorted samples."""
    x = np.sort(np.log(times))
    lo, hi = int(len(x) * LOW[0]), max(int(len(x) * LOW[1]), int(len(x) * LOW[0]) + 1)
    return float(x[lo:hi].mean())


def deviations(path: Path) -> np.ndarray:
    """(runs, processes): each process's deviation from its run's median process, averaged over
    the configurations."""
    if path.is_dir():
        from benchmarks.quality.verdict_model import load_runs, processes_of

        rows = []
        for doc in load_runs(path):
            n = processes_of(doc)
            per_config = []
            for cfg in doc.configurations:
                if cfg.samples is None:
                    continue
                ns = np.asarray(cfg.samples.ns, dtype=float)
                proc = np.asarray(cfg.samples.process)
                loc = np.array([_location(ns[proc == p]) for p in range(n)])
                per_config.append(loc - np.median(loc))
            rows.append(np.mean(per_config, axis=0))
        return np.array(rows)
    from benchmarks.quality.verdict_runs import load

    corpus = load(path)
    assert corpus.runs is not None, f"{path}: a corpus recorded as runs"
    n = min(len(r) for r in corpus.runs)
    _, n_k, n_l, _, _ = corpus.data.shape
    rows = []
    for jobs in corpus.runs:
        loc = np.array(
            [
                [_location(corpus.data[j, k, lv, :, 0]) for j in jobs[:n]]
                for k in range(n_k)
                for lv in range(n_l)
            ]
        )
        rows.append((loc - np.median(loc, axis=1, keepdims=True)).mean(axis=0))
    return np.array(rows)


def order_lines(path: Path) -> list[str]:
    dev = deviations(path)
    mean = dev.mean(axis=0)
    se = dev.std(axis=0, ddof=1) / np.sqrt(len(dev))
    stat = float(((mean / se) ** 2).sum())
    df = len(mean) - 1
    return [
        f"{path.name}: {len(dev)} runs of {dev.shape[1]} processes",
        "  mean deviation from the run's median process, by index (%): "
        + " ".join(f"{100 * m:+.2f}" for m in mean),
        "  its standard error over the runs (%): " + " ".join(f"{100 * s:.2f}" for s in se),
        f"  chi-square {stat:.1f} on {df} degrees of freedom: p = {chi2.sf(stat, df):.2f}",
    ]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("paths", type=Path, nargs="+")
    args = p.parse_args(argv)
    for path in args.paths:
        print("\n".join(order_lines(path)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
