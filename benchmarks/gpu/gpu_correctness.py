"""Correctness on the GPU (issue 14, part 1): what fresh inputs and low precision do to the checks.

1. scalar: a mean hinge loss over 4096 x 64 (tests/bench_runner/workloads/hinge_loss.py) on
   pytorch_eager and torch_compile x float32/float16/bfloat16 x batch 4096 and 1024 (12
   configurations) through the whole harness: how many are wrongly `diverged` (before: 10).
2. cheats: the five cheats (cached output, shape special-casing, mutated input, lower precision
   in float32, ignored input) and a cached scalar loss, each checked on the GPU: all `diverged`.
3. margin: the kernel right only at batch size 8 (batch_eight_only.py), checked at batch 9 in
   bfloat16 and float16: elements outside the tolerance per trial, drawn versus same-sign.
4. long: an honest mean squared error over 4.2 and 16.7 million float32 elements
   (long_mean.py) on pytorch_eager and onnxruntime: each one's error against the float64
   reference, the tolerance's widening for the reduction's length, and for one that still
   misses, the tolerance its failure tells the user to set.

Run: python3 -m benchmarks.gpu.gpu_correctness [--out DIR] [--parts scalar,cheats,margin,long]
     (about 1-2 minutes)
     .venv/bin/python -m benchmarks.gpu.gpu_correctness --device cpu         (the same on the CPU)
Another revision's harness: put its bench_runner, rnx and stats first on PYTHONPATH.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.gpu.gpu_support import WORKLOADS, out_dir, require_cuda, save

CHEATS = [
    # (workload, dtype, batch size, the failure that must name it)
    ("cached_output.py", "float32", 4, "did not change with fresh inputs"),
    ("one_batch_size.py", "float32", 2, "outside atol"),
    ("mutates_input.py", "float32", 4, "input 0 was modified"),
    ("lower_precision.py", "float32", 8, "outside atol"),
    ("ignores_input.py", "float32", 4, "input 1 is ignored"),
    ("cached_loss.py", "bfloat16", 4096, "did not change with fresh inputs"),
    ("cached_loss.py", "float16", 4096, "did not change with fresh inputs"),
]


def scalar_losses(device: str) -> dict[str, Any]:
    from bench_runner import run_benchmark
    from rnx.config import Benchmark, HarnessSettings

    bench = Benchmark.model_validate(
        {
            "workload": str(WORKLOADS / "hinge_loss.py"),
            "runtimes": ["pytorch_eager", "torch_compile"],
            "dtypes": ["float32", "float16", "bfloat16"],
            "batch-sizes": [4096, 1024],
        }
    )
    t0 = time.perf_counter()
    doc = run_benchmark(
        bench, HarnessSettings(samples=8, processes=1), progress=None, device=device
    )
    rows = [{"id": c.id, "status": c.status, "reason": c.reason} for c in doc.configurations]
    for r in rows:
        print(f"  {r['id']:32s} {r['status']:9s} {(r['reason'] or '')[:110]}")
    bad = [r for r in rows if r["status"] != "ok"]
    print(
        f"scalar loss: {len(bad)} of {len(rows)} configurations not ok "
        f"(issue 14 before: 10 diverged on the H200); {time.perf_counter() - t0:.0f}s"
    )
    return {"rows": rows, "not_ok": len(bad)}


def _prepare(
    name: str, dtype: str, batch_size: int, device: str, runtime: str = "pytorch_eager"
) -> dict[str, Any]:
    import torch

    from bench_runner.worker_process import Side

    side = Side(path=str(WORKLOADS / name), device=torch.device(device), threads=4, seed=0)
    side.load()
    cmd = _command(dtype, batch_size)
    if runtime != "pytorch_eager":
        cmd = {**cmd, "runtime": runtime, "id": f"{runtime}/{dtype}/bs{batch_size}"}
    return side.prepare(cmd)


def _command(dtype: str, batch_size: int) -> dict[str, Any]:
    try:
        from bench_runner.worker_process import in_process_command
    except ImportError:  # a harness from before issue 14: its worker takes the same keys
        from bench_runner.tolerances import DEFAULT_TOLERANCES

        tol = DEFAULT_TOLERANCES[dtype]
        return {"id": f"pytorch_eager/{dtype}/bs{batch_size}", "runtime": "pytorch_eager",
                "dtype": dtype, "batch_size": batch_size, "check": True, "atol": tol.atol,
                "rtol": tol.rtol, "trials": 3, "warmup": 1, "warmup_budget_ns": 5e7,
                "target_sample_ns": 1e5, "max_sample_ns": 1e6}  # fmt: skip
    return in_process_command("pytorch_eager", dtype, batch_size, warmup_budget_ns=5e7)


def cheats(device: str) -> list[dict[str, Any]]:
    rows = []
    for name, dtype, bs, needle in CHEATS:
        r = _prepare(name, dtype, bs, device)
        failures = " | ".join((r.get("correctness") or {}).get("failures", []))
        caught = r["status"] == "diverged" and needle in failures
        rows.append({"workload": name, "dtype": dtype, "status": r["status"], "caught": caught})
        print(f"  {name:22s} {dtype:9s} bs{bs:<5d} {r['status']:9s} named: {caught}")
    print(f"cheats: {sum(r['caught'] for r in rows)} of {len(rows)} caught with their failure")
    return rows


def margin(device: str) -> list[dict[str, Any]]:
    rows = []
    for dtype in ("bfloat16", "float16"):
        r = _prepare("batch_eight_only.py", dtype, 9, device)
        misses = r["details"].get("correctness_notes", {}).get("mismatches")
        if misses is None:  # an older harness: only its failure messages
            misses = _from_failures((r.get("correctness") or {}).get("failures", []))
        for m in misses:
            rows.append({"dtype": dtype, **m})
            print(f"  {dtype:9s} {m['case']:18s} ({m['kind']:9s}) {m['outside']:6d} of {m['of']}")
        ok8 = _prepare("batch_eight_only.py", dtype, 8, device)["status"]
        print(f"  {dtype:9s} at batch size 8 (where it is right): {ok8}")
    return rows


ADVICE = re.compile(r"set benchmarks\[\]\.tolerances\.float32\.atol to (\S+) or more")


def long_reductions(device: str) -> list[dict[str, Any]]:
    rows = []
    for batch_size in (1024, 4096):
        for runtime in ("pytorch_eager", "onnxruntime"):
            r = _prepare("long_mean.py", "float32", batch_size, device, runtime)
            c = r.get("correctness") or {}
            notes = r["details"].get("correctness_notes") or {}
            advice = sorted({a for f in c.get("failures", []) for a in ADVICE.findall(f)})
            row = {
                "id": f"{runtime}/float32/bs{batch_size}", "status": r["status"],
                "max_rel_error": c.get("max_rel_error"),
                "reduction_length": notes.get("reduction_length"),
                "rtol_allowance": notes.get("rtol_allowance"), "advised_atol": advice,
                "provider": r["details"].get("provider"),
            }  # fmt: skip
            rows.append(row)
            print(
                f"  {row['id']:28s} {row['status']:11s} max rel error "
                f"{row['max_rel_error'] or 0:.1e} over {row['reduction_length'] or 0:,} elements, "
                f"rtol widened by {row['rtol_allowance'] or 0:.1e}"
                + (f"; advised atol {', '.join(advice)}" if advice else "")
                + (f" ({row['provider']})" if row["provider"] else "")
                + (f": {r['reason'][:200]}" if r["status"] not in ("ok", "diverged") else "")
            )
    diverged = [r for r in rows if r["status"] == "diverged"]
    print(
        f"long reductions: {len(rows) - len(diverged)} of {len(rows)} ok; the diverged ones "
        f"name the tolerance to set: {all(r['advised_atol'] for r in diverged)}"
    )
    return rows


def _from_failures(failures: list[str]) -> list[dict[str, Any]]:
    found = []
    for text in failures:
        hit = re.match(r"(trial \d+|probe of input \d+): output \d+: (\d+) of (\d+) elements", text)
        if hit:
            found.append({"case": hit[1], "kind": "?", "outside": int(hit[2]), "of": int(hit[3])})
    return found


PARTS = {"scalar": scalar_losses, "cheats": cheats, "margin": margin, "long": long_reductions}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--out")
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    p.add_argument("--parts", default=",".join(PARTS), help="comma list of " + ", ".join(PARTS))
    args = p.parse_args()
    parts = args.parts.split(",")
    if not set(parts) <= set(PARTS):
        p.error(f"--parts takes {', '.join(PARTS)}, not {args.parts!r}")
    if args.device == "cuda":
        require_cuda("gpu_correctness.py")
    import torch

    import bench_runner
    from bench_runner.worker_process import configure_process

    configure_process(4, torch.device(args.device))
    folder = out_dir(args.out)
    name = torch.cuda.get_device_name() if args.device == "cuda" else "cpu"
    print(
        f"device: {name}, torch {torch.__version__}, harness {Path(bench_runner.__file__).parent}"
    )
    result = {part: PARTS[part](args.device) for part in parts}
    save(folder, "gpu_correctness.json", result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
