"""Harness overhead on CPU: the per-sample cost against an empty callable, and where the wall
time of the examples' default run goes (correctness, build, warm-up, timing, the rest).

Run: .venv/bin/python -m benchmarks.harness.harness_overhead [--samples 30] [--processes 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench_runner import run_benchmark
from bench_runner.timing import CpuTimer, warm_up
from rnx.config import Benchmark, HarnessSettings

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ["attention.py", "gelu_linear.py", "softmax.py", "conv_block.py", "tiny_mlp.onnx"]
EMPTY_WORKLOAD = """
import torch
class Model(torch.nn.Module):
    def forward(self, x):
        return x
def get_inputs(batch_size=1):
    return [torch.randn(batch_size, 1)]
def get_init_inputs():
    return []
"""


def timer_floor() -> None:
    """What the CPU timer reports for a callable that does nothing: its resolution floor."""
    timer = CpuTimer()

    def empty() -> None:
        return None

    warm = warm_up(
        timer, empty, min_iterations=5, budget_ns=5e8, target_sample_ns=1e6, max_sample_ns=1e7
    )
    per_call = [timer.sample(empty, warm.loops) for _ in range(30)]
    print(
        f"empty callable, in-process timer: {statistics.median(per_call):.1f} ns per call "
        f"(median of 30 samples of {warm.loops} calls)"
    )


def harness_floor(samples: int, processes: int) -> None:
    """The same through the whole harness: worker processes, pipe round trips, rounds."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "empty.py"
        path.write_text(EMPTY_WORKLOAD)
        bench = Benchmark.model_validate({"workload": str(path)})
        harness = HarnessSettings(samples=samples, processes=processes)
        t0 = time.perf_counter()
        doc = run_benchmark(bench, harness, progress=None, device="cpu")
        wall = time.perf_counter() - t0
    (c,) = doc.configurations
    assert c.samples is not None, c.reason
    loops = c.details["loops_per_sample"]
    sample_ns = statistics.median(c.samples.ns) * loops
    wall_per_sample = c.details["timing_wall_ns"] / len(c.samples.ns)
    print(
        f"identity model through the harness: {statistics.median(c.samples.ns):.0f} ns per "
        f"call ({loops} calls per sample)"
    )
    print(
        f"per-sample wall in the orchestrator: {wall_per_sample / 1e3:.0f} us, of which "
        f"{sample_ns / 1e3:.0f} us measured: overhead {(wall_per_sample - sample_ns) / 1e3:.0f} "
        f"us per sample (pipe round trip, outside the timed region)"
    )
    print(f"whole run: {wall:.1f} s for {len(c.samples.ns)} samples in {processes} processes")


def split_examples(samples: int, processes: int) -> None:
    print(
        "\nexamples' default run (pytorch_eager, float32, batch size 1, "
        f"{samples} samples, {processes} processes):"
    )
    header = (
        f"{'workload':16s} {'total':>7s} {'correct':>8s} {'build':>7s} {'warm-up':>8s} "
        f"{'timing':>7s} {'rest':>7s}"
    )
    print(header)
    totals = [0.0] * 6
    for name in EXAMPLES:
        path = ROOT / "examples" / name
        runtimes = ["onnxruntime"] if name.endswith(".onnx") else ["pytorch_eager"]
        bench = Benchmark.model_validate({"workload": str(path), "runtimes": runtimes})
        t0 = time.perf_counter()
        doc = run_benchmark(
            bench,
            HarnessSettings(samples=samples, processes=processes),
            progress=None,
            device="cpu",
        )
        total = time.perf_counter() - t0
        (c,) = doc.configurations
        d = c.details
        correct = d.get("check_wall_ns", 0) / 1e9
        build = (
            d.get("build_wall_ns", 0) + sum(x or 0 for x in d.get("build_wall_ns_per_process", []))
        ) / 1e9
        warm = d.get("warmup_wall_ns", 0) / 1e9
        timing = d.get("timing_wall_ns", 0) / 1e9
        rest = total - correct - build - warm - timing
        row = [total, correct, build, warm, timing, rest]
        totals = [a + b for a, b in zip(totals, row, strict=True)]
        print(f"{name:16s} " + " ".join(f"{v:7.2f}s" for v in row) + f"  [{c.status}]")
    print(f"{'all':16s} " + " ".join(f"{v:7.2f}s" for v in totals))
    print(
        "rest = starting worker processes (interpreter, torch import, workload import), "
        "environment collection, pipe round trips outside samples"
    )


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--samples", type=int, default=30)
    p.add_argument("--processes", type=int, default=3)
    args = p.parse_args()
    timer_floor()
    harness_floor(args.samples, args.processes)
    split_examples(args.samples, args.processes)
    return 0


if __name__ == "__main__":
    sys.exit(main())
