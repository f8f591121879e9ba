"""Measured peaks for a CPU or a GPU the peaks table (bench_runner/peaks.yml) does not know.

Two short probes, once per run, in the worker that timed the first configurations, after its
timing: a large matrix product per dtype the run uses (FLOP/s) and a large copy (bytes per
second, reading and writing). They measure what this machine attains, not a datasheet's
figure, so a score against them is marked "measured" wherever it is shown.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import torch

from bench_runner.peaks import Peaks, lookup
from bench_runner.precision import set_matmul_precision
from rnx.roofline import PEAK_KEYS

DTYPES = {
    "float64": torch.float64,
    "float32": torch.float32,
    "tf32": torch.float32,  # with TF32 math on: set_matmul_precision
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
}
# Growing sizes, the best of REPEATS calls of each (after one call that is not timed), so that
# neither a busy moment of a shared machine nor one size's cache behaviour (a CPU's product can
# run several times faster at 512 than at 1024, whose operands leave the caches) is taken for
# the peak. Past ALWAYS_N, growth stops before a call would take over LONGEST_CALL_S (8x a step):
# a dtype a CPU computes slowly (float16) costs a second, not a minute.
REPEATS = 5
LONGEST_CALL_S = 0.2
GEMM_N = {"cpu": (256, 512, 1024), "cuda": (2048, 4096)}
ALWAYS_N = {"cpu": 512, "cuda": 2048}  # sizes up to this one are measured whatever they take
COPY_BYTES = {"cpu": 64 << 20, "cuda": 1 << 30}


def _settle(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _best_s(fn: Callable[[], object], device: torch.device) -> float:
    fn()
    _settle(device)
    best = float("inf")
    for _ in range(REPEATS):
        t0 = time.perf_counter()
        fn()
        _settle(device)
        best = min(best, time.perf_counter() - t0)
    return max(best, 1e-9)


def gemm_flops(device: torch.device, dtype: torch.dtype) -> float:
    """The best FLOP/s of n x n x n matrix products (2 n^3 FLOPs) over growing sizes n."""
    best = 0.0
    kind = "cuda" if device.type == "cuda" else "cpu"
    for n in GEMM_N[kind]:
        a = torch.randn(n, n, device=device).to(dtype)
        b = torch.randn(n, n, device=device).to(dtype)

        # Both layouts: a CPU's float16 product of a row-major b runs about 10x slower than of
        # a transposed one (1.3 against 12.5 GFLOP/s at n=256 on the 2-core CI machine), and a
        # Linear layer multiplies by its transposed weight: one layout alone would put the peak
        # below what honest kernels reach (SOL "3.15 compute!" for gelu_linear in float16).
        def product(a: torch.Tensor = a, b: torch.Tensor = b) -> torch.Tensor:
            return a @ b

        def transposed(a: torch.Tensor = a, b: torch.Tensor = b) -> torch.Tensor:
            return a @ b.t()

        seconds = min(_best_s(product, device), _best_s(transposed, device))
        best = max(best, 2.0 * n**3 / seconds)
        if n >= ALWAYS_N[kind] and 8 * seconds > LONGEST_CALL_S:
            break
    return best


def copy_bandwidth(device: torch.device) -> float:
    """Bytes per second of a large copy: each byte read once and written once."""
    kind = "cuda" if device.type == "cuda" else "cpu"
    n = COPY_BYTES[kind] // 4
    src = torch.empty(n, dtype=torch.float32, device=device).fill_(1.0)
    dst = torch.empty_like(src)
    seconds = _best_s(lambda: dst.copy_(src), device)
    return 2.0 * n * 4 / seconds


def describe(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return "cpu"


def peaks_for(device: torch.device, dtypes: list[str]) -> Peaks:
    """The table's peaks for this GPU, or measured ones for the dtypes given."""
    name = describe(device)
    if device.type == "cuda":
        found = lookup(name)
        if found is not None:
            return found
    flops = {}
    for dtype in dtypes:
        set_matmul_precision(dtype)
        try:
            flops[PEAK_KEYS[dtype]] = gemm_flops(device, DTYPES[dtype])
        except RuntimeError:  # no matrix product for this dtype here: no compute bound
            continue
        finally:
            set_matmul_precision("float32")
    return Peaks(
        part=f"measured: {name}",
        flops=flops,
        bandwidth=copy_bandwidth(device),
        source="measured",
        reference=(
            "measured once in this run: the best of 5 n x n x n matrix products per dtype and "
            "size (2 n^3 FLOPs) and of 5 copies (bytes read + written)"
        ),
    )
