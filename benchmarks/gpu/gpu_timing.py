"""GPU timing figures (needs a CUDA GPU and triton).

1. dobench (default): kernels from ~10 us to ~2 ms (an elementwise op; float16 matmuls up to
   8192^3, including the issue's 6144x8192x8192) through the harness, against
   triton.testing.do_bench on the same callable, with the SM clock, power and temperature
   (NVML) during each; and, in this process, the same call timed back to back (as do_bench
   runs it) and with 2 ms idle gaps (as the harness's rounds run it), to show what the clock
   does in each pattern.
2. hidden (default): a workload that leaves work on a side stream must be an error.
3. compare: the examples on pytorch_eager, torch_compile and onnxruntime in float32, float16 and
   bfloat16 through the harness; the harness's medians against do_bench and do_bench_cudagraph.
4. spread: a ~10 us kernel measured by the harness in 10 worker processes: the spread of the
   per-process medians; the same kernel timed naively in 10 fresh processes for contrast.

Run: python3 -m benchmarks.gpu.gpu_timing [--out DIR] [--parts dobench,hidden]
     (about 2-3 minutes with the defaults; compare takes about 7 minutes more)
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

import torch

from bench_runner import run_benchmark
from bench_runner.telemetry import SLOWDOWN_REASONS, reason_names
from bench_runner.worker_process import Side, configure_process, in_process_command
from rnx.config import Benchmark, HarnessSettings

ROOT = Path(__file__).resolve().parents[2]
# Small batch: launch-bound (shows launch overhead). Large: long enough (>= ~50 us) that the
# comparison with do_bench is about the kernel and not about how launches are hidden.
EXAMPLES = {
    "attention.py": 1024,
    "gelu_linear.py": 32768,
    "softmax.py": 32768,
    "conv_block.py": 512,
}
SMALL = 8
DTYPES = ["float32", "float16", "bfloat16"]

TEN_US = """
import torch
class Model(torch.nn.Module):
    def forward(self, x):
        return x * 2
def get_inputs(batch_size=5):
    return [torch.randn(batch_size, 1 << 20)]
def get_init_inputs():
    return []
"""

HIDDEN = """
import torch
_side = []  # created on first use: a module attribute would not survive the harness's deepcopy
class Model(torch.nn.Module):
    def forward(self, x):
        if not _side:
            _side.append(torch.cuda.Stream())
        big = torch.ones(4096, 4096, device=x.device, dtype=x.dtype)
        _side[0].wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(_side[0]):
            for _ in range(4):
                big @ big  # real work that events on the main stream never see
        return x * 2
def get_inputs(batch_size=1):
    return [torch.randn(batch_size, 1024)]
def get_init_inputs():
    return []
"""

NAIVE = """
import statistics, torch
x = torch.randn(5, 1 << 20, device="cuda")
for _ in range(50): x * 2
torch.cuda.synchronize()
times = []
for _ in range(200):
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record(); x * 2; e.record(); torch.cuda.synchronize()
    times.append(s.elapsed_time(e) * 1e6)
print(statistics.median(times))
"""


def _median(c: Any) -> float | None:
    return statistics.median(c.samples.ns) if c.samples is not None else None


def do_bench_same_callable(path: Path, cfg: Any, threads: int) -> dict[str, Any]:
    """Build the configuration exactly as a worker does, then hand its call to do_bench."""
    import triton.testing

    side = Side(path=str(path), device=torch.device("cuda"), threads=threads, seed=0)
    side.load()
    res = side.prepare(
        in_process_command(
            cfg.runtime,
            cfg.dtype,
            cfg.batch_size,
            check=False,
            warmup=3,
            warmup_budget_ns=1e9,
            target_sample_ns=2e5,
            max_sample_ns=1e8,
        )  # fmt: skip
    )
    if res["status"] != "ok":
        return {"do_bench_error": res.get("reason")}
    call = side.ready[cfg.id].call
    out: dict[str, Any] = {
        "do_bench_ns": triton.testing.do_bench(call, warmup=25, rep=200, return_mode="median") * 1e6
    }
    if cfg.runtime in ("pytorch_eager", "torch_compile"):
        try:
            out["do_bench_cudagraph_ns"] = (
                triton.testing.do_bench_cudagraph(call, rep=200, return_mode="median") * 1e6
            )
        except Exception as e:  # noqa: BLE001 - capture can fail for some callables
            out["do_bench_cudagraph_error"] = f"{type(e).__name__}: {str(e)[:200]}"
    return out


def compare(out_dir: Path, harness: HarnessSettings, only: list[str] | None) -> list[dict]:
    rows: list[dict] = []
    threads = 4
    for name, large in EXAMPLES.items():
        if only and name not in only:
            continue
        path = ROOT / "examples" / name
        plans = [
            (["pytorch_eager", "torch_compile"], [SMALL, large]),
            # onnxruntime here is the CPU build (no CUDA provider): small batch only.
            (["onnxruntime"], [SMALL]),
        ]
        for runtimes, sizes in plans:
            bench = Benchmark.model_validate(
                {
                    "workload": str(path),
                    "runtimes": runtimes,
                    "dtypes": DTYPES,
                    "batch-sizes": sizes,
                }
            )
            t0 = time.perf_counter()
            doc = run_benchmark(bench, harness, progress=sys.stderr, device="cuda", threads=threads)
            print(f"# {name} {runtimes}: {time.perf_counter() - t0:.0f}s", file=sys.stderr)
            (out_dir / f"results_{Path(name).stem}_{runtimes[0]}.json").write_text(doc.to_json())
            for c in doc.configurations:
                row: dict[str, Any] = {
                    "workload": name,
                    "id": c.id,
                    "status": c.status,
                    "reason": c.reason,
                    "median_ns": _median(c),
                    "method": c.details.get("timing_method"),
                    "launch_overhead_ns": c.details.get("launch_overhead_ns"),
                    "naive_event_ns": c.details.get("naive_event_ns"),
                    "provider": c.details.get("provider"),
                    "process_medians_ns": [statistics.median(g) for g in c.samples.by_process()]
                    if c.samples
                    else None,
                }
                if c.status == "ok" and row["provider"] == "CPUExecutionProvider":
                    # do_bench reads CUDA events: CPU-provider work never reaches the GPU.
                    row["do_bench_error"] = "not comparable: onnxruntime ran on the CPU provider"
                elif c.status == "ok":
                    row.update(do_bench_same_callable(path, c, threads))
                    if row.get("do_bench_ns"):
                        row["ratio_vs_do_bench"] = row["median_ns"] / row["do_bench_ns"]
                    if row.get("do_bench_cudagraph_ns"):
                        row["ratio_vs_cudagraph"] = row["median_ns"] / row["do_bench_cudagraph_ns"]
                rows.append(row)
                _print_row(row)
            (out_dir / "compare.json").write_text(json.dumps(rows, indent=1))
    return rows


def _print_row(r: dict[str, Any]) -> None:
    def us(v: Any) -> str:
        return f"{v / 1e3:9.2f}" if isinstance(v, (int, float)) else f"{'-':>9s}"

    ratio = r.get("ratio_vs_do_bench")
    graph = r.get("ratio_vs_cudagraph")
    ratio_s = "-" if ratio is None else f"{ratio:.3f}"
    graph_s = "-" if graph is None else f"{graph:.3f}"
    print(
        f"{r['workload']:15s} {r['id']:32s} {r['status']:11s} harness {us(r['median_ns'])} us  "
        f"do_bench {us(r.get('do_bench_ns'))} us  ratio {ratio_s}  vs cudagraph {graph_s}  launch "
        f"{us(r.get('launch_overhead_ns'))} us  {r.get('provider') or ''} "
        f"{(r.get('reason') or '')[:100]}",
        flush=True,
    )


def spread(out_dir: Path) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "ten_us.py"
        path.write_text(TEN_US)
        bench = Benchmark.model_validate({"workload": str(path), "batch-sizes": [5]})
        doc = run_benchmark(
            bench,
            HarnessSettings(samples=200, processes=10, warmup=5),
            progress=sys.stderr,
            device="cuda",
        )
    (c,) = doc.configurations
    assert c.samples is not None, c.reason
    meds = [statistics.median(g) for g in c.samples.by_process()]
    overall = statistics.median(c.samples.ns)
    naive = []
    for _ in range(10):
        res = subprocess.run(
            [sys.executable, "-c", NAIVE], capture_output=True, text=True, check=True
        )
        naive.append(float(res.stdout.strip().splitlines()[-1]))
    naive_med = statistics.median(naive)
    result = {
        "harness_process_medians_ns": meds,
        "harness_median_ns": overall,
        "harness_spread": (max(meds) - min(meds)) / overall,
        "harness_min_max_ratio": [min(meds) / overall, max(meds) / overall],
        "launch_overhead_ns": c.details.get("launch_overhead_ns"),
        "naive_process_medians_ns": naive,
        "naive_spread": (max(naive) - min(naive)) / naive_med,
        "naive_min_max_ratio": [min(naive) / naive_med, max(naive) / naive_med],
        "method": c.details.get("timing_method"),
    }
    (out_dir / "spread.json").write_text(json.dumps(result, indent=1))
    print(
        f"~10 us kernel, harness ({result['method']}), 10 processes: per-process medians "
        f"{', '.join(f'{m / 1e3:.2f}' for m in meds)} us; spread (max-min)/median = "
        f"{result['harness_spread'] * 100:.2f}%"
    )
    print(
        f"same kernel, naive events in 10 processes: "
        f"{', '.join(f'{m / 1e3:.2f}' for m in naive)} us; spread = "
        f"{result['naive_spread'] * 100:.2f}%; launch overhead (host) "
        f"{(result['launch_overhead_ns'] or 0) / 1e3:.2f} us"
    )
    return result


def hidden(out_dir: Path) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "hidden.py"
        path.write_text(HIDDEN)
        bench = Benchmark.model_validate({"workload": str(path)})
        doc = run_benchmark(
            bench, HarnessSettings(samples=8, processes=1), progress=None, device="cuda"
        )
    (c,) = doc.configurations
    print(f"side-stream workload: status {c.status}: {c.reason}")
    (out_dir / "hidden.json").write_text(json.dumps({"status": c.status, "reason": c.reason}))


# ---- dobench: the harness against do_bench from ~10 us to ~2 ms, with the clocks ----

# name -> what get_inputs() returns: module-level shapes, so one native configuration each.
KERNELS = {
    "elementwise 5M (~10 us)": "[torch.randn(5 << 20)]",
    "matmul 2048^3": "[torch.randn(2048, 2048), torch.randn(2048, 2048)]",
    "matmul 4096^3": "[torch.randn(4096, 4096), torch.randn(4096, 4096)]",
    "matmul 6144x8192x4096": "[torch.randn(6144, 4096), torch.randn(4096, 8192)]",
    "matmul 6144x8192x8192": "[torch.randn(6144, 8192), torch.randn(8192, 8192)]",
    "matmul 8192^3": "[torch.randn(8192, 8192), torch.randn(8192, 8192)]",
}
KERNEL_FILE = """
import torch
class Model(torch.nn.Module):
    def forward(self, *xs):
        return xs[0] @ xs[1] if len(xs) == 2 else xs[0] * 2
def get_inputs():
    return {inputs}
def get_init_inputs():
    return []
"""


def _events_ms(fn: Any, *, calls: int, gap_s: float, flush: Any) -> list[float]:
    """Each call timed with events after an L2 flush; gap_s of idle host time before each."""
    times = []
    for _ in range(calls):
        if gap_s:
            torch.cuda.synchronize()
            time.sleep(gap_s)
        flush.zero_()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        if gap_s:
            e.synchronize()
        times.append((s, e))
    torch.cuda.synchronize()
    return [s.elapsed_time(e) for s, e in times]


def _patterns(call: Any) -> dict[str, Any]:
    """The same call back to back (as do_bench runs it) and with idle gaps (as the harness's
    rounds leave the GPU between samples), with the clock during each."""
    import triton.testing

    from benchmarks.gpu.gpu_support import ClockSampler

    flush = torch.empty(256 * 2**20 // 4, dtype=torch.int32, device="cuda")
    out: dict[str, Any] = {}
    sampler = ClockSampler()
    with sampler:
        out["do_bench_us"] = (
            triton.testing.do_bench(call, warmup=25, rep=200, return_mode="median") * 1e3
        )
    out["do_bench_clock"] = sampler.summary()
    with sampler:
        times = _events_ms(call, calls=200, gap_s=0.0, flush=flush)
    out["back_to_back_us"] = statistics.median(times) * 1e3
    out["back_to_back_clock"] = sampler.summary()
    with sampler:
        times = _events_ms(call, calls=100, gap_s=0.002, flush=flush)
    out["with_gaps_us"] = statistics.median(times) * 1e3
    out["with_gaps_clock"] = sampler.summary()
    return out


def _harness(path: Path) -> tuple[Any, dict[str, Any]]:
    bench = Benchmark.model_validate({"workload": str(path), "dtypes": ["float16"]})
    harness = HarnessSettings(samples=20, processes=2, warmup=3)
    doc = run_benchmark(bench, harness, progress=None, device="cuda", threads=4)
    (c,) = doc.configurations
    tel = c.details.get("gpu_telemetry") or {}

    def med(key: str) -> float | None:
        values = [v for v in tel.get(key, []) if v is not None]
        return statistics.median(values) if values else None

    return c, {
        "status": c.status,
        "reason": c.reason,
        "harness_us": statistics.median(c.samples.ns) / 1e3 if c.samples else None,
        "harness_clock": {
            "sm_mhz": med("sm_mhz"),
            "power_w": med("power_w"),
            "temp_c": med("temp_c"),
            # Any slowdown NVML reported around any sample (the harness keeps the union).
            "slowdown_reasons": [
                r
                for r in reason_names(int(c.details.get("clock_reasons_mask") or 0))
                if r in SLOWDOWN_REASONS
            ],
        },
        "throttled_samples": len(tel.get("throttled", [])),
        "default_sm_mhz": tel.get("default_sm_mhz"),
        "power_limit_w": c.details.get("power_limit_w"),
        "loops_per_sample": c.details.get("loops_per_sample"),
    }


def _clock(c: dict[str, Any]) -> str:
    mhz, watts = c.get("sm_mhz"), c.get("power_w")
    reasons = c.get("slowdown_reasons")
    why = ""
    if isinstance(reasons, dict):  # sampled during the loop: the share of readings
        why = " " + (",".join(f"{k} {v:.0%}" for k, v in reasons.items()) or "no slowdown")
    elif isinstance(reasons, list):  # the harness: any sample
        why = " " + (",".join(reasons) or "no slowdown")
    peak = f" peak {c['max_power_w']:.0f} W" if c.get("max_power_w") else ""
    return f"{mhz or 0:5.0f} MHz {watts or 0:4.0f} W{peak}{why}"


def dobench(out_dir: Path) -> list[dict[str, Any]]:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, inputs in KERNELS.items():
            path = Path(tmp) / f"kernel_{len(rows)}.py"
            path.write_text(KERNEL_FILE.format(inputs=inputs))
            c, row = _harness(path)
            row["kernel"] = name
            if not rows:
                print(
                    f"power limit {row.get('power_limit_w')} W, default SM clock "
                    f"{row.get('default_sm_mhz')} MHz",
                    flush=True,
                )
            if c.status == "ok":
                side = Side(path=str(path), device=torch.device("cuda"), threads=4, seed=0)
                side.load()
                cmd = in_process_command(
                    "pytorch_eager", "float16", c.batch_size, check=False, warmup=3,
                    warmup_budget_ns=1e9, target_sample_ns=2e5, max_sample_ns=1e8,
                )  # fmt: skip
                if side.prepare(cmd)["status"] == "ok":
                    row.update(_patterns(side.ready[c.id].call))
                    row["ratio"] = row["harness_us"] / row["do_bench_us"]
            rows.append(row)
            _print_dobench(row)
            (out_dir / "dobench.json").write_text(json.dumps(rows, indent=1))
    in_range = [r["ratio"] for r in rows if r.get("ratio")]
    if in_range:
        print(f"harness / do_bench, 10 us - 2 ms: {min(in_range):.3f} .. {max(in_range):.3f}")
    return rows


def _print_dobench(r: dict[str, Any]) -> None:
    if r.get("do_bench_us") is None:
        print(f"{r['kernel']:30s} {r['status']} {(r.get('reason') or '')[:200]}", flush=True)
        return
    print(
        f"{r['kernel']:30s} harness {r['harness_us']:8.1f} us ({_clock(r['harness_clock'])}, "
        f"{r['throttled_samples']} throttled)  do_bench {r['do_bench_us']:8.1f} us "
        f"({_clock(r['do_bench_clock'])})  ratio {r['ratio']:.3f}  | back to back "
        f"{r['back_to_back_us']:8.1f} us ({_clock(r['back_to_back_clock'])})  2 ms gaps "
        f"{r['with_gaps_us']:8.1f} us ({_clock(r['with_gaps_clock'])})",
        flush=True,
    )


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--out", default=os.environ.get("OUT") or ".")
    p.add_argument("--parts", default="dobench,hidden")
    p.add_argument("--examples", help="comma list of example files (default: all)")
    p.add_argument("--samples", type=int, default=20)
    p.add_argument("--processes", type=int, default=2)
    args = p.parse_args()
    if not torch.cuda.is_available():
        print("gpu_timing.py needs a CUDA GPU", file=sys.stderr)
        return 2
    configure_process(4, torch.device("cuda"))
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}")
    parts = args.parts.split(",")
    if "dobench" in parts:
        dobench(out_dir)
    if "hidden" in parts:
        hidden(out_dir)
    if "spread" in parts:
        spread(out_dir)
    if "compare" in parts:
        harness = HarnessSettings(
            samples=args.samples, processes=args.processes, warmup=3, **{"time-budget": 60.0}
        )
        only = args.examples.split(",") if args.examples else None
        rows = compare(out_dir, harness, only)
        ratios = [r["ratio_vs_do_bench"] for r in rows if r.get("ratio_vs_do_bench")]
        large = [
            r["ratio_vs_do_bench"]
            for r in rows
            if r.get("ratio_vs_do_bench") and not r["id"].endswith(f"bs{SMALL}")
        ]
        bound = [
            r["ratio_vs_do_bench"]
            for r in rows
            if r.get("ratio_vs_do_bench") and r["median_ns"] >= (r.get("launch_overhead_ns") or 0)
        ]
        graph = [
            r["ratio_vs_cudagraph"]
            for r in rows
            if r.get("ratio_vs_cudagraph") and not r["id"].endswith(f"bs{SMALL}")
        ]
        if bound:
            print(
                f"kernel-bound (median >= host launch time): {len(bound)} configurations, "
                f"ratio {min(bound):.3f}..{max(bound):.3f}"
            )
        if graph:
            print(f"large batch vs do_bench_cudagraph: {min(graph):.3f}..{max(graph):.3f}")
        if ratios:
            print(
                f"ratio harness/do_bench, all ok configurations: min {min(ratios):.3f} "
                f"max {max(ratios):.3f}; large batch only: "
                f"{min(large) if large else float('nan'):.3f}..{max(large) if large else 0:.3f}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
