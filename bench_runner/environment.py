"""The environment fingerprint: small collect_* functions (as pyperf does) and the environment key.

The key hashes hardware and runner identity only, so a new torch or a runner image update does
not orphan the baseline; software versions are recorded in full and shown next to every verdict.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import platform
from pathlib import Path
from typing import Any

from bench_runner.telemetry import nvidia_smi
from rnx.schema import Environment


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return None


def collect_cpu(info: dict[str, Any]) -> None:
    model = None
    text = _read("/proc/cpuinfo") or ""
    for line in text.splitlines():
        if line.split(":")[0].strip() in ("model name", "Hardware", "Processor") and ":" in line:
            model = line.split(":", 1)[1].strip()
            break
    info["cpu_model"] = model or platform.processor() or platform.machine()
    info["cpu_count"] = os.cpu_count()
    info["machine"] = platform.machine()
    governor = _read("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor")
    if governor:
        info["cpu_governor"] = governor


def collect_memory(info: dict[str, Any]) -> None:
    for line in (_read("/proc/meminfo") or "").splitlines():
        if line.startswith("MemTotal:"):
            info["memory_total_kib"] = int(line.split()[1])


def collect_gpu(info: dict[str, Any]) -> None:
    try:
        import torch
    except ImportError:
        return
    if not torch.cuda.is_available():
        info["gpu"] = None
        return
    gpus = []
    for i in range(torch.cuda.device_count()):
        p = torch.cuda.get_device_properties(i)
        gpus.append(
            {
                "name": p.name,
                "compute_capability": f"{p.major}.{p.minor}",
                "memory_bytes": int(p.total_memory),
                "multiprocessors": int(p.multi_processor_count),
                "uuid": str(getattr(p, "uuid", "")) or None,
            }
        )
    info["gpus"] = gpus
    smi = nvidia_smi("driver_version,clocks.max.sm,clocks.max.mem,clocks.sm,clocks.mem")
    if smi:
        info["nvidia_smi"] = smi


def collect_os(info: dict[str, Any]) -> None:
    info["os"] = platform.system()
    info["kernel"] = platform.release()
    os_release = _read("/etc/os-release") or ""
    for line in os_release.splitlines():
        if line.startswith("PRETTY_NAME="):
            info["distribution"] = line.split("=", 1)[1].strip('"')


def collect_runner(info: dict[str, Any]) -> None:
    """GitHub's runner image and any container: part of the environment's identity."""
    for var in ("ImageOS", "ImageVersion", "RUNNER_OS", "RUNNER_ARCH", "RUNNER_ENVIRONMENT"):
        if os.environ.get(var):
            info[var] = os.environ[var]
    info["container"] = Path("/.dockerenv").exists() or bool(os.environ.get("container"))  # noqa: SIM112 - set by podman


def collect_software(info: dict[str, Any]) -> None:
    info["python"] = platform.python_version()
    info["python_implementation"] = platform.python_implementation()
    for dist in (
        "torch",
        "triton",
        "onnx",
        "onnxruntime",
        "onnxruntime-gpu",
        "onnxscript",
        "tensorrt",
        "numpy",
        "rnx-benchmark",
    ):
        try:
            info[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    try:
        import torch
    except ImportError:
        return
    info["torch_cuda"] = torch.version.cuda
    if torch.backends.cudnn.is_available():
        info["cudnn"] = torch.backends.cudnn.version()
    info["torch_threads"] = torch.get_num_threads()
    info["torch_interop_threads"] = torch.get_num_interop_threads()
    info["tf32_matmul"] = torch.backends.cuda.matmul.allow_tf32
    info["tf32_cudnn"] = torch.backends.cudnn.allow_tf32
    info["float32_matmul_precision"] = torch.get_float32_matmul_precision()
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "CUDA_VISIBLE_DEVICES"):
        if os.environ.get(var):
            info[var] = os.environ[var]


# What identifies a machine for comparison: equal keys mean numbers may be compared.
HARDWARE_KEY_FIELDS = ("cpu_model", "cpu_count", "machine", "gpus")
RUNNER_KEY_FIELDS = ("os", "distribution", "ImageOS", "RUNNER_OS", "RUNNER_ARCH", "container")


def environment_key(hardware: dict[str, Any], runner: dict[str, Any], name: str | None) -> str:
    gpus = [
        {"name": g.get("name"), "compute_capability": g.get("compute_capability")}
        for g in hardware.get("gpus") or []
    ]
    identity = {
        "hardware": {k: hardware.get(k) for k in HARDWARE_KEY_FIELDS if k != "gpus"},
        "gpus": gpus,
        "runner": {k: runner.get(k) for k in RUNNER_KEY_FIELDS},
        "name": name,
    }
    digest = hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()
    return f"env-{digest[:20]}"


def collect_environment(*, name: str | None = None, threads: int | None = None) -> Environment:
    hardware: dict[str, Any] = {}
    runner: dict[str, Any] = {}
    software: dict[str, Any] = {}
    collect_cpu(hardware)
    collect_memory(hardware)
    collect_gpu(hardware)
    collect_os(runner)
    collect_runner(runner)
    collect_software(software)
    if threads is not None:
        # What the worker processes set (bench_runner.worker_process.configure_process), not this
        # process's own values: the numbers were measured there.
        software.update(
            {
                "harness_threads": threads,
                "torch_threads": threads,
                "torch_interop_threads": 1,
                "onnxruntime_intra_op_threads": threads,
                "onnxruntime_inter_op_threads": 1,
                "tf32_matmul": False,
                "tf32_cudnn": False,
                "float32_matmul_precision": "highest",
            }
        )
    # The kernel release changes with updates; it is software, shown but not keyed.
    software["kernel"] = runner.pop("kernel", None)
    return Environment(
        key=environment_key(hardware, runner, name),
        name=name,
        hardware=hardware,
        runner=runner,
        software=software,
    )
