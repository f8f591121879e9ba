"""Change points on TCPD's annotated real series, scored as its paper scores them.

Run `.venv/bin/python -m benchmarks.quality.changepoint_tcpd` (about a minute, plus Otava's
installation the first time; `--no-references` leaves Otava out, `--series a,b` scores only
the named series). Also run by
`benchmarks.quality.changepoint_reference` after the test-suite cases.

The series are the univariate ones of the Turing Change Point Dataset (van den Burg and
Williams 2020, "An Evaluation of Change Point Detection Algorithms", arXiv:2003.06222), with
each annotator's change points: `benchmarks/data/tcpd/` (source, licences, and which series
are missing: those the dataset only builds by download). Each is scored with the paper's two
metrics (our own code, `f1` and `cover` below) for:

- `ours`: `stats.detect` with its defaults on the whole series (on the logs of the values
  when all are positive, as the server passes run locations, else the values);
- `server`: `stats.detect` as the server runs it, after every point on the newest 200, with
  what it reported before as known (`changepoint_noise.incremental`);
- `otava`: Apache Otava 0.8.0 with its defaults (`compute_change_points`: window 50,
  p 0.001), on the values, in its own virtual environment;
- `zero`: no change point at all, the paper's baseline.

A drift of ours counts as two change points, its start and its end (the first point at its new
level): it divides the series into three segments. Printed per series and as the mean over all
series and over the piecewise-constant ones (see `piecewise_constant`).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

import stats
from benchmarks.quality.changepoint_noise import incremental

DATA = Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "tcpd"
MARGIN = 5  # the paper's margin: a predicted change point within 5 of an annotated one is a hit
WINDOW = 200  # the server's window (gate_server/changes.py)
PIECEWISE_RHO = 0.5  # see piecewise_constant

Annotations = dict[str, list[int]]


def load() -> dict[str, dict[str, Any]]:
    """TCPD's univariate series: name -> {"values": [float | None], "annotations": {...}}."""
    series: dict[str, dict[str, Any]] = json.loads((DATA / "tcpd_univariate.json").read_text())[
        "series"
    ]
    return series


# ---------------------------------------------------------------- the paper's metrics


def _hits(truth: Iterable[int], predicted: Iterable[int], margin: int) -> int:
    """How many of `truth` have a predicted point within `margin`, each predicted point
    standing for at most one of them (the nearest free one, truth taken in order)."""
    free = sorted(set(predicted))
    hits = 0
    for t in sorted(set(truth)):
        near = [p for p in free if abs(p - t) <= margin]
        if near:
            free.remove(min(near, key=lambda p: (abs(p - t), p)))
            hits += 1
    return hits


def f1(annotations: Annotations, predicted: Sequence[int], *, margin: int = MARGIN) -> float:
    """The paper's F1 over several annotators: precision against the union of all annotators'
    points, recall the mean over annotators; the series' start (0) counts as a change point of
    every annotator and of every prediction, so that "no change" is scored too."""
    found = {0, *predicted}
    every = [{0, *points} for points in annotations.values()]
    union = set().union(*every)
    precision = _hits(union, sorted(found), margin) / len(found)
    recall = float(np.mean([_hits(t, sorted(found), margin) / len(t) for t in every]))
    return 0.0 if precision + recall == 0 else 2 * precision * recall / (precision + recall)


def _segments(points: Sequence[int], n: int) -> list[tuple[int, int]]:
    edges = sorted({0, n, *(p for p in points if 0 < p < n)})
    return list(zip(edges[:-1], edges[1:], strict=False))


def _cover_one(truth: list[tuple[int, int]], predicted: list[tuple[int, int]], n: int) -> float:
    """Each true segment's best Jaccard index with a predicted one, weighted by its length."""
    total = 0.0
    for a, b in truth:
        best = 0.0
        for c, d in predicted:
            overlap = min(b, d) - max(a, c)
            if overlap > 0:
                best = max(best, overlap / (max(b, d) - min(a, c)))
        total += (b - a) * best
    return total / n


def cover(annotations: Annotations, predicted: Sequence[int], n: int) -> float:
    """The paper's covering metric: the mean over annotators of how well the predicted segments
    cover theirs (`_cover_one`)."""
    mine = _segments(predicted, n)
    return float(np.mean([_cover_one(_segments(t, n), mine, n) for t in annotations.values()]))


# ---------------------------------------------------------------- the detectors


def _locations(values: list[float | None]) -> np.ndarray:
    """The values as `detect` gets them: logs when all are positive, else the values; NaN for a
    missing one."""
    y = np.array([np.nan if v is None else v for v in values], dtype=np.float64)
    present = y[~np.isnan(y)]
    return np.log(y) if np.all(present > 0) else y


def _points(changes: Sequence[stats.ChangePoint], n: int) -> list[int]:
    """A change's first point at its new level, and a drift's end too."""
    points = [cp.after for cp in changes]
    points += [cp.end for cp in changes if cp.end is not None and cp.end < n]
    return sorted(set(points))


def ours(values: list[float | None]) -> list[int]:
    return _points(stats.detect(_locations(values)), len(values))


def server(values: list[float | None]) -> list[int]:
    y = _locations(values)
    return _points([cp for _, cp, _ in incremental(y, WINDOW)], len(values))


def zero(values: list[float | None]) -> list[int]:
    return []


def otava_all(series: dict[str, dict[str, Any]], python: Path) -> dict[str, list[int] | str]:
    """Otava's change points per series (its defaults, on the values; missing values left out
    and the indices placed back); a series it fails on: the error."""
    from benchmarks.quality.changepoint_reference import REFERENCES

    names = list(series)
    present = {
        name: [i for i, v in enumerate(series[name]["values"]) if v is not None] for name in names
    }
    tasks = [[[series[m]["values"][i] for i in present[m]], {}, False] for m in names]
    done = subprocess.run(
        [str(python), "-c", REFERENCES["otava"][1]],
        input=json.dumps(tasks),
        capture_output=True,
        text=True,
        check=True,
    )
    found = json.loads(done.stdout)
    return {
        m: f if isinstance(f, str) else [present[m][i] for i in f if 0 <= i < len(present[m])]
        for m, f in zip(names, found, strict=True)
    }


# ---------------------------------------------------------------- the subset


def piecewise_constant(entry: dict[str, Any]) -> bool:
    """Whether a series is piecewise constant as annotated: about the median of each segment
    between the annotators' change points (all of them together), what is left is noise that
    does not run on (lag-1 autocorrelation below PIECEWISE_RHO). Trends, seasons and random
    walks leave residuals alike in a row; levels with noise do not."""
    y = _locations(entry["values"])
    points = sorted({p for t in entry["annotations"].values() for p in t})
    parts = []
    for a, b in _segments(points, len(y)):
        z = y[a:b][~np.isnan(y[a:b])]
        if len(z) > 1:
            parts.append(z - np.median(z))
    total = sum(float(np.dot(p, p)) for p in parts)
    if total == 0:
        return True
    rho = sum(float(np.dot(p[1:], p[:-1])) for p in parts) / total
    return rho < PIECEWISE_RHO


# ---------------------------------------------------------------- the table


Detector = Callable[[list[float | None]], list[int]]
DETECTORS: dict[str, Detector] = {"ours": ours, "server": server, "zero": zero}


def _detect(task: tuple[str, list[float | None]]) -> list[int]:
    name, values = task
    return DETECTORS[name](values)


def score(series: dict[str, dict[str, Any]], otava: Path | None) -> dict[str, dict[str, Any]]:
    """Per series and detector: the change points, F1 and cover (a failure: the error)."""
    tasks = [(name, m) for name in DETECTORS for m in series]
    # One process per core: the server's replay calls `detect` once per point of each series.
    with ProcessPoolExecutor(os.cpu_count() or 1) as pool:
        results = pool.map(_detect, [(name, series[m]["values"]) for name, m in tasks])
        found: dict[str, dict[str, list[int] | str]] = {name: {} for name in DETECTORS}
        for (name, m), p in zip(tasks, results, strict=True):
            found[name][m] = p
    if otava is not None:
        found["otava"] = otava_all(series, otava)
    scores: dict[str, dict[str, Any]] = {}
    for m, entry in series.items():
        n, marks = len(entry["values"]), entry["annotations"]
        scores[m] = {}
        for name in found:
            points = found[name][m]
            if isinstance(points, str):
                scores[m][name] = {"error": points, "f1": 0.0, "cover": 0.0, "points": []}
            else:
                scores[m][name] = {
                    "points": points,
                    "f1": f1(marks, points),
                    "cover": cover(marks, points, n),
                }
    return scores


def check_metrics(series: dict[str, dict[str, Any]]) -> float:
    """The largest difference between our F1/cover of "no change" and TCPDBench's published
    ones for the same series (both metrics)."""
    published = json.loads((DATA / "published_zero_scores.json").read_text())
    worst = 0.0
    for m, entry in series.items():
        mine = (f1(entry["annotations"], []), cover(entry["annotations"], [], len(entry["values"])))
        theirs = (published["f1"][m], published["cover"][m])
        worst = max(worst, *(abs(a - b) for a, b in zip(mine, theirs, strict=True)))
    return worst


def print_table(series: dict[str, dict[str, Any]], scores: dict[str, dict[str, Any]]) -> None:
    names = list(next(iter(scores.values())))
    flat = {m for m in series if piecewise_constant(series[m])}
    print(
        f"TCPD univariate series: {len(series)} ({len(flat)} piecewise constant, marked *); "
        f"F1 (margin {MARGIN}) / cover; change points found in brackets\n"
    )
    print("| series | points | " + " | ".join(names) + " |")
    print("|---|---|" + "---|" * len(names))
    for m in series:
        cells = []
        for name in names:
            s = scores[m][name]
            extra = f" ({s['error'][:30]})" if "error" in s else f" [{len(s['points'])}]"
            cells.append(f"{s['f1']:.3f} / {s['cover']:.3f}{extra}")
        mark = "*" if m in flat else ""
        print(f"| {m}{mark} | {len(series[m]['values'])} | " + " | ".join(cells) + " |")
    for label, subset in (("all", list(series)), ("piecewise constant", sorted(flat))):
        means = [
            f"{np.mean([scores[m][n]['f1'] for m in subset]):.3f} / "
            f"{np.mean([scores[m][n]['cover'] for m in subset]):.3f}"
            for n in names
        ]
        print(f"| **mean, {label}** ({len(subset)}) | | " + " | ".join(means) + " |")


def run(*, references: bool, venvs: Path, only: Sequence[str] = ()) -> None:
    """Score every detector on TCPD and print the table (the reference benchmark calls this);
    `only`: the named series alone (all when empty)."""
    series = load()
    unknown = sorted(set(only) - set(series))
    if unknown:
        raise SystemExit(f"no such TCPD series: {', '.join(unknown)}")
    if only:
        series = {m: series[m] for m in series if m in only}
    print(
        f"metric check: our F1 and cover of 'no change' against TCPDBench's published ones, "
        f"largest difference {check_metrics(series):.2e}"
    )
    otava = None
    if references:
        from benchmarks.quality.changepoint_reference import install

        otava, status = install("otava", venvs)
        print(f"otava: {status}")
    print_table(series, score(series, otava))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--venvs", type=Path, default=Path("/tmp/rnx-changepoint-reference"))
    parser.add_argument("--no-references", action="store_true", help="leave Otava out")
    parser.add_argument(
        "--series", default="", help="comma-separated series names: score only these"
    )
    args = parser.parse_args()
    began = time.perf_counter()
    only = [m for m in args.series.split(",") if m]
    run(references=not args.no_references, venvs=args.venvs, only=only)
    print(f"\n{time.perf_counter() - began:.0f} s")


if __name__ == "__main__":
    main()
