"""How long the statistics of one re-gate take: what the server spends per upload.

Run `python -m benchmarks.server.regate_speed`. An upload of 8 (and of 48) configurations x 3
processes x 10 samples is gated against 6 baseline runs (the server's most) through
rnx.verdict.evaluate, the server's path, and the statistics alone are timed both ways in the
same run: now (compare_many with the baseline runs, then stats.gate) and as before issue 13
(compare_many with every baseline process an exchangeable group, then Holm), so the ratio does
not depend on how busy this shared machine is. Times are CPU time (process_time), best of
--repeat, which is what one server process pays; the wall clock is printed beside it.
evaluate is given the baseline runs prepared once (rnx.verdict.PreparedBaselines), as the
server keeps them per baseline set; a tree without it (its own caches keep the base sides) is
timed its own way. --against DIR: the same figures with DIR's packages (a copy of main's tree)
in a subprocess, alternating with this tree's, printed side by side.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

DTYPES = ("float32", "float16", "bfloat16")


def _configs(n: int) -> list[tuple[str, str, int]]:
    runtimes = ("pytorch_eager", "torch_compile")
    out = []
    for i in range(n):
        out.append((runtimes[i % 2], DTYPES[(i // 2) % 3], 1 << (i // 6)))
    return out


def _best(fn: Callable[[], object], repeat: int) -> tuple[float, float]:
    wall, cpu = [], []
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        fn()
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return min(cpu) * 1e3, min(wall) * 1e3


def measure(configs: int, history: int, repeat: int) -> dict[str, Any]:
    import stats
    from benchmarks.quality.verdict_runs import old_tier
    from rnx.config import GateSettings
    from rnx.verdict import evaluate
    from testbed.factories import make_results

    cfgs = _configs(configs)
    baselines = [make_results(configs=cfgs, n=30, processes=3, seed=s) for s in range(history)]
    head = make_results(configs=cfgs, n=30, processes=3, seed=99, event="pull_request", pr_number=1)
    gate = GateSettings()
    pairs, labels = [], []
    for c in head.configurations:
        base, runs = [], []
        for r, doc in enumerate(baselines):
            (other,) = [x for x in doc.configurations if x.id == c.id]
            assert other.samples is not None
            groups = [g for g in other.samples.by_process() if g]
            base += groups
            runs += [r] * len(groups)
        assert c.samples is not None
        pairs.append((base, [g for g in c.samples.by_process() if g]))
        labels.append(runs)

    def new() -> object:
        cs = stats.compare_many(pairs, seed=0, base_runs=labels)
        return stats.gate({str(i): c for i, c in enumerate(cs)})

    def old() -> object:
        return old_tier(stats.compare_many(pairs, seed=0))

    try:
        from rnx.verdict import PreparedBaselines

        extra: dict[str, Any] = {"prepared": PreparedBaselines(baselines)}
    except ImportError:  # a tree before it: its module caches keep the base sides
        extra = {}
    report = evaluate(head, baselines, gate, **extra)
    return {
        "evaluate": _best(lambda: evaluate(head, baselines, gate, **extra), repeat),
        "new": _best(new, repeat),
        "old": _best(old, repeat),
        "tier": report.tier,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=15, help="timed repetitions, best kept (15)")
    p.add_argument("--history", type=int, default=6, help="baseline runs (6)")
    p.add_argument("--against", type=str, help="a tree whose figures to print beside these")
    p.add_argument("--one", type=int, help=argparse.SUPPRESS)  # one size, as JSON
    args = p.parse_args(argv)
    if args.one:
        print(json.dumps(measure(args.one, args.history, args.repeat)))
        return 0
    print(
        f"re-gate, {args.history} baseline runs, 3 processes x 10 samples per run; CPU / wall "
        f"ms, best of {args.repeat}; load average {os.getloadavg()[0]:.1f} on "
        f"{os.cpu_count()} cores"
    )
    for n in (8, 48):
        trees = [("this tree", None)] + ([(args.against, args.against)] if args.against else [])
        for name, tree in trees:
            m = measure(n, args.history, args.repeat) if tree is None else _other(tree, n, args)
            if args.against:
                print(f"  [{name}]")
            _print(n, m)
    return 0


def _other(tree: str, n: int, args: argparse.Namespace) -> dict[str, Any]:
    """measure() with tree's packages first on the path, in a subprocess."""
    here = str(Path(__file__).resolve())
    env = {**os.environ, "PYTHONPATH": os.path.abspath(tree)}
    cmd = [sys.executable, here, "--one", str(n), "--history", str(args.history)]
    cmd += ["--repeat", str(args.repeat)]
    done = subprocess.run(cmd, env=env, cwd=tree, capture_output=True, text=True, check=True)
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def _print(n: int, m: dict[str, Any]) -> None:
    print(
        f"  {n:>2} configurations: rnx.verdict.evaluate {m['evaluate'][0]:.1f} / "
        f"{m['evaluate'][1]:.1f} ms (tier {m['tier']}); statistics now "
        f"{m['new'][0]:.1f} / {m['new'][1]:.1f} ms, before issue 13 {m['old'][0]:.1f} / "
        f"{m['old'][1]:.1f} ms ({m['old'][0] / m['new'][0]:.1f}x CPU)"
    )


if __name__ == "__main__":
    raise SystemExit(main())
