"""Does the profile diff explain a change, and stay quiet on none? (issue 30, docs/profiles.md)

Whole harness runs in paired mode, base benchmarks/data/profile_diff/base.py against a head
that changes one thing, `--runs` times each:

- unchanged (base.py again): the diff must show nothing;
- extra_softmax.py (one more softmax): a softmax operator or kernel must rank first;
- math_sdpa.py (SDPA's math backend instead of the default): the swapped operators/kernels;
- wide.py (the branch's intermediate twice as large): memory must WARN, by 2 MiB exactly.

Then `--replays` profiles of one warm configuration in this process against its first: how
often an unchanged configuration's memory would WARN, or its diff show anything. And the
profiling's share of a run's wall time on the CPU example (examples/softmax.py, default
harness settings). Prints a summary; writes everything to --out as JSON.

    python -m benchmarks.harness.profile_diff --device cpu --runs 10
    python -m benchmarks.harness.profile_diff --runtime onnxruntime --cases
    unchanged,extra_softmax,wide
    python -m benchmarks.harness.profile_diff --device cuda --runs 10 --out profile-diff-cuda.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
VARIANTS = ROOT / "benchmarks" / "data" / "profile_diff"
BATCH = 64
# The branch's two live buffers (cat, softmax) grow by batch x 1024 x 4 float32 each.
EXPECTED_GROWTH = 2 * BATCH * 1024 * 4 * 4


def _harness(**over: Any) -> Any:
    from rnx.config import HarnessSettings

    data: dict[str, Any] = {"samples": 8, "processes": 1, "warmup": 1, "time-budget": 5.0}
    data.update(over)
    return HarnessSettings.model_validate(data)


def _paired(head: str, device: str, runtime: str) -> dict[str, Any]:
    """One paired run, base.py against `head`, judged with every configuration explained."""
    from bench_runner import run_benchmark
    from rnx.config import Benchmark, GateSettings
    from rnx.verdict import evaluate

    bench = Benchmark.model_validate(
        {
            "workload": str(VARIANTS / head),
            "batch-sizes": [BATCH],
            "dtypes": ["float32"],
            "runtimes": [runtime],
        }
    )
    t0 = time.perf_counter()
    doc = run_benchmark(
        bench, _harness(), base_workload=str(VARIANTS / "base.py"), progress=None, device=device
    )
    wall = time.perf_counter() - t0
    (c,) = doc.configurations
    report = evaluate(doc, [], GateSettings(), explain_all=True)
    (row,) = report.comparisons
    profile_ns = c.details.get("profile_wall_ns", 0)
    return {
        "status": c.status,
        "reason": c.reason,
        "rows": [ch.text for ch in row.explanation],
        "first": row.explanation[0].name if row.explanation else None,
        "memory": None if row.memory is None else row.memory.model_dump(),
        "tier": report.tier,
        "reasons": report.reasons,
        "wall_s": wall,
        # The head's profile step (the base's is as long): both sides, over the run.
        "profile_share": 2 * profile_ns / 1e9 / wall if wall > 0 else None,
    }


def _judge(case: str, run: dict[str, Any]) -> bool:
    if run["status"] != "ok":
        return False
    first = (run["first"] or "").lower()
    if case == "unchanged":
        return not run["rows"] and run["tier"] != "BLOCK"
    if case == "extra_softmax":
        return "softmax" in first
    if case == "math_sdpa":
        return any("new " in r or " gone" in r or "→" in r for r in run["rows"][:3])
    memory = run["memory"] or {}
    growth = memory.get("head_bytes", 0) - memory.get("base_bytes", 0)
    return memory.get("tier") == "WARN" and growth == EXPECTED_GROWTH


def _replays(device: str, n: int, runtime: str) -> dict[str, Any]:
    """n profiles of one warm configuration against its first: false alarms of an unchanged
    configuration (memory WARNs, diff rows)."""
    import torch

    from bench_runner.worker_process import (
        Side,
        configure_process,
        in_process_command,
        resolve_device,
    )
    from rnx.config import GateSettings
    from rnx.memory_gate import memory_change
    from rnx.profile_diff import diff_profiles
    from rnx.schema import Memory, Profile

    dev = resolve_device(device)
    configure_process(1, dev)
    side = Side(path=str(VARIANTS / "base.py"), device=dev, threads=1, seed=0)
    side.load()
    cmd = in_process_command(runtime, "float32", BATCH)
    ready = side.prepare(cmd)
    if ready["status"] != "ok":
        return {"error": ready.get("reason")}
    for _ in range(50):  # as after timing: warm
        side.ready[cmd["id"]].call()
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)

    def once() -> tuple[Profile, Memory]:
        found = side.profile({"id": cmd["id"], "trace": None})
        return Profile(**found["profile"]), Memory(**found["memory"])

    first_profile, first_memory = once()
    memory_alarms = diff_alarms = 0
    walls = []
    for _ in range(n):
        t0 = time.perf_counter()
        profile, memory = once()
        walls.append(time.perf_counter() - t0)
        _, why = memory_change("c", first_memory, memory, first_profile, profile, GateSettings())
        memory_alarms += bool(why)
        diff_alarms += bool(diff_profiles(first_profile, profile))
    return {
        "replays": n,
        "memory_or_launch_warnings": memory_alarms,
        "diffs_with_rows": diff_alarms,
        "peak_allocated_bytes": first_memory.peak_allocated_bytes,
        "profile_step_s_median": sorted(walls)[len(walls) // 2],
    }


def _cost(device: str) -> dict[str, Any]:
    """The profiling's share of a run's wall time with default harness settings: on the CPU
    the example examples/softmax.py; on a GPU examples/attention.py in 12 configurations
    (float32, float16, bfloat16 x batch 1, 8, 32, 128), the issue's H200 case."""
    from bench_runner import run_benchmark
    from rnx.config import Benchmark, HarnessSettings

    workload = "softmax.py" if device == "cpu" else "attention.py"
    spec: dict[str, Any] = {"workload": str(ROOT / "examples" / workload)}
    if device != "cpu":
        spec.update({"dtypes": ["float32", "float16", "bfloat16"], "batch-sizes": [1, 8, 32, 128]})
    bench = Benchmark.model_validate(spec)
    t0 = time.perf_counter()
    doc = run_benchmark(bench, HarnessSettings(), progress=None, device=device)
    wall = time.perf_counter() - t0
    profile_s = sum(c.details.get("profile_wall_ns", 0) for c in doc.configurations) / 1e9
    return {
        "workload": f"examples/{workload}",
        "configurations": len(doc.configurations),
        "run_wall_s": wall,
        "profile_s": profile_s,
        "share": profile_s / wall,
        "profile_bytes": sum(
            len(c.profile.model_dump_json()) for c in doc.configurations if c.profile
        ),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--runs", type=int, default=10)
    p.add_argument("--replays", type=int, default=100)
    p.add_argument("--out", default="profile-diff.json")
    p.add_argument("--runtime", default="pytorch_eager", help="onnxruntime: ORT's own profiler")
    p.add_argument(
        "--cases", default="unchanged,extra_softmax,math_sdpa,wide", help="comma-separated"
    )
    args = p.parse_args(argv)
    cases = [c for c in args.cases.split(",") if c]
    heads = {c: "base.py" if c == "unchanged" else f"{c}.py" for c in cases}
    results: dict[str, Any] = {
        "device": args.device,
        "runtime": args.runtime,
        "runs": {c: [] for c in cases},
    }
    for r in range(args.runs):
        for case in cases:
            run = _paired(heads[case], args.device, args.runtime)
            run["ok"] = _judge(case, run)
            results["runs"][case].append(run)
            print(
                f"run {r + 1}/{args.runs} {case}: {'ok' if run['ok'] else 'MISSED'} "
                f"{run['rows'][:2]}",
                file=sys.stderr,
            )
    results["replays"] = _replays(args.device, args.replays, args.runtime)
    results["cost"] = _cost(args.device)
    summary = {case: sum(r["ok"] for r in runs) for case, runs in results["runs"].items()}
    results["summary"] = summary
    shares = [r["profile_share"] for runs in results["runs"].values() for r in runs]
    print(f"device {args.device}, runtime {args.runtime}, {args.runs} paired runs per case:")
    for case, ok in summary.items():
        example = results["runs"][case][0]
        print(f"  {case:14s} {ok}/{args.runs} as expected; first run: {example['rows'][:3]}")
        if case == "wide" and example["memory"]:
            m = example["memory"]
            print(
                f"  {'':14s} memory {m['base_bytes']} -> {m['head_bytes']} B "
                f"(expected +{EXPECTED_GROWTH} B), tier {m['tier']}"
            )
    rep = results["replays"]
    print(f"  replays: {rep}")
    cost = results["cost"]
    print(
        f"  profiling cost: {cost['profile_s']:.3f} s of a {cost['run_wall_s']:.1f} s run of "
        f"{cost['workload']} ({cost['configurations']} configuration(s)) = "
        f"{cost['share']:.1%}; profile JSON {cost['profile_bytes']} B"
    )
    print(f"  profiling share of the paired runs: median {sorted(shares)[len(shares) // 2]:.1%}")
    Path(args.out).write_text(json.dumps(results, indent=1, default=str) + "\n")
    print(f"written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
