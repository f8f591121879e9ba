"""Speed-of-light scores on the GPU: the harness's against do_bench's, with the same arithmetic.

For a large float16 matrix product, a float32 one (held to the FP32 peak: the harness turns TF32
off), a bandwidth-bound float16 add and a float16 softmax: the work counted as the harness
counts it (bench_runner/work.py, FlopCounterMode on meta tensors; bytes = inputs read + outputs
written), the peaks as the harness finds them (bench_runner/peaks.yml by the GPU's name, else
measured),
then the median time per call from
- the harness's timer (bench_runner/timing.py: CUDA events, busy stream, L2 flushed), warmed up
  as a run warms up, SAMPLES samples;
- triton.testing.do_bench (L2 flushed between calls, median);
and for each: the roofline score (rnx/roofline.py) and nvbench's "% of peak bandwidth"
(bytes / time / peak bandwidth). Nothing here imports pydantic.

Run: python3 -m benchmarks.gpu.gpu_roofline [--out DIR] [--device cpu]
     (about a minute on an H200; on a CPU, smaller shapes, measured peaks and no do_bench)
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from bench_runner.peak_probe import peaks_for
from bench_runner.peaks import Peaks
from bench_runner.telemetry import GpuTelemetry, nvidia_smi, open_telemetry
from bench_runner.timing import make_timer, warm_up
from bench_runner.work import count_work
from rnx.roofline import PEAK_KEYS, percent_of_peak_bandwidth, roofline

SAMPLES = 50


class MatMul(torch.nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a @ b


class Add(torch.nn.Module):
    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return x + y


class Softmax(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=-1)


def cases(device: torch.device) -> list[tuple[str, str, torch.nn.Module, list[list[int]]]]:
    """(name, dtype, model, input shapes): large on a GPU, small enough for a CPU test."""
    if device.type == "cuda":
        return [
            ("matmul 8192^3", "float16", MatMul(), [[8192, 8192], [8192, 8192]]),
            ("matmul 4096^3", "float32", MatMul(), [[4096, 4096], [4096, 4096]]),
            ("add 2^28", "float16", Add(), [[1 << 28], [1 << 28]]),
            ("softmax 16384x16384", "float16", Softmax(), [[16384, 16384]]),
        ]
    return [
        ("matmul 512^3", "float32", MatMul(), [[512, 512], [512, 512]]),
        ("add 2^24", "float32", Add(), [[1 << 24], [1 << 24]]),
        ("softmax 4096x4096", "float32", Softmax(), [[4096, 4096]]),
    ]


DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def harness_median_s(call: Callable[[], Any], device: torch.device, telemetry: Any) -> float:
    """As a run times a configuration: warm-up (which picks the calls per sample), samples."""
    timer = make_timer("cuda" if device.type == "cuda" else "cpu", device, {}, telemetry)
    warm = warm_up(
        timer, call, min_iterations=10, budget_ns=5e8, target_sample_ns=2e5, max_sample_ns=2e7
    )
    ns = [timer.sample(call, warm.loops) for _ in range(SAMPLES)]
    return statistics.median(ns) / 1e9


def do_bench_median_s(call: Callable[[], Any]) -> float:
    import triton.testing

    return float(triton.testing.do_bench(call, warmup=25, rep=100, return_mode="median")) / 1e3


def scores(flops: int, moved: int, peaks: Peaks, dtype: str, seconds: float) -> dict[str, Any]:
    line = roofline(
        flops=flops,
        bytes_moved=moved,
        peak_flops=peaks.flops.get(PEAK_KEYS[dtype]),
        peak_bandwidth=peaks.bandwidth,
        measured_s=seconds,
    )
    out: dict[str, Any] = {"median_s": seconds}
    if line is not None:
        out.update(
            roofline_s=line.roofline_s,
            bound=line.bound,
            score=line.score,
            beyond_roofline=line.beyond_roofline,
        )
    if peaks.bandwidth:
        out["pct_peak_bandwidth"] = percent_of_peak_bandwidth(moved, seconds, peaks.bandwidth)
    return out


def run_case(
    name: str,
    dtype: str,
    model: torch.nn.Module,
    shapes: list[list[int]],
    device: torch.device,
    peaks: Peaks,
    telemetry: Any,
) -> dict[str, Any]:
    tdtype = DTYPES[dtype]
    inputs = [torch.randn(s, device=device, dtype=tdtype) for s in shapes]
    flops, moved, counted_on = count_work(model, inputs, tdtype)
    model = model.to(device=device, dtype=tdtype)

    def call() -> Any:
        return model(*inputs)

    row: dict[str, Any] = {
        "case": name,
        "dtype": dtype,
        "shapes": shapes,
        "flops": flops,
        "bytes": moved,
        "counted_on": counted_on,
        "harness": scores(flops, moved, peaks, dtype, harness_median_s(call, device, telemetry)),
    }
    if device.type == "cuda":
        row["do_bench"] = scores(flops, moved, peaks, dtype, do_bench_median_s(call))
    return row


# What the run's GPU was held to: its power limit and maximum clocks.
SMI_FIELDS = "name,power.limit,power.default_limit,clocks.max.sm,clocks.max.mem"


def _fmt(value: Any, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def _us(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1e6:.1f}us"


def print_table(rows: list[dict[str, Any]], peaks: Peaks) -> None:
    print(f"peaks: {peaks.part} ({peaks.source}; {peaks.reference})")
    print(
        "  ".join(f"{k}: {v / 1e9:.0f} GFLOP/s" for k, v in sorted(peaks.flops.items()))
        + f"  bandwidth: {_fmt(peaks.bandwidth and peaks.bandwidth / 1e9, '.0f')} GB/s"
    )
    head = (
        f"{'case':<22}{'dtype':<9}{'GFLOP':>9}{'MB':>9}{'bound':>9}{'roofline':>11}"
        f"{'harness':>11}{'SOL':>7}{'%BW':>7}{'do_bench':>11}{'SOL':>7}{'%BW':>7}"
    )
    print(head)
    for r in rows:
        h, d = r["harness"], r.get("do_bench", {})
        cells = [
            f"{r['case']:<22}{r['dtype']:<9}{r['flops'] / 1e9:>9.1f}{r['bytes'] / 1e6:>9.1f}",
            f"{h.get('bound', '-'):>9}{_us(h.get('roofline_s')):>11}",
        ]
        for side in (h, d):
            pct = side.get("pct_peak_bandwidth")
            cells.append(
                f"{_us(side.get('median_s')):>11}{_fmt(side.get('score'), '.2f'):>7}"
                f"{_fmt(pct and 100 * pct, '.0f'):>6}%"
            )
        print("".join(cells))
    for r in rows:
        for side in ("harness", "do_bench"):
            if r.get(side, {}).get("beyond_roofline"):
                print(
                    f"PROBLEM: {r['case']} by {side} scores {r[side]['score']:.2f} > 1: the "
                    f"time or the count is wrong (a kernel cannot beat its roofline)"
                )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.gpu.gpu_roofline", description=__doc__)
    p.add_argument("--out", help="folder to write roofline.json into")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = p.parse_args(argv)
    device = torch.device(args.device)
    torch.set_grad_enabled(False)
    torch.backends.cuda.matmul.allow_tf32 = (
        False  # as the harness runs (bench_runner/worker_process.py)
    )
    torch.backends.cudnn.allow_tf32 = False
    t0 = time.perf_counter()
    telemetry: Any = GpuTelemetry(reason="the run is on the CPU")
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        telemetry = open_telemetry(str(getattr(props, "uuid", "") or "") or None, device.index or 0)
    todo = cases(device)
    peaks = peaks_for(device, sorted({dtype for _, dtype, _, _ in todo}))
    rows = [run_case(*case, device=device, peaks=peaks, telemetry=telemetry) for case in todo]
    print_table(rows, peaks)
    result = {
        "device": peaks.part if device.type == "cpu" else torch.cuda.get_device_name(device),
        "peaks": peaks.as_dict(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "python": platform.python_version(),
        "nvidia_smi": nvidia_smi(SMI_FIELDS) if device.type == "cuda" else None,
        "samples": SAMPLES,
        "wall_s": time.perf_counter() - t0,
        "cases": rows,
    }
    print(f"wall {result['wall_s']:.1f}s")
    if args.out:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        (Path(args.out) / "roofline.json").write_text(json.dumps(result, indent=2))
        print(f"wrote {Path(args.out) / 'roofline.json'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
