"""`rnx bench`: run one workload's configurations and write the results document."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from bench_runner.runner import run_benchmark
from bench_runner.table import format_table
from rnx.config import Benchmark, HarnessSettings, KernalinConfig, load_config, override
from rnx.errors import UserError, run_command


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="rnx bench",
        description="Check and time a workload on each runtime x dtype x batch size; write the "
        "results document. Exit 0 when every configuration is ok or unsupported, 1 when any "
        "diverged or failed.",
    )
    p.add_argument("workload", help="a KernelBench-style .py file or an .onnx file")
    p.add_argument(
        "--runtimes", help="comma list: pytorch_eager,torch_compile,onnxruntime,tensorrt"
    )
    p.add_argument("--batch-sizes", help="comma list, e.g. 1,8")
    p.add_argument("--dtypes", help="comma list: float32,tf32 (GPU),float16,bfloat16,float64")
    p.add_argument("--out", default="results.json", help="results file (default results.json)")
    p.add_argument("--base", help="base version of the workload: paired mode (base vs head)")
    p.add_argument("--config", help="kernalin.yml (default: ./kernalin.yml when present)")
    p.add_argument("--samples", type=int, help="samples per configuration and side (>= 8)")
    p.add_argument("--processes", type=int, help="worker processes the samples are spread over")
    p.add_argument("--warmup", type=int, help="minimum warm-up samples per configuration")
    p.add_argument("--time-budget", type=float, help="seconds for warm-up and timing together")
    p.add_argument("--seed", type=int, help="seed for weights, inputs and the round order")
    p.add_argument(
        "--threads",
        type=int,
        help="CPU threads for torch and onnxruntime "
        "(default: half the CPUs, at most 4; or RNX_THREADS)",
    )
    p.add_argument(
        "--gpu-timer",
        help="events (CUDA events around each call; the default) or kernels (the sum of the "
        "call's own kernels' GPU durations, under the profiler)",
    )
    p.add_argument("--device", default="auto", help="auto (CUDA when visible), cpu or cuda[:N]")
    p.add_argument("--environment", help="a name kept in the environment key (e.g. 'h200-pool')")
    p.add_argument("--repository", help="owner/name to record (default: from git, else local/..)")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    return p


def _matching_benchmark(config: KernalinConfig, workload: str) -> Benchmark | None:
    want = os.path.normpath(workload)
    for b in config.benchmarks:
        if os.path.normpath(b.workload) == want:
            return b
    return None


def _benchmark(args: argparse.Namespace, config: KernalinConfig) -> Benchmark:
    base = _matching_benchmark(config, args.workload) or Benchmark(workload=args.workload)
    changes = {
        "workload": args.workload,
        "runtimes": args.runtimes,
        "batch-sizes": args.batch_sizes,
        "dtypes": args.dtypes,
    }
    return override(base, changes, source="command line", key_prefix="--")


def _harness(args: argparse.Namespace, config: KernalinConfig) -> HarnessSettings:
    changes = {
        "samples": args.samples,
        "processes": args.processes,
        "warmup": args.warmup,
        "time-budget": args.time_budget,
        "seed": args.seed,
        "gpu-timer": args.gpu_timer,
    }
    return override(config.harness, changes, source="command line", key_prefix="--")


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(sys.argv[1:] if argv is None else argv)
    config = load_config(args.config)
    benchmark = _benchmark(args, config)
    harness = _harness(args, config)
    doc = run_benchmark(
        benchmark,
        harness,
        repository=args.repository,
        base_workload=args.base,
        environment_name=args.environment,
        progress=None if args.quiet else sys.stderr,
        device=args.device,
        threads=args.threads,
        # harness.keep-traces: results.json's traces go to results.traces/ beside it.
        trace_dir=Path(args.out).with_suffix(".traces"),
    )
    out = Path(args.out)
    try:
        out.write_text(doc.to_json(indent=2) + "\n", encoding="utf-8")
    except OSError as e:
        raise UserError(f"cannot write {out}: {e.strerror}") from None
    print(format_table(doc))
    print(f"\nenvironment {doc.environment.key}; results written to {out}")
    broken = [c.id for c in doc.configurations if c.status in ("diverged", "error")]
    if broken:
        print(
            f"{len(broken)} configuration(s) diverged or failed: {', '.join(broken)}",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":  # python -m bench_runner.cli: `rnx bench` without the rnx launcher
    sys.exit(run_command("rnx bench", main))
