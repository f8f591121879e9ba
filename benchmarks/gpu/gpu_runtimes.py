"""Every runtime on a GPU machine without a package index (issue 28): install, test, compare.

1. install: from a folder of wheels, some of them moved in parts (NAME.part.00, .01, ...):
   the parts are joined, each wheel is checked against the folder's SHA256SUMS (a wheel it
   names that does not match stops the script), the CPU-only onnxruntime is removed, and the
   wheels are installed with --no-deps, a small one only where its module does not import.
   ONNX Runtime's CUDA provider loads the CUDA 13 libraries torch already brought
   (site-packages/nvidia/*/lib): every step below runs with them on LD_LIBRARY_PATH.
2. tests: tests/bench_runner/test_harness_gpu.py with pytest (-rs: the skips with reasons).
3. bench: `rnx bench examples/gelu_linear.py --runtimes pytorch_eager,torch_compile,
   onnxruntime --dtypes float32,tf32,float16,bfloat16 --batch-sizes 1,8,32`, once with each GPU
   timer (`--gpu-timer events`, then `kernels`): each configuration's status and median, and
   each run's wall time (what the kernels timer's profiling costs).
4. profile: the same configurations, and batch sizes 4096 and 16384, built by the harness
   (bench_runner.worker_process.Side) and timed by both timers (15 samples each), then the events
   timer's timed call (L2 flush, spin, events, the call) under torch.profiler, whose CUDA
   activity (CUPTI) sees every kernel of the process, ONNX Runtime's included. Per call: the sum
   of its kernels' GPU durations, their span (first start to last end) and count (our flush and
   spin kernels left out by name, and splitting the calls), next to both medians; the GPU's idle
   time per boundary between kernels. A table of both medians against the kernel sum ends it.

Before, on a machine with a package index (the wheels for the GPU machine's Python):
     pip download --no-deps --only-binary=:all: --python-version 3.12 \
         --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
         --platform manylinux2014_x86_64 --platform any -d SRC onnxruntime-gpu==1.31.1 ...
     python -m benchmarks.gpu.gpu_runtimes --pack SRC --into .whl
   writes .whl/SHA256SUMS and carry-sized folders .whl/c0, .whl/c1, ... (each under 48 MiB, a
   large wheel cut into NAME.part.NN): carry them one per call into one folder DIR there.

Run: python -m benchmarks.gpu.gpu_runtimes --wheels DIR [--out DIR]
       [--steps install,tests,bench,profile] [--runtimes R1,R2] [--dtypes D1,D2]
       [--profile-batches 1,8,32,4096,16384]
       (install needs DIR/SHA256SUMS; --out: $OUT; --runtimes: those the profile step runs;
       --dtypes: of the bench and profile steps)
Writes gpu_runtimes.json (every figure) under the output folder and prints a summary.
"""

from __future__ import annotations

import argparse
import glob
import hashlib
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import sysconfig
import time
from pathlib import Path
from typing import Any

from benchmarks.gpu.gpu_support import EXAMPLES, ROOT, out_dir, save

RUNTIMES = ["pytorch_eager", "torch_compile", "onnxruntime"]
DTYPES = ["float32", "tf32", "float16", "bfloat16"]
BATCHES = [1, 8, 32]
# Profiled only: sizes where kernels, not the GPU's gaps between them, take the time.
PROFILE_ONLY_BATCHES = [4096, 16384]
# Our own kernels in the timed call (the L2 flush's zero_ and the busy-stream spin), and CUPTI's
# synchronization records (waits, not work).
OURS = ("FillFunctor", "spin_kernel", "Sync", "Wait Event")
# Small wheels: installed only where this module does not import already.
MODULES = {
    "pydantic": "pydantic",
    "pydantic_core": "pydantic_core",
    "annotated_types": "annotated_types",
    "typing_inspection": "typing_inspection",
    "pyyaml": "yaml",
    "typing_extensions": "typing_extensions",
    "onnxscript": "onnxscript",
    "onnx_ir": "onnx_ir",
    "ml_dtypes": "ml_dtypes",
    "nvidia_ml_py": "pynvml",
    "pytest": "pytest",
    "pluggy": "pluggy",
    "iniconfig": "iniconfig",
    "packaging": "packaging",
}


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def join_parts(folder: Path, into: Path) -> list[Path]:
    """Every NAME.part.NN set in folder (any depth) joined into `into`, parts in number order."""
    sets: dict[str, list[Path]] = {}
    for p in folder.rglob("*.part.*"):
        sets.setdefault(p.name.rsplit(".part.", 1)[0], []).append(p)
    joined = []
    for stem, parts in sets.items():
        target = into / stem
        with target.open("wb") as out:
            for p in sorted(parts, key=lambda q: int(q.name.rsplit(".", 1)[1])):
                out.write(p.read_bytes())
        joined.append(target)
    return joined


def checked_wheels(folder: Path, work: Path) -> list[Path]:
    """The folder's wheels and joined parts, named by SHA256SUMS; a mismatch is fatal."""
    sums = {}
    for line in (folder / "SHA256SUMS").read_text().splitlines():
        if line.strip():
            digest, name = line.split()
            sums[name.lstrip("*")] = digest
    named = {digest: name for name, digest in sums.items()}
    joined = {}
    for path in join_parts(folder, work):
        # Parts named after another name than the wheel's: pip needs the wheel's own name.
        name = named.get(sha256(path), path.name)
        joined[name] = path.rename(work / name) if name != path.name else path
    wheels = []
    for name, digest in sums.items():
        path = joined.get(name) or next(iter(folder.rglob(name)), None)
        if path is None:
            raise SystemExit(f"{name} (SHA256SUMS) is not in {folder}, nor do its parts make it")
        got = sha256(path)
        if got != digest:
            raise SystemExit(f"{name}: sha256 {got} is not SHA256SUMS' {digest}: a part missing?")
        wheels.append(path)
    return wheels


CARRY_BYTES = 48 << 20  # with the working tree (about 13 MB), under the 64 MiB a call carries


def pack(src: Path, into: Path) -> None:
    """SRC's wheels into carry-sized folders into/c0, c1, ... (c0 holds SHA256SUMS)."""
    wheels = sorted(src.glob("*.whl"), key=lambda p: p.stat().st_size)
    pieces: list[tuple[str, bytes]] = []
    for w in wheels:
        data = w.read_bytes()
        if len(data) <= CARRY_BYTES:
            pieces.append((w.name, data))
            continue
        for n, at in enumerate(range(0, len(data), CARRY_BYTES)):
            pieces.append((f"{w.name}.part.{n:02d}", data[at : at + CARRY_BYTES]))
    sums = "".join(f"{sha256(w)}  {w.name}\n" for w in wheels)
    folders: list[list[tuple[str, bytes]]] = [[("SHA256SUMS", sums.encode())]]
    for name, data in pieces:
        if sum(len(d) for _, d in folders[-1]) + len(data) > CARRY_BYTES:
            folders.append([])
        folders[-1].append((name, data))
    for i, folder in enumerate(folders):
        target = into / f"c{i}"
        target.mkdir(parents=True, exist_ok=True)
        for name, data in folder:
            (target / name).write_bytes(data)
        print(f"{target}: {len(folder)} files, {sum(len(d) for _, d in folder) >> 20} MiB")


def pip(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "pip", "--no-input", *args], check=True)


def install(folder: Path, work: Path) -> dict[str, Any]:
    work.mkdir(parents=True, exist_ok=True)
    big = checked_wheels(folder, work)
    pip("uninstall", "-y", "onnxruntime")  # the CPU-only build shares the module's folder
    pip("install", "--no-deps", "--no-index", *map(str, big))
    small = []
    for wheel in sorted(folder.rglob("*.whl")):
        module = MODULES.get(wheel.name.split("-")[0].lower())
        if module is not None and importlib.util.find_spec(module) is None:
            small.append(str(wheel))
    if small:
        pip("install", "--no-deps", "--no-index", *small)
    return {"checked": [p.name for p in big], "small": [Path(s).name for s in small]}


def cuda_library_env() -> dict[str, str]:
    """LD_LIBRARY_PATH with torch's CUDA libraries (nvidia/*/lib) first."""
    site = sysconfig.get_paths()["purelib"]
    libs = sorted(set(glob.glob(f"{site}/nvidia/*/lib") + glob.glob(f"{site}/nvidia/*/*/lib")))
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env["LD_LIBRARY_PATH"] = ":".join([*libs, env.get("LD_LIBRARY_PATH", "")]).rstrip(":")
    return env


def run_tests(env: dict[str, str]) -> dict[str, Any]:
    test = "tests/bench_runner/test_harness_gpu.py"
    # --noconftest: tests/conftest.py brings the gate server's test helpers (and their packages).
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-rs",
        "--noconftest",
        "-p",
        "no:cacheprovider",
        test,
    ]
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    lines = done.stdout.strip().splitlines()
    print("\n".join(lines[-25:]))
    return {"rc": done.returncode, "tail": lines[-40:]}


def run_bench(
    env: dict[str, str], folder: Path, dtypes: list[str], gpu_timer: str
) -> dict[str, Any]:
    out = folder / f"gelu_linear_{gpu_timer}.json"
    cmd = [
        sys.executable, "-m", "rnx_cli", "bench", str(EXAMPLES / "gelu_linear.py"),
        "--runtimes", ",".join(RUNTIMES), "--dtypes", ",".join(dtypes),
        "--batch-sizes", ",".join(map(str, BATCHES)), "--out", str(out), "--quiet",
        "--gpu-timer", gpu_timer,
    ]  # fmt: skip
    t0 = time.perf_counter()
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    print(done.stdout[-6000:], done.stderr[-3000:])
    rows = []
    if out.exists():
        for c in json.loads(out.read_text())["configurations"]:
            ns = (c.get("samples") or {}).get("ns") or []
            rows.append(
                {
                    "id": f"{c['runtime']}/{c['dtype']}/bs{c['batch_size']}",
                    "status": c["status"],
                    "reason": c.get("reason"),
                    "median_us": round(statistics.median(ns) / 1e3, 2) if ns else None,
                    "launch_overhead_us": _us(c["details"].get("launch_overhead_ns")),
                    "timing_method": c["details"].get("timing_method"),
                    "kernels_per_call": c["details"].get("kernels_per_call"),
                    "event_span_us": _us(c["details"].get("event_span_ns")),
                    "profile_wall_ms": _ms(c["details"].get("profile_wall_ns")),
                    "provider": c["details"].get("provider"),
                    "sol": c.get("speed_of_light"),
                }
            )
    return {"rc": done.returncode, "seconds": round(time.perf_counter() - t0, 1), "rows": rows}


def _us(ns: Any) -> float | None:
    return round(ns / 1e3, 2) if isinstance(ns, int | float) else None


def _ms(ns: Any) -> float | None:
    return round(ns / 1e6, 2) if isinstance(ns, int | float) else None


def kernels_per_call(prof: Any) -> dict[str, Any]:
    """Per timed call, from the profile: the sum of its kernels' GPU durations, their span (the
    first kernel's start to the last one's end) and their count. The timer flushes L2 and spins
    before every call, so our own kernels split the timeline into calls."""
    events = sorted(
        (e for e in prof.events() if str(e.device_type).endswith("CUDA")),
        key=lambda e: e.time_range.start,
    )
    calls: list[list[Any]] = [[]]
    names = set()
    for e in events:
        if any(o in e.name for o in OURS):
            if calls[-1]:
                calls.append([])
            continue
        calls[-1].append(e)
        names.add(e.name[:80])
    calls = [c for c in calls if c]
    if not calls:
        return {"kernels": []}
    sums = [sum(e.time_range.elapsed_us() for e in c) for c in calls]
    spans = [max(e.time_range.end for e in c) - min(e.time_range.start for e in c) for c in calls]
    counts = [len(c) for c in calls]
    return {
        "calls_profiled": len(calls),
        "kernel_sum_us": round(statistics.median(sums), 3),
        "kernel_span_us": round(statistics.median(spans), 3),
        "kernels_per_call": statistics.median(counts),
        "kernels": sorted(names),
    }


def profile_one(side: Any, runtime: str, dtype: str, batch: int) -> dict[str, Any]:
    import torch
    from torch.profiler import ProfilerActivity, profile

    from bench_runner.worker_process import in_process_command

    cmd = in_process_command(runtime, dtype, batch)
    r = side.prepare(cmd)
    row: dict[str, Any] = {"id": f"{runtime}/{dtype}/bs{batch}", "status": r["status"]}
    if r["status"] != "ok":
        return {**row, "reason": r.get("reason")}
    timed = sorted(side.measure(cmd["id"])["ns"] for _ in range(15))
    ready = side.ready[cmd["id"]]
    assert ready.timer is not None
    kernels = kernels_timer_row(side, ready)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(10):
            ready.timer.sample(ready.call, 1)
        torch.cuda.synchronize()
    per_call = kernels_per_call(prof)
    launch_ns = side.report(cmd["id"]).get("launch_overhead_ns")
    side.ready.pop(cmd["id"])  # one configuration's buffers at a time
    median_us = statistics.median(timed) / 1e3
    out = {**row, "timed_median_us": round(median_us, 3), **kernels, **per_call}
    kernel_sum, span, count = (
        per_call.get(k) for k in ("kernel_sum_us", "kernel_span_us", "kernels_per_call")
    )
    if kernel_sum:
        out["timed_over_kernel_sum"] = round(median_us / kernel_sum, 3)
        if kernels.get("kernels_median_us"):
            out["kernels_over_kernel_sum"] = round(kernels["kernels_median_us"] / kernel_sum, 3)
        out["timed_over_span"] = round(median_us / span, 3)
        # The GPU's idle time between consecutive kernels of one call.
        out["gap_per_boundary_us"] = (
            round((span - kernel_sum) / (count - 1), 3) if count > 1 else None
        )
    out["launch_overhead_us"] = _us(launch_ns)
    return out


def kernels_timer_row(side: Any, ready: Any) -> dict[str, Any]:
    """The kernels timer on the same built call, at the events timer's loops per sample: its
    median, the event span of the same calls, kernels per call, and its wall time per sample."""
    from bench_runner.timing import make_timer

    timer = make_timer("cuda", side.device, side.timer_cache, side.telemetry, "kernels")
    ns, walls = [], []
    for _ in range(15):
        t0 = time.perf_counter_ns()
        ns.append(timer.sample(ready.call, ready.loops))
        walls.append(time.perf_counter_ns() - t0)
    rep = timer.report()
    return {
        "kernels_median_us": round(statistics.median(ns) / 1e3, 3),
        "kernels_event_span_us": _us(rep.get("event_span_ns")),
        "kernels_timer_kernels_per_call": rep.get("kernels_per_call"),
        "kernels_unattributed": rep.get("activities_unattributed"),
        "loops_per_sample": ready.loops,
        "kernels_sample_wall_ms": round(statistics.median(walls) / 1e6, 2),
    }


def summary_table(rows: list[dict[str, Any]]) -> str:
    """Both timers' medians against the profile's kernel sum, one line per configuration."""
    head = (
        f"{'configuration':32} {'events':>9} {'kernels':>9} {'kernel sum':>10} "
        f"{'ev/sum':>7} {'k/sum':>7} {'within 10%':>10}"
    )
    lines = [head]
    for r in rows:
        if r.get("status") != "ok" or not r.get("kernel_sum_us"):
            lines.append(f"{r['id']:32} {r.get('status')}: {str(r.get('reason'))[:60]}")
            continue
        k = r.get("kernels_over_kernel_sum")
        ok = "yes" if k is not None and abs(k - 1) <= 0.10 else "NO"
        lines.append(
            f"{r['id']:32} {r['timed_median_us']:9.2f} {r.get('kernels_median_us', 0):9.2f} "
            f"{r['kernel_sum_us']:10.2f} {r['timed_over_kernel_sum']:7.3f} {k or 0:7.3f} {ok:>10}"
        )
    return "\n".join(lines)


def profile_runtime(runtime: str, dtypes: list[str], batches: list[int]) -> None:
    """Every configuration of one runtime in this process, one ROW line each as it is done."""
    import torch

    from bench_runner.worker_process import Side, configure_process

    configure_process(1, torch.device("cuda"))
    side = Side(
        path=str(EXAMPLES / "gelu_linear.py"), device=torch.device("cuda"), threads=1, seed=0
    )
    side.load()
    for dtype in dtypes:
        for batch in batches:
            print("ROW " + json.dumps(profile_one(side, runtime, dtype, batch)), flush=True)


def run_profiles(
    env: dict[str, str],
    runtimes: list[str],
    dtypes: list[str],
    batches: list[int],
    save_rows: Any,
) -> list[dict[str, Any]]:
    """Each runtime in a process of its own; the rows are saved as they come (a call's time
    limit may end the step)."""
    rows: list[dict[str, Any]] = []
    for runtime in runtimes:
        code = (
            "from benchmarks.gpu.gpu_runtimes import profile_runtime; "
            f"profile_runtime({runtime!r}, {dtypes!r}, {batches!r})"
        )
        proc = subprocess.Popen(
            [sys.executable, "-c", code], cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True
        )
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.startswith("ROW "):
                row = json.loads(line[4:])
                print(json.dumps({k: v for k, v in row.items() if k != "kernels"}), flush=True)
                rows.append(row)
                save_rows(rows)
        if proc.wait() != 0:
            rows.append({"id": runtime, "status": "crashed", "rc": proc.returncode})
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--wheels", help="folder of wheels and wheel parts, with SHA256SUMS")
    ap.add_argument("--pack", help="folder of downloaded wheels: split for carrying, then stop")
    ap.add_argument("--into", default=".whl", help="where --pack writes c0, c1, ...")
    ap.add_argument("--out", help="output folder (default $OUT)")
    ap.add_argument("--steps", default="install,tests,bench,profile")
    ap.add_argument("--runtimes", default=",".join(RUNTIMES), help="of the profile step")
    ap.add_argument("--dtypes", default=",".join(DTYPES), help="of the bench and profile steps")
    ap.add_argument(
        "--profile-batches",
        default=",".join(map(str, BATCHES + PROFILE_ONLY_BATCHES)),
        help="batch sizes of the profile step",
    )
    args = ap.parse_args()
    if args.pack:
        pack(Path(args.pack), Path(args.into))
        return
    folder = out_dir(args.out) or Path("gpu_runtimes_out")
    folder.mkdir(parents=True, exist_ok=True)
    steps = args.steps.split(",")
    found: dict[str, Any] = {"started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    if "install" in steps:
        if not args.wheels:
            raise SystemExit("--wheels DIR is needed to install (or leave install out of --steps)")
        found["install"] = install(Path(args.wheels), Path("/tmp/gpu_runtimes_wheels"))
    env = cuda_library_env()
    probe = "import onnxruntime as o, torch; print(o.__version__, o.get_available_providers(), torch.__version__, torch.cuda.get_device_name())"  # noqa: E501
    found["versions"] = subprocess.run(
        [sys.executable, "-c", probe], env=env, capture_output=True, text=True
    ).stdout.strip()
    print(found["versions"], flush=True)
    dtypes = args.dtypes.split(",")
    if "tests" in steps:
        found["tests"] = run_tests(env)
        save(folder, "gpu_runtimes.json", found)
    if "bench" in steps:
        found["bench"] = {t: run_bench(env, folder, dtypes, t) for t in ("events", "kernels")}
        save(folder, "gpu_runtimes.json", found)
    if "profile" in steps:

        def save_rows(rows: list[dict[str, Any]]) -> None:
            found["profile"] = rows
            save(folder, "gpu_runtimes.json", found)

        batches = [int(b) for b in args.profile_batches.split(",")]
        save_rows(run_profiles(env, args.runtimes.split(","), dtypes, batches, save_rows))
        print(summary_table(found["profile"]), flush=True)
    save(folder, "gpu_runtimes.json", found)


if __name__ == "__main__":
    main()
