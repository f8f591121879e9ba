"""The CI minute budget: a run's wall time and where it goes, before and after, side by side.

"before" is the harness of another revision (default: where this branch left main), taken with
`git archive` into a temporary folder, or a folder given with --before-tree (on a machine
without git: `git archive REV bench_runner rnx stats | tar -x -C DIR` beforehand). "after" is
this checkout. Each run is a fresh process, as in CI: the wall time includes the interpreter,
its imports and its exit. They alternate, `--repeat` times, so load on the machine hits both.

Cases:
  cpu-example   examples/attention.py, pytorch_eager, float32, batch size 1, on the CPU
  cpu-eager6    examples/attention.py, pytorch_eager x float32/float16/bfloat16 x batch sizes 1
                and 64, on the CPU (six reference groups: checks spread over the processes)
  attention12   examples/attention.py, pytorch_eager + torch_compile x float32/float16/bfloat16
                x batch sizes 8 and 1024 (12 configurations), on the GPU (the issue's run)
Defaults: 30 samples over 3 processes (the harness defaults); each run gets its own empty
inductor cache, so neither side reuses the other's compilations.

Run: .venv/bin/python -m benchmarks.harness.harness_budget [--case cpu-example] [--repeat 3]
     python3 -m benchmarks.harness.harness_budget --case attention12 --repeat 1 --before-tree DIR
     --out $OUT
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
CASES: dict[str, dict[str, Any]] = {
    "cpu-example": {
        "device": "cpu",
        "benchmark": {
            "workload": str(ROOT / "examples" / "attention.py"),
            "runtimes": ["pytorch_eager"],
            "dtypes": ["float32"],
            "batch-sizes": [1],
        },
    },
    "cpu-eager6": {
        "device": "cpu",
        "benchmark": {
            "workload": str(ROOT / "examples" / "attention.py"),
            "runtimes": ["pytorch_eager"],
            "dtypes": ["float32", "float16", "bfloat16"],
            "batch-sizes": [1, 64],
        },
    },
    "attention12": {
        "device": "cuda",
        "benchmark": {
            "workload": str(ROOT / "examples" / "attention.py"),
            "runtimes": ["pytorch_eager", "torch_compile"],
            "dtypes": ["float32", "float16", "bfloat16"],
            "batch-sizes": [8, 1024],
        },
    },
}
# Runs in a fresh interpreter whose sys.path starts with the tree under test. Keys a tree does
# not record (an older harness) read as absent.
DRIVER = """
import io, json, sys, time
KEYS = ("prepare_wall_ns", "subject_wall_ns", "check_wall_ns", "check_inputs_wall_ns",
        "check_reference_wall_ns", "build_wall_ns", "warmup_wall_ns", "timing_wall_ns",
        "checked_in_process", "build_wall_ns_per_process", "later_build_wall_ns",
        "compiler_import_wait_ns")
def main():
    t0 = time.perf_counter()
    from bench_runner import run_benchmark
    from rnx.config import Benchmark, HarnessSettings
    import bench_runner
    case = json.loads(sys.argv[1])
    progress = io.StringIO()
    t1 = time.perf_counter()
    doc = run_benchmark(Benchmark.model_validate(case["benchmark"]), HarnessSettings(),
                        progress=progress, device=case["device"])
    t2 = time.perf_counter()
    rows = []
    for c in doc.configurations:
        row = {"id": c.id, "status": c.status, "reason": c.reason,
               "compile_ns": c.build.compile_ns or 0}
        row.update({k: c.details[k] for k in KEYS if k in c.details})
        rows.append(row)
    lines = progress.getvalue().splitlines()
    done = [l for l in lines if l.startswith("done in")]
    workers = [l for l in lines if l.startswith("[workers]")]
    print(json.dumps({"tree": bench_runner.__file__, "import_s": t1 - t0, "run_s": t2 - t1,
                      "configs": rows, "done": done[-1] if done else "",
                      "workers": workers[-1] if workers else ""}))
if __name__ == "__main__":
    main()
"""


def before_tree(rev: str | None, given: str | None, tmp: Path) -> Path | None:
    if given:
        return Path(given).resolve()
    rev = rev or _git("merge-base", "HEAD", "main")
    if not rev:
        return None
    out = tmp / "before"
    out.mkdir()
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", rev, "bench_runner", "rnx", "stats"],
        capture_output=True,
        check=True,
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(out)], input=archive, check=True)
    return out


def _git(*args: str) -> str | None:
    try:
        found = subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True)
    except OSError:
        return None
    return found.stdout.strip() or None if found.returncode == 0 else None


def run_once(tree: Path, case: dict[str, Any], tmp: Path) -> dict[str, Any]:
    # Only the tree under test on the path: never this checkout (the cwd is a temp dir, and
    # PYTHONPATH loses "." and the checkout), so "before" cannot pick up "after" by accident.
    keep = [
        p
        for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
        if p and Path(p).resolve() != ROOT and p != "."
    ]
    cache = tempfile.mkdtemp(dir=tmp, prefix="inductor-")
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(tree), *keep]),
        "TORCHINDUCTOR_CACHE_DIR": cache,
    }
    t0 = time.perf_counter()
    found = subprocess.run(
        [sys.executable, "-c", DRIVER, json.dumps(case)],
        capture_output=True,
        text=True,
        cwd=tmp,
        env=env,
    )
    wall = time.perf_counter() - t0
    if found.returncode != 0:
        raise RuntimeError(f"the run in {tree} failed:\n{found.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(found.stdout.strip().splitlines()[-1])
    result["process_s"] = wall
    return result


def _s(ns: Any) -> float:
    return (ns or 0) / 1e9


def _later(row: dict[str, Any]) -> list[float]:
    """Seconds each later process took to build the configuration (whole command, or the
    runtime's build alone in an older tree)."""
    found = row.get("later_build_wall_ns") or row.get("build_wall_ns_per_process") or []
    return [_s(x) for x in found]


def split(result: dict[str, Any]) -> dict[str, float]:
    rows = result["configs"]

    def total(key: str) -> float:
        return sum(_s(r.get(key)) for r in rows)

    return {
        "process": result["process_s"],
        "run": result["run_s"],
        "check": total("check_wall_ns"),
        "build": total("build_wall_ns"),
        "later builds": sum(sum(_later(r)) for r in rows),
        "warm-up": total("warmup_wall_ns"),
        "timing": total("timing_wall_ns"),
    }


def phases(done: str) -> dict[str, float]:
    """The run's phases from its last progress line, 'done in 50.5s (starting workers 5.4s, ...)'"""
    found = re.search(r"\((.*)\)", done)
    if not found:
        return {}
    out = {}
    for part in found.group(1).split(", "):
        name, _, secs = part.rpartition(" ")
        with contextlib.suppress(ValueError):
            out[name] = float(secs.rstrip("s"))
    return out


def config_table(result: dict[str, Any]) -> None:
    """Per configuration: where it was checked and where its seconds went, in the checking
    process (the whole command; of it: the subject, drawing the check's inputs, the float64
    references, the rest of the check, waiting for the compiler's import, the runtime's build,
    of which torch.compile's first call) and in the others (each later build's command), then
    warm-up and timing summed over processes."""
    head = (
        f"  {'configuration':32s} {'checked':>7s} {'command':>8s} {'subject':>8s} {'inputs':>7s} "
        f"{'refs':>7s} {'check':>7s} {'import':>7s} {'build':>7s} {'compile':>8s}  "
        f"{'later builds':18s} "
        f"{'warm-up':>7s} {'timing':>7s}"
    )
    print(head)
    for r in result["configs"]:
        check_rest = (
            _s(r.get("check_wall_ns"))
            - _s(r.get("check_inputs_wall_ns"))
            - _s(r.get("check_reference_wall_ns"))
        )
        where = r.get("checked_in_process")
        later = ", ".join(f"{x:.2f}" for x in _later(r)) or "-"
        print(
            f"  {r['id']:32s} {'-' if where is None else where + 1:>7} "
            f"{_s(r.get('prepare_wall_ns')):8.2f} {_s(r.get('subject_wall_ns')):8.2f} "
            f"{_s(r.get('check_inputs_wall_ns')):7.2f} {_s(r.get('check_reference_wall_ns')):7.2f} "
            f"{check_rest:7.2f} {_s(r.get('compiler_import_wait_ns')):7.2f} "
            f"{_s(r.get('build_wall_ns')):7.2f} {_s(r.get('compile_ns')):8.2f}  "
            f"{later:18s} {_s(r.get('warmup_wall_ns')):7.2f} {_s(r.get('timing_wall_ns')):7.2f}"
        )


def report(runs: dict[str, list[dict[str, Any]]]) -> None:
    names = list(split(next(iter(runs.values()))[0]))
    print(f"{'':8s}" + "".join(f"{n:>13s}" for n in names) + "   statuses")
    for side, results in runs.items():
        for r in results:
            parts = split(r)
            statuses = sorted({c["status"] for c in r["configs"]})
            print(f"{side:8s}" + "".join(f"{parts[n]:12.2f}s" for n in names) + f"   {statuses}")
            print(f"{'':8s}phases: {r['done'] or '(not printed by this tree)'}")
            if r.get("workers"):
                print(f"{'':8s}{r['workers']}")
    print(
        "(check, build, later builds, warm-up, timing: sums over configurations and processes; "
        "checks and builds in different processes overlap, so they can add up to more than the "
        "run's phase)"
    )
    if all(runs.values()) and len(runs) == 2:
        med = {s: statistics.median(split(r)["process"] for r in rs) for s, rs in runs.items()}
        print(
            f"median process wall: before {med['before']:.2f}s, after {med['after']:.2f}s, "
            f"after/before {med['after'] / med['before']:.2f}"
        )
        for side in runs:
            ph = [phases(r["done"]) for r in runs[side]]
            names = list(dict.fromkeys(n for p in ph for n in p))
            if names:
                med_ph = ", ".join(
                    f"{n} {statistics.median(p.get(n, 0.0) for p in ph):.1f}s" for n in names
                )
                print(f"median phases, {side}: {med_ph}")
    for side, results in runs.items():
        last = results[-1]
        print(f"per configuration, {side} (last run; seconds; process numbers from 1):")
        config_table(last)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--case", choices=sorted(CASES), help="default: attention12 with CUDA")
    p.add_argument("--repeat", type=int, default=None, help="runs per side (default 3, GPU 1)")
    p.add_argument("--before-rev", help="git revision of 'before' (default: merge-base with main)")
    p.add_argument("--before-tree", help="a folder holding the 'before' bench_runner, rnx, stats")
    p.add_argument("--out", default=os.environ.get("OUT"), help="write the raw results here")
    args = p.parse_args()
    import torch

    cuda = torch.cuda.is_available()
    name = args.case or ("attention12" if cuda else "cpu-example")
    case = CASES[name]
    if case["device"] == "cuda" and not cuda:
        print(f"--case {name} needs CUDA (no GPU is visible here)", file=sys.stderr)
        return 2
    repeat = args.repeat or (1 if cuda else 3)
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        before = before_tree(args.before_rev, args.before_tree, tmp)
        trees = {"after": ROOT} if before is None else {"before": before, "after": ROOT}
        if before is None:
            print("no 'before' tree (no git here): give --before-tree; measuring after only")
        runs: dict[str, list[dict[str, Any]]] = {side: [] for side in trees}
        for i in range(repeat):
            for side, tree in trees.items():
                print(f"# run {i + 1}/{repeat} {side}", file=sys.stderr, flush=True)
                runs[side].append(run_once(tree, case, tmp))
    print(f"case {name}: {json.dumps(case['benchmark'])} on {case['device']}")
    report(runs)
    if args.out:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        (Path(args.out) / f"harness_budget_{name}.json").write_text(json.dumps(runs, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
