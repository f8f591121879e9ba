"""How good is the verdict? Record a timing corpus here, then score our rule and known rules on it.

Run `python -m benchmarks.quality.verdict_quality` (record about 10 minutes, then analyse) or
`python -m benchmarks.quality.verdict_quality --corpus benchmarks/data/corpus.npz` (analyse a saved
corpus;
`--history-only` runs only the comparison the gate server makes: base = several baseline runs).
The recording: many separate processes ("CI jobs") time the same small torch kernels on CPU.
Each round times three variants in random order: the kernel (v0), the kernel again (v0', an
A/A twin measured in the same round) and the kernel plus injected extra work (a busy-wait of
a known fraction of the kernel's calibrated time, so the true slowdown is known). Some jobs run
with a CPU and memory hog on the other core. See docs/verdict-quality.md for the results.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_CORPUS = ROOT / "benchmarks" / "data" / "corpus.npz"

KERNELS = ("matmul", "softmax", "layer_norm", "conv2d", "gelu", "sum")
# Known slowdowns; 48 blocks = 6 kernels x 8 levels, one "configuration" each.
LEVELS = (0.0, 0.03, 0.05, 0.10, 0.20, 0.30, 0.40, 0.50)
ROUNDS = 30
TARGET_SAMPLE_NS = 150_000  # each sample times enough calls to last about this long


# ---------------------------------------------------------------- recording (one job = one process)


def _kernels() -> dict[str, Callable[[], object]]:
    import torch

    torch.manual_seed(0)
    a = torch.randn(128, 128)
    b = torch.randn(128, 128)
    x = torch.randn(64, 512)
    img = torch.randn(1, 8, 32, 32)
    w = torch.randn(8, 8, 3, 3)
    ln = torch.nn.LayerNorm(512)
    return {
        "matmul": lambda: torch.mm(a, b),
        "softmax": lambda: torch.softmax(x, dim=-1),
        "layer_norm": lambda: ln(x),
        "conv2d": lambda: torch.nn.functional.conv2d(img, w, padding=1),
        "gelu": lambda: torch.nn.functional.gelu(x),
        "sum": lambda: x.sum(dim=0),
    }


def _spin(ns: int) -> None:
    end = time.perf_counter_ns() + ns
    while time.perf_counter_ns() < end:
        pass


def worker(out: str, seed: int, layout: str = "interleaved") -> None:
    """One CI job: calibrate each kernel, then time rounds of three variants in random order.

    layout "interleaved" (like the harness): every round measures every (kernel, level) block
    once, in a fresh random order, so a block's samples are spread over the job's lifetime.
    layout "contiguous": a block's 30 rounds follow each other (about 15 ms), so one burst of
    noise from the rest of the machine can shift a whole block."""
    import torch

    torch.set_num_threads(1)
    rng = np.random.default_rng(seed)
    fns = _kernels()
    clock = time.perf_counter_ns
    data = np.zeros((len(KERNELS), len(LEVELS), ROUNDS, 3), dtype=np.int64)
    calib = np.zeros(len(KERNELS), dtype=np.int64)
    reps_of = np.zeros(len(KERNELS), dtype=np.int64)
    for k, name in enumerate(KERNELS):
        fn = fns[name]
        for _ in range(20):  # warm-up
            fn()
        once = []
        for _ in range(21):
            t0 = clock()
            fn()
            once.append(clock() - t0)
        reps_of[k] = max(1, int(TARGET_SAMPLE_NS // max(float(np.median(once)), 1.0)))
        trial = []
        for _ in range(15):
            t0 = clock()
            for _ in range(reps_of[k]):
                fn()
            trial.append(clock() - t0)
        calib[k] = int(np.median(trial))

    blocks = [(k, s) for k in range(len(KERNELS)) for s in range(len(LEVELS))]
    if layout == "interleaved":
        schedule = [(blocks[b], r) for r in range(ROUNDS) for b in rng.permutation(len(blocks))]
    else:
        schedule = [(block, r) for block in blocks for r in range(ROUNDS)]
    for (k, s), r in schedule:
        fn, reps = fns[KERNELS[k]], int(reps_of[k])
        extra = int(LEVELS[s] * calib[k])
        for v in rng.permutation(3):
            t0 = clock()
            for _ in range(reps):
                fn()
            if v == 2:
                _spin(extra)
            data[k, s, r, v] = clock() - t0
    np.savez(out, data=data, calib=calib, reps=reps_of)


def _hog() -> subprocess.Popen[bytes]:
    """A noisy neighbour: matrix products and large copies, single-threaded, on the other core."""
    code = (
        "import numpy as np\n"
        "a = np.random.rand(600, 600); big = np.random.rand(4_000_000)\n"
        "while True:\n"
        "    a @ a\n"
        "    big.copy()\n"
    )
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    return subprocess.Popen([sys.executable, "-c", code], env=env)


def record(jobs: int, hog_every: int, out: Path, tmp: Path, layout: str = "interleaved") -> None:
    tmp.mkdir(parents=True, exist_ok=True)
    datas, calibs, reps, hogs, loads = [], [], [], [], []
    started = time.monotonic()
    for j in range(jobs):
        hog = hog_every > 0 and j % hog_every == hog_every - 1
        loads.append(os.getloadavg()[0])  # other work on the machine is part of the noise
        hog_proc = _hog() if hog else None
        try:
            path = tmp / f"job{j}.npz"
            subprocess.run(
                [sys.executable, __file__, "--worker", str(path), "--seed", str(j)]
                + ["--layout", layout],
                check=True,
                env=dict(os.environ, OMP_NUM_THREADS="1"),
            )
        finally:
            if hog_proc is not None:
                hog_proc.kill()
                hog_proc.wait()
        with np.load(path) as z:
            datas.append(z["data"])
            calibs.append(z["calib"])
            reps.append(z["reps"])
        hogs.append(hog)
        path.unlink()
        print(f"job {j + 1}/{jobs} done ({time.monotonic() - started:.0f} s)", flush=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(
        out,
        data=np.stack(datas),
        calib=np.stack(calibs),
        reps=np.stack(reps),
        hog=np.array(hogs),
        load=np.array(loads),
        meta=json.dumps({"kernels": KERNELS, "levels": LEVELS, "rounds": ROUNDS}),
    )
    print(f"corpus saved to {out} ({out.stat().st_size / 1e6:.1f} MB)")


# ---------------------------------------------------------------- analysis


OURS = "ours (run-level model + min-P family control)"
RULES = (
    "Welch t-test p<0.05 (pyperf)",
    "Mann-Whitney U p<0.05 (Google Benchmark)",
    "ratio > 110% (github-action-benchmark)",
    "ratio > 150% (github-action-benchmark)",
    "asv: factor 1.1 and p<0.002",
)


def _rules(
    base: np.ndarray, head: np.ndarray, threshold: float
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """The rules users know, on pooled samples (configs x samples): name -> (slower, block)."""
    from scipy import stats as sps

    mean_ratio = head.mean(axis=1) / base.mean(axis=1)
    median_ratio = np.median(head, axis=1) / np.median(base, axis=1)
    welch = sps.ttest_ind(head, base, axis=1, equal_var=False).pvalue
    mwu = sps.mannwhitneyu(head, base, axis=1, alternative="two-sided").pvalue
    calls = {
        RULES[0]: ((welch < 0.05) & (mean_ratio > 1), mean_ratio),
        RULES[1]: ((mwu < 0.05) & (median_ratio > 1), median_ratio),
        RULES[2]: (mean_ratio > 1.10, mean_ratio),
        RULES[3]: (mean_ratio > 1.50, mean_ratio),
        RULES[4]: ((median_ratio > 1.10) & (mwu < 0.002), median_ratio),
    }
    return {name: (slow, slow & (ratio > 1 + threshold)) for name, (slow, ratio) in calls.items()}


def _gate_blocks(cs: list[Any], threshold: float) -> np.ndarray:
    """Which configurations our gate blocks when these comparisons form one run."""
    return _gate_run(cs, threshold)[0]


def _gate_run(cs: list[Any], threshold: float) -> tuple[np.ndarray, str]:
    """Our gate on these comparisons as one run: which configurations it blocks, and the tier."""
    import stats

    ids = [str(i) for i in range(len(cs))]
    decision = stats.gate(dict(zip(ids, cs, strict=True)), block_threshold=threshold)
    return np.array([i in decision.blocked for i in ids]), decision.tier


def _judge_run(
    aa_pairs: list[tuple[list[np.ndarray], list[np.ndarray]]],
    slow_pairs: list[tuple[list[np.ndarray], list[np.ndarray]]],
    level_of: np.ndarray,
    threshold: float,
    paired: bool,
    seed: int,
    tally: Tally,
    levels: tuple[float, ...] = LEVELS,
    base_runs: list[int] | None = None,
) -> None:
    """Score one run. The A/A run is all 48 unchanged configurations. For each slowdown level the
    run is that level's configurations slowed and the other configurations unchanged, so the
    gate's multiplicity adjustment sees what a real pull request that slows a few kernels gives."""
    import stats

    # One call for both, as one run's comparisons: the unchanged and the slowed variants were
    # timed in the same processes, so their posterior draws share those processes' weights.
    everyone = aa_pairs + slow_pairs
    runs = None if base_runs is None else [base_runs] * len(everyone)
    both = stats.compare_many(everyone, seed=seed, paired=paired, base_runs=runs)
    aa_cs, slow_cs = both[: len(aa_pairs)], both[len(aa_pairs) :]
    everything = np.ones(len(aa_cs), dtype=bool)

    def pooled(
        pairs: list[tuple[list[np.ndarray], list[np.ndarray]]],
    ) -> tuple[np.ndarray, np.ndarray]:
        base = np.stack([np.concatenate(b) for b, _ in pairs])
        head = np.stack([np.concatenate(h) for _, h in pairs])
        return base, head

    aa_rules = _rules(*pooled(aa_pairs), threshold)
    slow_rules = _rules(*pooled(slow_pairs), threshold)
    aa_slow = np.array([c.verdict == "slower" for c in aa_cs])
    tally.aa_max_ratio.append(max(c.ratio for c in aa_cs))
    aa_blocks, aa_tier = _gate_run(aa_cs, threshold)
    tally.add("A/A", {OURS: (aa_slow, aa_blocks)} | aa_rules, everything)
    # WARN per unchanged run: our gate's tier; for the other rules, a "slower" call without a
    # BLOCK anywhere in the run (they have no "undecided", so this flatters them slightly).
    tally.add_run("A/A", OURS, "WARN", aa_tier == "WARN")
    undecided = np.array([c.verdict == "undecided" for c in aa_cs])
    tally.add_count("A/A", OURS, "undecided", undecided)
    for rule, (slow, block) in aa_rules.items():
        tally.add_run("A/A", rule, "WARN", bool(slow.any() and not block.any()))
    slow_slow = np.array([c.verdict == "slower" for c in slow_cs])
    for li in range(1, int(level_of.max()) + 1):
        here = level_of == li
        mixed = [s if h else a for s, a, h in zip(slow_cs, aa_cs, here, strict=True)]
        calls = {OURS: (slow_slow, _gate_blocks(mixed, threshold))} | slow_rules
        tally.add(f"{levels[li]:.0%}", calls, here)
        tally.ratios.setdefault(f"{levels[li]:.0%}", []).extend(
            c.ratio for c, h in zip(slow_cs, here, strict=True) if h
        )


class Tally:
    """Counts calls per rule and per category (A/A, or a true slowdown level)."""

    def __init__(self) -> None:
        self.cfg: dict[tuple[str, str, str], list[int]] = {}
        self.run: dict[tuple[str, str, str], list[int]] = {}
        # Our point estimates: the largest A/A ratio of each run, and each slowed case's ratio.
        self.aa_max_ratio: list[float] = []
        self.ratios: dict[str, list[float]] = {}

    def add(
        self, category: str, calls: dict[str, tuple[np.ndarray, np.ndarray]], select: np.ndarray
    ) -> None:
        for rule, (slow, block) in calls.items():
            for kind, arr in (("slower", slow[select]), ("BLOCK", block[select])):
                hit = self.cfg.setdefault((category, rule, kind), [0, 0])
                hit[0] += int(arr.sum())
                hit[1] += arr.size
                run = self.run.setdefault((category, rule, kind), [0, 0])
                run[0] += int(arr.any())
                run[1] += 1

    def add_count(self, category: str, rule: str, kind: str, hits: np.ndarray) -> None:
        """Per-configuration outcomes only one rule has (our `undecided`)."""
        cfg = self.cfg.setdefault((category, rule, kind), [0, 0])
        cfg[0] += int(hits.sum())
        cfg[1] += hits.size

    def add_run(self, category: str, rule: str, kind: str, hit: bool) -> None:
        """A per-run outcome that has no per-configuration count (e.g. the run's tier is WARN)."""
        run = self.run.setdefault((category, rule, kind), [0, 0])
        run[0] += int(hit)
        run[1] += 1

    def rate(self, category: str, rule: str, kind: str, per_run: bool = False) -> str:
        table = self.run if per_run else self.cfg
        if (category, rule, kind) not in table:
            return "-"  # the rule has no such outcome (only ours says "undecided")
        hit, total = table[(category, rule, kind)]
        return f"{100 * hit / total:.1f}%"

    def total(self, category: str, per_run: bool = False) -> int:
        table = self.run if per_run else self.cfg
        return table[(category, OURS, "slower")][1]


def _table(
    title: str, tally: Tally, rules: list[str], columns: list[tuple[str, str, str, bool]]
) -> str:
    head = "| rule | " + " | ".join(c[0] for c in columns) + " |"
    lines = [f"#### {title}", "", head, "|" + "---|" * (len(columns) + 1)]
    for rule in rules:
        cells = [tally.rate(cat, rule, kind, per_run) for _, cat, kind, per_run in columns]
        lines.append(f"| {rule} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _load_corpus(path: Path) -> np.ndarray:
    """The corpus as time per call (jobs, kernels, levels, rounds, variants); prints what it is."""
    with np.load(path) as z:
        # A sample timed `reps` calls (fewer for slower kernels); compare time per call.
        data: np.ndarray = z["data"] / z["reps"][:, :, None, None, None]
        hog = z["hog"]
        load = z["load"]
    jobs, n_k, n_l, n_r, _ = data.shape
    print(
        f"corpus {path}: {jobs} jobs ({int(hog.sum())} beside a CPU hog), {n_k} kernels x "
        f"{n_l} levels = {n_k * n_l} configurations, {n_r} rounds each; 1-minute load average "
        f"while recording: median {np.median(load):.1f}, max {load.max():.1f} "
        f"on {os.cpu_count()} cores"
    )
    return data


def _levels(path: Path) -> tuple[float, ...]:
    """The injected slowdown levels the corpus was recorded with."""
    with np.load(path) as z:
        return tuple(float(x) for x in json.loads(str(z["meta"]))["levels"])


def analyse(
    path: Path,
    *,
    processes: int = 3,
    samples: int = 10,
    runs: int = 300,
    threshold: float = 0.25,
    seed: int = 0,
    timing: bool = True,
    paired_too: bool = True,
    speed_only: bool = False,
) -> int:
    data = _load_corpus(path)
    jobs, n_k, n_l, n_r, _ = data.shape
    levels = _levels(path)
    rng = np.random.default_rng(seed)
    kernel_of = np.repeat(np.arange(n_k), n_l)
    level_of = np.tile(np.arange(n_l), n_k)

    def side(job_ids: np.ndarray, variant: int) -> list[list[np.ndarray]]:
        starts = rng.integers(0, n_r - samples + 1, size=len(job_ids))
        return [
            [
                data[j, k, lv, s0 : s0 + samples, variant]
                for j, s0 in zip(job_ids, starts, strict=True)
            ]
            for k, lv in zip(kernel_of, level_of, strict=True)
        ]

    if speed_only:
        _timing(side, processes, rng)
        return 0

    unpaired = Tally()
    for r in range(runs):
        chosen = rng.choice(jobs, size=2 * processes, replace=False)
        b_jobs, h_jobs = chosen[:processes], chosen[processes:]
        base = side(b_jobs, 0)
        aa = list(zip(base, side(h_jobs, 1), strict=True))
        slow = list(zip(base, side(h_jobs, 2), strict=True))
        _judge_run(
            aa, slow, level_of, threshold, False, seed + 2 * r, unpaired, levels, [0] * processes
        )

    paired = Tally()
    for j in range(jobs if paired_too else 0):
        aa = [
            ([data[j, k, lv, :, 0]], [data[j, k, lv, :, 1]])
            for k, lv in zip(kernel_of, level_of, strict=True)
        ]
        slow = [
            ([data[j, k, lv, :, 0]], [data[j, k, lv, :, 2]])
            for k, lv in zip(kernel_of, level_of, strict=True)
        ]
        _judge_run(aa, slow, level_of, threshold, True, seed + 2 * j, paired, levels)

    rules = [OURS, *RULES]
    aa_cols = [
        ("false slower / config", "A/A", "slower", False),
        ("false slower / 48-config run", "A/A", "slower", True),
        ("false BLOCK / config", "A/A", "BLOCK", False),
        ("false BLOCK / 48-config run", "A/A", "BLOCK", True),
    ]
    lv = [f"{level:.0%}" for level in levels[1:]]
    sections = [
        (
            f"Unpaired: base and head from different processes ({processes} processes x "
            f"{samples} samples per side, {runs} runs of {n_k * n_l} configurations)",
            unpaired,
        )
    ]
    if paired_too:
        sections.append(
            (
                f"Paired: base and head interleaved in the same job ({n_r} rounds, one process, "
                f"{jobs} runs of {n_k * n_l} configurations)",
                paired,
            )
        )
    for title, tally in sections:
        print(f"\n### {title}\n")
        print(_table("A/A (no change)", tally, rules, aa_cols) + "\n")
        slower_cols = [(x, x, "slower", False) for x in lv]
        print(_table("slower called, by true slowdown", tally, rules, slower_cols) + "\n")
        block_cols = [(x, x, "BLOCK", False) for x in lv]
        print(
            _table(f"BLOCK, by true slowdown (threshold {threshold:.0%})", tally, rules, block_cols)
            + "\n"
        )
        print(
            f"cases per slowdown level: {tally.total(lv[0])}; A/A configurations: "
            f"{tally.total('A/A')}"
        )
        # How far apart are unchanged and slowed code in these samples, whatever the rule? Any
        # rule that blocks on a ratio estimate above some bar T needs T above the largest A/A
        # ratio of 99% of runs to keep false BLOCKs per run <= 1%.
        q = np.quantile(tally.aa_max_ratio, [0.5, 0.9, 0.99])
        above = ", ".join(
            f"{x} {np.mean(np.array(tally.ratios[x]) > q[2]):.0%}" for x in lv if x in tally.ratios
        )
        print(
            f"largest A/A ratio (our point estimate) in a run: median {q[0]:.3f}, 90th percentile "
            f"{q[1]:.3f}, 99th percentile {q[2]:.3f}; slowed cases whose ratio exceeds that 99th "
            f"percentile: {above}"
        )
    if timing:
        _timing(side, processes, rng)
    return 0


def server_history() -> int:
    """How many baseline runs the gate server compares a head run with at most: the newest one
    plus `baseline_history` earlier ones of the same branch and environment
    (gate_server/domain/baselines.py stops earlier only at a run a person accepted as the new
    normal)."""
    from gate_server.settings import ServerSettings

    return 1 + ServerSettings.baseline_history


def analyse_history(
    path: Path,
    *,
    history: int,
    processes: int = 3,
    samples: int = 10,
    runs: int = 300,
    threshold: float = 0.25,
    seed: int = 0,
) -> int:
    """The comparison the product makes: base = the newest `history` baseline runs, head = 1 run.

    Each run is `processes` separate processes of the corpus (`samples` consecutive samples each,
    from a random start); no process appears twice in one comparison. Our rule gets the base as
    the list of every baseline run's processes, newest run first, which is how rnx/verdict.py
    builds it for the server (checked on the first run against rnx.verdict.evaluate on real
    results documents); the other rules get all base samples in one list, as their users would
    pool history. The same head is also compared with the newest baseline run alone, so the two
    rows of each rule differ only in how much history the base has."""
    data = _load_corpus(path)
    jobs, n_k, n_l, n_r, _ = data.shape
    if (history + 1) * processes > jobs:
        raise SystemExit(
            f"--history {history} needs {(history + 1) * processes} separate processes, "
            f"the corpus has {jobs}; lower --history or --processes"
        )
    levels = _levels(path)
    rng = np.random.default_rng(seed)
    kernel_of = np.repeat(np.arange(n_k), n_l)
    level_of = np.tile(np.arange(n_l), n_k)

    def side(job_ids: np.ndarray, variant: int) -> list[list[np.ndarray]]:
        starts = rng.integers(0, n_r - samples + 1, size=len(job_ids))
        return [
            [
                data[j, k, lv, s0 : s0 + samples, variant]
                for j, s0 in zip(job_ids, starts, strict=True)
            ]
            for k, lv in zip(kernel_of, level_of, strict=True)
        ]

    depths = sorted({1, history})
    tallies = {k: Tally() for k in depths}
    started = time.monotonic()
    for r in range(runs):
        chosen = rng.choice(jobs, size=(history + 1) * processes, replace=False)
        b_jobs, h_jobs = chosen[: history * processes], chosen[history * processes :]
        # Per configuration: run 0's processes (the newest baseline), then run 1's, and so on.
        base_all = side(b_jobs, 0)
        head_aa, head_slow = side(h_jobs, 1), side(h_jobs, 2)
        if r == 0:
            _check_against_evaluate(base_all, head_slow, history, processes, seed)
        for k in depths:
            base = [groups[: k * processes] for groups in base_all]
            aa = list(zip(base, head_aa, strict=True))
            slow = list(zip(base, head_slow, strict=True))
            runs = [i for i in range(k) for _ in range(processes)]
            _judge_run(aa, slow, level_of, threshold, False, seed + 2 * r, tallies[k], levels, runs)
    elapsed = time.monotonic() - started

    def label(rule: str, k: int) -> str:
        return f"{rule}, base {k} run{'s' if k > 1 else ''}"

    rows = [(label(rule, k), tallies[k], rule) for rule in [OURS, *RULES] for k in depths]
    lv = [f"{level:.0%}" for level in levels[1:]]
    print(
        f"\n### History: base = the newest {history} baseline runs (the server's most) or the "
        f"newest 1, head = 1 run; {processes} processes x {samples} samples per run, "
        f"{(history + 1) * processes} distinct processes per comparison, {runs} runs of "
        f"{n_k * n_l} configurations ({elapsed:.0f} s)\n"
    )
    aa_cols = [
        ("false slower / config", "A/A", "slower", False),
        ("false slower / 48-config run", "A/A", "slower", True),
        ("false BLOCK / config", "A/A", "BLOCK", False),
        ("false BLOCK / 48-config run", "A/A", "BLOCK", True),
        ("undecided / config", "A/A", "undecided", False),
        ("WARN / 48-config run", "A/A", "WARN", True),
    ]
    print(_rows_table("A/A (no change)", rows, aa_cols) + "\n")
    slower_cols = [(x, x, "slower", False) for x in lv]
    print(_rows_table("slower called, by true slowdown", rows, slower_cols) + "\n")
    block_cols = [(x, x, "BLOCK", False) for x in lv]
    print(
        _rows_table(f"BLOCK, by true slowdown (threshold {threshold:.0%})", rows, block_cols) + "\n"
    )
    print(
        f"cases per slowdown level: {tallies[history].total(lv[0])}; A/A configurations: "
        f"{tallies[history].total('A/A')}"
    )
    for k in depths:
        q = np.quantile(tallies[k].aa_max_ratio, [0.5, 0.9, 0.99])
        print(
            f"base {k} run{'s' if k > 1 else ''}: largest A/A ratio (our point estimate) in a "
            f"run: median {q[0]:.3f}, 90th percentile {q[1]:.3f}, 99th percentile {q[2]:.3f}"
        )
    return 0


def _rows_table(
    title: str, rows: list[tuple[str, Tally, str]], columns: list[tuple[str, str, str, bool]]
) -> str:
    """Like _table, but each row names its own tally: one rule at several history depths."""
    head = "| rule | " + " | ".join(c[0] for c in columns) + " |"
    lines = [f"#### {title}", "", head, "|" + "---|" * (len(columns) + 1)]
    for name, tally, rule in rows:
        cells = [tally.rate(cat, rule, kind, per_run) for _, cat, kind, per_run in columns]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _check_against_evaluate(
    base_all: list[list[np.ndarray]],
    head: list[list[np.ndarray]],
    history: int,
    processes: int,
    seed: int,
) -> None:
    """Build the results documents the server would hold for these runs and check that
    rnx.verdict.evaluate, the server's path, sees the same groups and gives the same ratios,
    verdicts and tier as compare_many on the groups this script uses."""
    import uuid

    import stats
    from rnx.config import GateSettings
    from rnx.schema import parse_results
    from rnx.verdict import evaluate

    def rounded(groups: list[np.ndarray]) -> list[np.ndarray]:
        return [np.maximum(np.rint(g), 1.0) for g in groups]

    def document(name: str, per_config: list[list[np.ndarray]]) -> Any:
        configs = []
        for i, groups in enumerate(per_config):
            ns, rounds, procs = [], [], []
            for p, g in enumerate(rounded(groups)):
                ns += [int(x) for x in g]
                rounds += list(range(len(g)))
                procs += [p] * len(g)
            configs.append(
                {
                    "runtime": "pytorch_eager",
                    "dtype": "float32",
                    "batch_size": i + 1,
                    "status": "ok",
                    "samples": {"ns": ns, "round": rounds, "process": procs},
                }
            )
        n = sum(len(g) for g in per_config[0])
        return parse_results(
            {
                "schema_version": 1,
                "run_id": str(uuid.uuid5(uuid.NAMESPACE_URL, f"rnx-benchmark/vq/{name}")),
                "repository": "rnx-benchmark/verdict-quality",
                "git": {"branch": "main", "sha": "a" * 40, "event": "push"},
                "environment": {"key": "verdict-quality", "name": "recorded corpus"},
                "workload": {"path": "benchmarks/quality/verdict_quality.py", "sha256": "a" * 64},
                "settings": {
                    "samples": n,
                    "warmup": 0,
                    "rounds": n // len(per_config[0]),
                    "processes": len(per_config[0]),
                    "mode": "single",
                    "seed": 0,
                },
                "configurations": configs,
            },
            source=name,
        )

    baselines = [
        document(f"base{k}", [g[k * processes : (k + 1) * processes] for g in base_all])
        for k in range(history)
    ]
    report = evaluate(document("head", head), baselines, GateSettings(), seed=seed)
    runs = [k for k in range(history) for _ in range(processes)]
    cs = stats.compare_many(
        [(rounded(b), rounded(h)) for b, h in zip(base_all, head, strict=True)],
        seed=seed,
        base_runs=[runs] * len(base_all),
    )
    tier = _gate_run(cs, GateSettings().block_threshold)[1]
    same = (
        report.tier == tier
        and [c.ratio for c in report.comparisons] == [c.ratio for c in cs]
        and [c.verdict for c in report.comparisons] == [c.verdict for c in cs]
        and all(c.base_groups == history * processes for c in cs)
    )
    if not same:
        raise SystemExit("the history scenario does not match rnx.verdict.evaluate; fix the script")
    print(
        f"checked: rnx.verdict.evaluate on {history} baseline documents and 1 head document gives "
        f"the same {len(cs)} ratios and verdicts and the same tier ({tier}) as compare_many on "
        f"the {history * processes} base groups used here"
    )


def _timing(
    side: Callable[[np.ndarray, int], list[list[np.ndarray]]],
    processes: int,
    rng: np.random.Generator,
) -> None:
    """One 48-configuration run: vectorised, a loop over configurations, a loop over resamples."""
    import time

    import stats

    pairs48 = list(
        zip(
            side(np.arange(processes), 0), side(np.arange(processes, 2 * processes), 2), strict=True
        )
    )
    flat48 = [([np.concatenate(b)], [np.concatenate(h)]) for b, h in pairs48]

    def best(fn: Callable[[], object], repeat: int = 7) -> tuple[float, float]:
        """Fastest wall-clock and CPU time: on a shared machine the CPU time is what we cost."""
        wall, cpu = [], []
        for _ in range(repeat):
            t0, c0 = time.perf_counter(), time.process_time()
            fn()
            wall.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
        return min(wall), min(cpu)

    print(
        f"\nspeed (best of 7, the plain loop once; wall clock / CPU time; load average at start "
        f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores):"
    )
    n = sum(len(g) for g in pairs48[0][0])
    for label, ps in (
        (f"{processes} processes x {n // processes} samples", pairs48),
        (f"one group of {n} samples", flat48),
    ):
        vec = best(functools.partial(stats.compare_many, ps, seed=0))
        loop = best(functools.partial(_loop_compare, ps))
        naive = best(functools.partial(_loop_naive, ps, rng), repeat=1)
        print(
            f"  48 configurations, {label}, 2000 resamples: "
            f"compare_many {vec[0] * 1e3:.0f} / {vec[1] * 1e3:.0f} ms; "
            f"loop of compare() {loop[0] * 1e3:.0f} / {loop[1] * 1e3:.0f} ms "
            f"({loop[1] / vec[1]:.1f}x CPU); plain loop over configurations and resamples "
            f"{naive[0] * 1e3:.0f} / {naive[1] * 1e3:.0f} ms ({naive[1] / vec[1]:.0f}x CPU)"
        )


def _loop_compare(pairs: list[tuple[Any, Any]]) -> list[Any]:
    import stats

    return [stats.compare(b, h, seed=0) for b, h in pairs]


def _loop_naive(pairs: list[tuple[Any, Any]], rng: np.random.Generator) -> list[float]:
    return [_naive_compare(b, h, 2000, rng) for b, h in pairs]


def _naive_compare(
    base: list[np.ndarray], head: list[np.ndarray], resamples: int, rng: np.random.Generator
) -> float:
    """The same posterior, one resample at a time in plain numpy: the baseline for the timing."""
    from stats.bootstrap import LOW

    def draw(groups: list[np.ndarray]) -> float:
        g = rng.dirichlet(np.ones(len(groups))) if len(groups) > 1 else [1.0]
        values = np.concatenate([np.log(x) for x in groups])
        w = np.concatenate(
            [gw * rng.dirichlet(np.ones(len(x))) for gw, x in zip(g, groups, strict=True)]
        )
        order = np.argsort(values)
        upper = np.cumsum(w[order])
        lo, hi = LOW
        kept = np.clip(upper, lo, hi) - np.clip(upper - w[order], lo, hi)
        return float((kept * values[order]).sum() / (hi - lo))

    draws = [draw(head) - draw(base) for _ in range(resamples)]
    return float(np.exp(np.median(draws)))


# ---------------------------------------------------------------- the bundled example results files

EXAMPLE_CONFIGS = (  # kernel of the corpus -> (runtime, batch size) it stands for, and its slowdown
    ("matmul", "pytorch_eager", 1, 0.0),
    ("softmax", "pytorch_eager", 8, 0.40),
    ("layer_norm", "pytorch_eager", 32, 0.0),
    ("conv2d", "torch_compile", 1, 0.10),
    ("gelu", "torch_compile", 8, 0.0),
    ("sum", "torch_compile", 32, 0.0),
)


def write_examples(path: Path, out_dir: Path) -> None:
    """examples/results/{base,head}.json from recorded timings: head has known slowdowns."""
    import platform
    import uuid

    with np.load(path) as z:
        data, hog, load = z["data"] / z["reps"][:, :, None, None, None], z["hog"], z["load"]
    # The six jobs without a hog recorded at the lowest load: base gets three, head three.
    quiet = sorted((j for j in range(len(hog)) if not hog[j]), key=lambda j: (load[j], j))[:6]
    base_jobs, head_jobs = sorted(quiet[0::2]), sorted(quiet[1::2])
    env = {
        "key": "linux-x86_64-cpu2-torch2.13",
        "name": "rnx-benchmark recording machine (2 cores, no GPU)",
        "hardware": {"machine": platform.machine(), "cores": os.cpu_count()},
        "runner": {"os": platform.system()},
        "software": {"python": platform.python_version()},
    }

    def document(side: str, jobs: list[int], sha: str) -> dict[str, object]:
        configs = []
        for kernel, runtime, batch, level in EXAMPLE_CONFIGS:
            k, lvl = KERNELS.index(kernel), LEVELS.index(level)
            variant = 0 if side == "base" else 2
            ns, rounds, procs = [], [], []
            for p, j in enumerate(jobs):
                ns += [round(x) for x in data[j, k, lvl, :, variant]]
                rounds += list(range(data.shape[3]))
                procs += [p] * data.shape[3]
            configs.append(
                {
                    "runtime": runtime,
                    "dtype": "float32",
                    "batch_size": batch,
                    "status": "ok",
                    "correctness": {
                        "passed": True,
                        "trials": 3,
                        "atol": 1e-5,
                        "rtol": 1e-5,
                        "max_abs_error": 0.0,
                        "max_rel_error": 0.0,
                    },
                    "samples": {"ns": ns, "round": rounds, "process": procs},
                    "details": {
                        "recorded_kernel": kernel,
                        "injected_slowdown": 0.0 if side == "base" else level,
                    },
                }
            )
        is_head = side == "head"
        return {
            "schema_version": 1,
            "run_id": str(uuid.uuid5(uuid.NAMESPACE_URL, f"rnx-benchmark/examples/{side}")),
            "created_at": "2026-11-30T10:00:00Z",
            "repository": "rnx-benchmark/examples",
            "git": {
                "branch": "fused-softmax" if is_head else "main",
                "sha": sha,
                "event": "pull_request" if is_head else "push",
                **(
                    {"pr_number": 1, "base_branch": "main", "base_sha": "a" * 40} if is_head else {}
                ),
            },
            "environment": env,
            "workload": {"path": "examples/kernels.py", "sha256": ("b" if is_head else "a") * 64},
            "settings": {
                "samples": 90,
                "warmup": 20,
                "rounds": 10,
                "processes": 3,
                "mode": "single",
                "seed": 0,
            },
            "configurations": configs,
        }

    out_dir.mkdir(parents=True, exist_ok=True)
    for side, jobs, sha in (("base", base_jobs, "a" * 40), ("head", head_jobs, "b" * 40)):
        (out_dir / f"{side}.json").write_text(
            json.dumps(document(side, jobs, sha), indent=1) + "\n"
        )
    print(f"wrote {out_dir}/base.json and head.json from jobs {base_jobs} and {head_jobs}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--worker", help=argparse.SUPPRESS)
    p.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--record-only", action="store_true", help="record the corpus and stop")
    p.add_argument(
        "--layout",
        choices=("interleaved", "contiguous"),
        default="interleaved",
        help="interleave all blocks' rounds like the harness (default), or time each block's "
        "rounds back to back",
    )
    p.add_argument("--jobs", type=int, default=96, help="separate processes to record (96)")
    p.add_argument("--hog-every", type=int, default=3, help="every Nth job runs beside a CPU hog")
    p.add_argument("--corpus", type=Path, help="analyse this saved corpus instead of recording")
    p.add_argument("--out", type=Path, default=DEFAULT_CORPUS, help="where to save the corpus")
    p.add_argument("--processes", type=int, default=3, help="processes per side, unpaired (3)")
    p.add_argument("--samples", type=int, default=10, help="samples per process, unpaired (10)")
    p.add_argument("--runs", type=int, default=300, help="unpaired 48-configuration runs (300)")
    p.add_argument(
        "--write-examples",
        type=Path,
        metavar="DIR",
        help="write base.json and head.json example results from the corpus into DIR",
    )
    p.add_argument(
        "--speed-only", action="store_true", help="only time the comparison of one 48-config run"
    )
    p.add_argument("--threshold", type=float, default=0.25, help="block threshold (0.25)")
    p.add_argument(
        "--history",
        type=int,
        default=None,
        metavar="K",
        help="baseline runs in the history scenario (default: the gate server's most, "
        f"{server_history()})",
    )
    p.add_argument(
        "--history-only",
        action="store_true",
        help="only the history scenario: base = K baseline runs, head = 1 run",
    )
    args = p.parse_args(argv)
    if args.worker:
        worker(args.worker, args.seed, args.layout)
        return 0
    corpus = args.corpus
    if corpus is None:
        record(
            args.jobs, args.hog_every, args.out, ROOT / "artifacts" / "verdict-quality", args.layout
        )
        corpus = args.out
    if args.write_examples:
        write_examples(corpus, args.write_examples)
        return 0
    if args.record_only:
        return 0
    history = server_history() if args.history is None else args.history
    if history < 1:
        raise SystemExit(f"--history must be at least 1, got {history}")
    if not args.history_only:
        analyse(
            corpus,
            processes=args.processes,
            samples=args.samples,
            runs=args.runs,
            threshold=args.threshold,
            speed_only=args.speed_only,
        )
    if args.speed_only:
        return 0
    return analyse_history(
        corpus,
        history=history,
        processes=args.processes,
        samples=args.samples,
        runs=args.runs,
        threshold=args.threshold,
    )


if __name__ == "__main__":
    sys.exit(main())
