"""A GPU shared with other processes (issue 14, part 1): no false `error`, hidden work still caught.

1. concurrent: 2, then 4 `rnx bench` runs (python -m bench_runner.cli) of honest examples at
   once on one GPU (attention, softmax, gelu_linear, conv_block; pytorch_eager x float32,
   float16, bfloat16 x batch 8 and 1024; 30 samples over 3 processes). Prints, per run, the
   configurations that came back `error` (issue 14 before: 50 with four runs), those with a
   contention note, and the rounds taken.
   With each configuration, its stream check (bench_runner/gpu_checks.py): the call's event
   time, the synchronize after it and after an idle round, the leftover and the time the call
   waited for the GPU (the rule's inputs), and how many checks it took.
2. hidden: the side-stream workloads (tests/bench_runner/workloads/side_stream.py: ~8.6 ms left
   behind a ~2 ms call; side_stream_small.py: a 2048^3 float32 matmul on a side stream, ~0.12
   ms of it left after the timed stream on an H200), alone and while two other runs share the
   GPU: all four must be `error` ("another stream"); the last line counts them.

Run: python3 -m benchmarks.gpu.gpu_contention [--out DIR] [--parts concurrent,hidden] [--runs 2,4]
     (about 2 minutes; `--parts hidden` alone about 1 minute). Exit status 1 when an honest
     configuration came back `error` or a side-stream run did not.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.gpu.gpu_support import EXAMPLES, ROOT, WORKLOADS, out_dir, require_cuda, save

HONEST = ["attention.py", "softmax.py", "gelu_linear.py", "conv_block.py"]


def _start(workload: Path, out: Path, extra: list[str]) -> subprocess.Popen[str]:
    cmd = [
        sys.executable, "-m", "bench_runner.cli", str(workload), "--out", str(out), "--quiet",
        "--device", "cuda", *extra,
    ]  # fmt: skip
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def _stream_check(c: dict[str, Any]) -> dict[str, Any]:
    d = c["details"]
    us = {
        k: round(d[f"stream_check_{k}_ns"] / 1e3, 1)
        for k in ("event", "wall", "after_stream", "idle_after", "leftover", "waited")
        if f"stream_check_{k}_ns" in d
    }
    return {"id": config_label(c), **us, "checks": d.get("stream_checks")}


def config_label(c: dict[str, Any]) -> str:
    return f"{c['runtime']}/{c['dtype']}/bs{c['batch_size']}"


def _summary(path: Path) -> dict[str, Any]:
    doc = json.loads(path.read_text())
    rows = doc["configurations"]
    return {
        "workload": Path(doc["workload"]["path"]).name,
        "configurations": len(rows),
        "errors": [
            (c["runtime"], c["dtype"], c["batch_size"], c["reason"])
            for c in rows
            if c["status"] == "error"
        ],  # fmt: skip
        "statuses": sorted({c["status"] for c in rows}),
        "contention_notes": sum(1 for c in rows if "contention" in c["details"]),
        "rounds": doc["settings"]["rounds"],
        "stream_checks": [_stream_check(c) for c in rows],
    }


def _stream_line(found: list[dict[str, Any]]) -> str:
    checks = [s for f in found for s in f.get("stream_checks", []) if "after_stream" in s]
    if not checks:
        return "  stream checks: none recorded"
    left = sorted(
        s.get("leftover", max(0.0, s["after_stream"] - s.get("idle_after", 0.0))) for s in checks
    )
    idle = sorted(s.get("idle_after", 0.0) for s in checks)
    again = sum(1 for s in checks if (s.get("checks") or 1) > 1)
    return (
        f"  stream checks ({len(checks)} configurations, process 1 of each): synchronize after "
        f"an idle round median {statistics.median(idle):.1f} us, max {idle[-1]:.1f} us; leftover "
        f"after the call median {statistics.median(left):.1f} us, max {left[-1]:.1f} us; "
        f"re-checked {again}"
    )


def concurrent(n: int, tmp: Path) -> list[dict[str, Any]]:
    honest = ["--runtimes", "pytorch_eager", "--dtypes", "float32,float16,bfloat16",
              "--batch-sizes", "8,1024"]  # fmt: skip
    t0 = time.perf_counter()
    runs = []
    for i in range(n):
        out = tmp / f"concurrent{n}_{i}.json"
        runs.append((out, _start(EXAMPLES / HONEST[i % len(HONEST)], out, honest)))
    found = []
    for out, proc in runs:
        _, err = proc.communicate()
        if not out.exists():
            found.append({"failed": err[-2000:]})
            continue
        found.append(_summary(out))
    total = sum(f.get("configurations", 0) for f in found)
    errors = sum(len(f.get("errors", [])) for f in found)
    noted = sum(f.get("contention_notes", 0) for f in found)
    print(
        f"{n} concurrent runs: {errors} error rows of {total} configurations (before: 50 with "
        f"4 runs); {noted} with a contention note; {time.perf_counter() - t0:.0f}s"
    )
    for f in found:
        brief = {k: v for k, v in f.items() if k != "stream_checks"}
        print(f"  {json.dumps(brief)[:400]}")
    print(_stream_line(found))
    return found


def hidden(tmp: Path, name: str, *, shared: bool) -> dict[str, Any]:
    neighbours = []
    if shared:
        for i in range(2):
            out = tmp / f"neighbour{i}.json"
            neighbours.append(_start(EXAMPLES / HONEST[i], out, ["--runtimes", "pytorch_eager"]))
        time.sleep(5)  # let them reach their checks and timing
    out = tmp / f"hidden_{name}_{shared}.json"
    proc = _start(WORKLOADS / name, out, ["--samples", "8", "--processes", "1"])
    proc.communicate()
    for n in neighbours:
        n.communicate()
    c = json.loads(out.read_text())["configurations"][0]
    where = "with two other runs on the GPU" if shared else "alone on the GPU"
    print(f"{name} {where}: {c['status']}: {(c['reason'] or '')[:400]}")
    check = _stream_check(c)
    print(f"  stream check: {json.dumps(check)}")
    return {
        "workload": name, "shared": shared, "status": c["status"], "reason": c["reason"],
        "stream_check": check,
    }  # fmt: skip


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--out")
    p.add_argument("--runs", default="2,4", help="numbers of concurrent runs")
    p.add_argument("--parts", default="concurrent,hidden", help="concurrent, hidden or both")
    args = p.parse_args()
    parts = set(args.parts.split(","))
    if not parts <= {"concurrent", "hidden"}:
        p.error(f"--parts takes concurrent and/or hidden, not {args.parts!r}")
    require_cuda("gpu_contention.py")
    import torch

    folder = out_dir(args.out)
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}")
    result: dict[str, Any] = {}
    wrong = 0  # honest configurations `error`, side-stream runs not `error`
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        if "concurrent" in parts:
            for n in (int(x) for x in args.runs.split(",")):
                result[f"concurrent_{n}"] = concurrent(n, tmp)
                # A run that wrote no results counts too.
                wrong += sum(len(f.get("errors", [1])) for f in result[f"concurrent_{n}"])
        if "hidden" in parts:
            found = [
                hidden(tmp, name, shared=shared)
                for name in ("side_stream.py", "side_stream_small.py")
                for shared in (False, True)
            ]
            for f in found:
                where = "shared" if f["shared"] else "alone"
                result[f"{f['workload'].removesuffix('.py')}_{where}"] = f
            caught = sum(1 for f in found if f["status"] == "error")
            print(f"side-stream workloads: {caught} of {len(found)} runs `error` (all must be)")
            wrong += len(found) - caught
    save(folder, "gpu_contention.json", result)
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
