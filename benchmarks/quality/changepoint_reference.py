"""Change points against the reference implementations' own test expectations, side by side.

Run `.venv/bin/python -m benchmarks.quality.changepoint_reference` (a few minutes the first
time, which installs the references; then about a minute). The cases are the series and the
expected change points of Apache Otava's and MongoDB's signal-processing-algorithms' own test
suites (`tests/data/changepoint_reference_cases.json`: 31 cases, the rule that picked them and
the commits they come from are in its "source"). For each case it prints the expectation, what
`stats.detect` finds (with its defaults, and at the test's own p-value), whether that matches,
and what Otava 0.8.0 and signal-processing-algorithms 2.1.6 from PyPI find on the same series.
`stats.detect` gets the logs of the values when all are positive (as the server passes run
locations), else the values; where a test sets Otava's minimum magnitude, only changes at
least that large count.

A match: as many change points as expected, each within TOLERANCE runs of its expected index
(a case that states only a count: the same count). The references run in their own virtual
environments under `--venvs` (their pinned numpy differs from ours), installed with pip when
missing; a reference that cannot be installed is named in the output and left out. Each runs
with its own test's parameters where the case is from its suite (p-value, window, minimum
magnitude, permutations; MongoDB's permutations seeded as its tests seed them) and with its
defaults on the other suite's cases; MongoDB's implementation is skipped on series longer than
`--reference-max-runs` (its own suite marks them slow: 90 s and 15 minutes).

Then TCPD's annotated real series with the paper's F1 and cover: ours (defaults and as the
server runs it), Otava and "no change", per series and overall
(`benchmarks.quality.changepoint_tcpd`; `--no-tcpd` leaves it out).
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

import stats

CASES = Path(__file__).resolve().parents[2] / "tests" / "data" / "changepoint_reference_cases.json"
TOLERANCE = 1  # runs: an index this close to the expected one matches it
Found = list[int] | list[tuple[int, int]] | str | None  # indices, spans, a failure, not run

# Each reference: its PyPI requirement and a program that reads [[series, params, own], ...]
# on stdin and prints one list of change-point indices per case.
REFERENCES = {
    "otava": (
        "apache-otava==0.8.0",
        """
import json, sys
from otava.analysis import compute_change_points, compute_change_points_orig
out = []
for series, p, own in json.load(sys.stdin):
    p = p if own else {}
    try:
        if "permutations" in p or p.get("original"):
            cps, _ = compute_change_points_orig(
                series, max_pvalue=p.get("max_pvalue", 0.001), seed=1)
        else:
            cps, _ = compute_change_points(
                series, window_len=p.get("window_len", 50),
                max_pvalue=p.get("max_pvalue", 0.001), min_magnitude=p.get("min_magnitude", 0.0))
        out.append(sorted(int(c.index) for c in cps))
    except Exception as e:  # a reference that fails on a series: shown, not fatal
        out.append(f"{type(e).__name__}: {e}"[:60])
print(json.dumps(out))
""",
    ),
    "mongodb": (
        "signal-processing-algorithms==2.1.6",
        """
import json, sys
from signal_processing_algorithms.determinism import deterministic_numpy_random
from signal_processing_algorithms.energy_statistics.energy_statistics import e_divisive
out = []
for series, p, own in json.load(sys.stdin):
    if series is None:
        out.append(None)
        continue
    p = p if own else {}
    try:
        with deterministic_numpy_random(p.get("seed", 1234)):
            found = e_divisive(series, pvalue=p.get("pvalue", 0.05),
                               permutations=p.get("permutations", 100))
        out.append(sorted(int(i) for i in found))
    except Exception as e:  # a reference that fails on a series: shown, not fatal
        out.append(f"{type(e).__name__}: {e}"[:60])
print(json.dumps(out))
""",
    ),
}


def load_cases() -> list[dict[str, Any]]:
    cases: list[dict[str, Any]] = json.loads(CASES.read_text())["cases"]
    return cases


def series_of(case: dict[str, Any]) -> list[float]:
    """A case's series; {"repeat": [[value, times], ...]} spells a long constant-run one."""
    s = case["series"]
    if isinstance(s, dict):
        return [float(v) for v, n in s["repeat"] for _ in range(n)]
    return [float(v) for v in s]


def ours(
    series: list[float], params: dict[str, Any], *, own_p: bool = False
) -> list[tuple[int, int]]:
    """stats.detect with its defaults (or, `own_p`, at the test's own p-value), on logs when
    every value is positive (run locations are logs of times), else on the values themselves;
    where the test sets Otava's minimum magnitude, only the changes of at least that relative
    size count (as Otava filters). Each change as (first run, last run): a step is one run, a
    drift the runs from its start to its end."""
    y = np.array(series)
    smallest = params.get("min_magnitude", 0.0)
    p_value = params.get("max_pvalue", params.get("pvalue", 0.0005)) if own_p else 0.0005
    found = stats.detect(np.log(y) if np.all(y > 0) else y, p_value=p_value)
    return [(cp.after, cp.end or cp.after) for cp in found if abs(cp.ratio - 1) >= smallest]


def matches(expected: list[int] | dict[str, int], found: Found) -> bool | None:
    """Whether `found` reproduces `expected`: a reference's indices, the same number each
    within TOLERANCE; ours, each expected index within TOLERANCE of a step or inside a drift
    (a drift stands for the staircase of one or two steps the references cut it into), and
    each of ours holding at least one (a count: between our changes and that plus one per
    drift)."""
    if found is None:
        return None
    if isinstance(found, str):
        return False  # the reference failed on it
    spans = [(f, f) if isinstance(f, int) else f for f in found]
    drifts = sum(hi > lo for lo, hi in spans)
    if isinstance(expected, dict):
        first = expected.get("first")
        same_first = first is None or (bool(spans) and abs(spans[0][0] - first) <= TOLERANCE)
        return len(spans) <= expected["count"] <= len(spans) + drifts and same_first
    if not drifts:
        return len(spans) == len(expected) and all(
            abs(f - e) <= TOLERANCE
            for (f, _), e in zip(sorted(spans), sorted(expected), strict=True)
        )

    def inside(e: int, span: tuple[int, int]) -> bool:
        return span[0] - TOLERANCE <= e <= span[1] + TOLERANCE

    return all(any(inside(e, sp) for sp in spans) for e in expected) and all(
        any(inside(e, sp) for e in expected) for sp in spans
    )


def _show(found: list[int] | dict[str, int] | Found) -> str:
    if found is None or isinstance(found, str):
        return found or "not run"
    if isinstance(found, dict):
        return " ".join(f"{k} {v}" for k, v in found.items())
    shown = [f if isinstance(f, int) else f[0] if f[0] == f[1] else f"{f[0]}-{f[1]}" for f in found]
    return str(shown).replace("'", "") if len(found) <= 8 else f"{len(found)} change points"


def install(name: str, venvs: Path) -> tuple[Path | None, str]:
    """The reference's python, installing it when missing; (None, why) when it cannot be."""
    requirement, _ = REFERENCES[name]
    env = venvs / name
    python = env / "bin" / "python"
    module = "otava" if name == "otava" else "signal_processing_algorithms"
    if python.exists() and _imports(python, module):
        return python, "installed"
    try:
        subprocess.run([sys.executable, "-m", "venv", str(env)], check=True, capture_output=True)
        subprocess.run(
            [str(python), "-m", "pip", "install", "-q", requirement],
            check=True,
            capture_output=True,
            text=True,
            timeout=900,
        )
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError) as e:
        detail = getattr(e, "stderr", "") or str(e)
        return None, f"cannot be installed here ({requirement}): {detail.strip()[-300:]}"
    return python, "installed now"


def _imports(python: Path, module: str) -> bool:
    probe = subprocess.run([str(python), "-c", f"import {module}"], capture_output=True)
    return probe.returncode == 0


def run_reference(
    name: str, python: Path, cases: list[dict[str, Any]], max_runs: int
) -> list[Found]:
    """The reference's change points per case (None: not run on it)."""
    _, program = REFERENCES[name]
    tasks = []
    for case in cases:
        series = series_of(case)
        skip = name == "mongodb" and len(series) > max_runs
        params = dict(case.get("params", {}))
        if case["test"].endswith("test_single_series_original"):
            params["original"] = True
        if case["test"].endswith("test_regression_and_recovery"):
            params["seed"] = 1000  # its test's own seed
        tasks.append([None if skip else series, params, case["suite"] == name])
    done = subprocess.run(
        [str(python), "-c", program],
        input=json.dumps(tasks),
        capture_output=True,
        text=True,
        check=True,
    )
    found: list[Found] = json.loads(done.stdout)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--venvs", type=Path, default=Path("/tmp/rnx-changepoint-reference"))
    parser.add_argument("--reference-max-runs", type=int, default=1300)
    parser.add_argument("--no-references", action="store_true", help="the expectations only")
    parser.add_argument("--no-tcpd", action="store_true", help="leave out TCPD's real series")
    args = parser.parse_args()
    cases = load_cases()
    began = time.perf_counter()
    found: dict[str, list[Found]] = {
        "ours": [ours(series_of(c), c.get("params", {})) for c in cases],
        "ours at the test's p": [
            ours(series_of(c), c.get("params", {}), own_p=True) for c in cases
        ],
    }
    for name in () if args.no_references else REFERENCES:
        python, status = install(name, args.venvs)
        print(f"{name}: {status}")
        if python is not None:
            found[name] = run_reference(name, python, cases, args.reference_max_runs)
    names = list(found)
    print(
        f"\n{len(cases)} cases; match: the same number, each within {TOLERANCE} run; a drift of"
        " ours (start-end) matches the one or two steps inside it\n"
    )
    print("| suite | test | runs | expected | " + " | ".join(names) + " |")
    print("|---|---|---|---|" + "---|" * len(names))
    score = dict.fromkeys(names, 0)
    runs = dict.fromkeys(names, 0)
    for i, case in enumerate(cases):
        cells = []
        for name in names:
            ok = matches(case["expected"], found[name][i])
            if ok is not None:
                score[name] += ok
                runs[name] += 1
            mark = "" if ok is None else (" ok" if ok else " MISS")
            cells.append(_show(found[name][i]) + mark)
        test = case["test"].split("::")[-1]
        n = len(series_of(case))
        print(
            f"| {case['suite']} | {test} | {n} | {_show(case['expected'])} | "
            + " | ".join(cells)
            + " |"
        )
    print()
    for name in names:
        print(f"{name}: {score[name]} of {runs[name]} reproduced")
    if not args.no_tcpd:
        # Its own process: that module uses `install` and REFERENCES from this one.
        tcpd = [sys.executable, "-m", "benchmarks.quality.changepoint_tcpd", "--venvs"]
        tcpd += [str(args.venvs), *(["--no-references"] if args.no_references else [])]
        print(flush=True)
        subprocess.run(tcpd, check=True)
    print(f"\n{math.ceil(time.perf_counter() - began)} s")


if __name__ == "__main__":
    main()
