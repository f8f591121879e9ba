"""The work counters against FLOPs and bytes computed by hand, the declared overrides, the
measured-peak fallback and the GPU roofline script on the CPU."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from bench_runner.peak_probe import peaks_for
from bench_runner.work import count_work, measure_work

ROOT = Path(__file__).resolve().parents[2]


class MatMul(torch.nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a @ b


class Conv(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, kernel_size=3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


class Attention(torch.nn.Module):
    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.scaled_dot_product_attention(q, k, v)


class RunsOutOfMemory(torch.nn.Module):
    """Fails on a real device, as a model too large for a second copy would."""

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        if a.device.type != "meta":
            raise torch.OutOfMemoryError("no room for a second copy")
        return a @ b


def test_matmul_flops_and_bytes_by_hand() -> None:
    m, k, n = 64, 32, 16
    flops, moved, where = count_work(
        MatMul(), [torch.randn(m, k), torch.randn(k, n)], torch.float32
    )
    assert flops == 2 * m * k * n
    assert moved == 4 * (m * k + k * n + m * n)  # both inputs read, the output written
    assert where == "cpu"


def test_conv_counts_weights_as_read_and_in_the_dtype() -> None:
    x = torch.randn(2, 3, 16, 16).to(torch.float16)
    flops, moved, _ = count_work(Conv(), [x], torch.float16)
    # 2 per multiply-add: every output element (2 x 8 x 16 x 16) sums 3 x 3 x 3 products.
    assert flops == 2 * (2 * 8 * 16 * 16) * (3 * 3 * 3)
    weights = 8 * 3 * 3 * 3 + 8  # kernel and bias, read once
    assert moved == 2 * (2 * 3 * 16 * 16 + weights + 2 * 8 * 16 * 16)


def test_attention_flops_by_hand() -> None:
    b, h, s, d = 2, 4, 128, 64
    q = torch.randn(b, h, s, d).to(torch.bfloat16)
    flops, moved, _ = count_work(Attention(), [q, q.clone(), q.clone()], torch.bfloat16)
    # Q K^T and (softmax) V: two products of 2 * s * s * d per head.
    assert flops == 2 * (2 * b * h * s * s * d)
    assert moved == 2 * (4 * b * h * s * d)  # q, k, v read, the output written


def test_a_model_that_cannot_run_for_real_is_counted_on_meta_tensors() -> None:
    inputs = [torch.randn(8, 4), torch.randn(4, 2)]
    flops, moved, where = count_work(RunsOutOfMemory(), inputs, torch.float32)
    assert (flops, moved, where) == (2 * 8 * 4 * 2, 4 * (32 + 8 + 16), "meta")


def test_counting_does_not_import_the_compiler() -> None:
    # torch._dynamo's import takes seconds in a worker that would never need it (eager only).
    code = (
        "import sys, torch\n"
        "from bench_runner.work import count_work\n"
        "class M(torch.nn.Module):\n"
        "    def forward(self, q):\n"
        "        a = torch.nn.functional.scaled_dot_product_attention(q, q, q)\n"
        "        return torch.nn.functional.gelu(torch.nn.functional.layer_norm(a, (16,)))\n"
        "flops, _, where = count_work(M(), [torch.randn(1, 2, 8, 16)], torch.float32)\n"
        "print(flops, where, 'torch._dynamo' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [str(4 * 2 * 8 * 8 * 16), "cpu", "False"]


def test_declared_figures_override_the_counted_ones() -> None:
    module = SimpleNamespace(get_flops=lambda batch_size: 1000 * batch_size)
    work = measure_work(
        module,
        MatMul(),
        [torch.randn(4, 4), torch.randn(4, 4)],
        dtype="float32",
        torch_dtype=torch.float32,
        batch_size=3,
    )
    assert work["flops"] == 3000 and work["flops_source"] == "declared"
    assert work["bytes"] == 4 * 48 and work["bytes_source"] == "counted"


def test_declared_bytes_may_take_the_dtype() -> None:
    def get_bytes(batch_size: int, dtype: str) -> int:
        return batch_size * {"float16": 2, "float32": 4}[dtype]

    module = SimpleNamespace(get_flops=lambda batch_size: 0, get_bytes=get_bytes)
    work = measure_work(
        module, MatMul(), [], dtype="float16", torch_dtype=torch.float16, batch_size=5
    )
    assert work == {
        "flops": 0,
        "bytes": 10,
        "flops_source": "declared",
        "bytes_source": "declared",
    }


def test_a_bad_declared_figure_is_refused_naming_the_function() -> None:
    def get_flops(batch_size: int) -> str:
        return "lots"

    with pytest.raises(ValueError, match=r"get_flops\(8\) returned 'lots'"):
        measure_work(
            SimpleNamespace(get_flops=get_flops),
            MatMul(),
            [torch.randn(2, 2), torch.randn(2, 2)],
            dtype="float32",
            torch_dtype=torch.float32,
            batch_size=8,
        )


def test_an_onnx_workload_has_input_bytes_and_no_flops() -> None:
    work = measure_work(
        None, None, [torch.randn(3, 5)], dtype="float32", torch_dtype=torch.float32, batch_size=3
    )
    assert work["bytes"] == 60 and work["flops"] is None and "onnx" in work["note"]


def test_a_cpu_gets_measured_peaks_for_the_dtypes_asked() -> None:
    peaks = peaks_for(torch.device("cpu"), ["float32", "bfloat16"])
    assert peaks.source == "measured" and peaks.part == "measured: cpu"
    assert set(peaks.flops) == {"fp32", "bf16"}
    assert all(v > 1e6 for v in peaks.flops.values())  # a CPU does more than a MFLOP/s
    assert peaks.bandwidth is not None and peaks.bandwidth > 1e7
    assert "measured once in this run" in peaks.reference


def test_the_cpu_peak_probe_times_both_layouts_of_the_product(monkeypatch):
    # On a CPU float16's a @ b runs ~10x slower than a @ b.t() (the layout of a Linear layer's
    # weight): a peak of the first alone put honest float16 kernels "beyond the roofline".
    from bench_runner import peak_probe

    products = []

    def timed(fn, device):
        products.append((fn(), fn.__defaults__))  # the operands are bound as defaults
        return 1.0

    monkeypatch.setattr(peak_probe, "_best_s", timed)
    monkeypatch.setattr(peak_probe, "GEMM_N", {"cpu": (4,), "cuda": (4,)})
    peak_probe.gemm_flops(torch.device("cpu"), torch.float32)
    assert len(products) == 2
    (first, (a, b)), (second, _) = products
    assert torch.equal(first, a @ b) and torch.equal(second, a @ b.t())
