"""The roofline arithmetic and the peaks table's lookups."""

from __future__ import annotations

import math

import pytest

from bench_runner.peaks import load_table, lookup
from rnx.roofline import percent_of_peak_bandwidth, roofline


def test_compute_bound_matmul() -> None:
    # 8192^3 in float16 on an H200: 1.1e12 FLOPs at 989.5 TFLOP/s against 402 MB at 4.8 TB/s.
    flops, moved = 2 * 8192**3, 3 * 2 * 8192**2
    line = roofline(
        flops=flops, bytes_moved=moved, peak_flops=989.5e12, peak_bandwidth=4.8e12, measured_s=2e-3
    )
    assert line is not None and line.bound == "compute"
    assert line.roofline_s == pytest.approx(flops / 989.5e12)
    assert line.memory_s == pytest.approx(moved / 4.8e12)
    assert line.score == pytest.approx(flops / 989.5e12 / 2e-3)
    assert not line.beyond_roofline


def test_no_flops_is_memory_bound_and_a_score_above_one_is_flagged() -> None:
    line = roofline(
        flops=0, bytes_moved=4.8e9, peak_flops=1e15, peak_bandwidth=4.8e12, measured_s=0.9e-3
    )
    assert line is not None and line.bound == "memory" and line.compute_s is None
    assert line.score == pytest.approx(1e-3 / 0.9e-3)
    assert line.beyond_roofline  # 1.11 > 1.05: a counting or timing problem
    within = roofline(
        flops=0, bytes_moved=4.8e9, peak_flops=None, peak_bandwidth=4.8e12, measured_s=0.97e-3
    )
    assert within is not None and not within.beyond_roofline


def test_nothing_known_gives_no_roofline_and_bad_times_are_refused() -> None:
    assert (
        roofline(flops=10, bytes_moved=None, peak_flops=None, peak_bandwidth=None, measured_s=1)
        is None
    )
    with pytest.raises(ValueError, match="measured_s"):
        roofline(flops=1, bytes_moved=1, peak_flops=1, peak_bandwidth=1, measured_s=0)


def test_percent_of_peak_bandwidth() -> None:
    assert percent_of_peak_bandwidth(2.4e9, 1e-3, 4.8e12) == pytest.approx(0.5)


@pytest.mark.parametrize(
    ("name", "part"),
    [
        ("NVIDIA H200", "H200 SXM"),
        ("NVIDIA H100 80GB HBM3", "H100 SXM"),
        ("NVIDIA H100 PCIe", "H100 PCIe"),
        ("NVIDIA A100-SXM4-80GB", "A100 SXM 80GB"),
        ("NVIDIA A100-SXM4-40GB", "A100 40GB"),
        ("NVIDIA A100 80GB PCIe", "A100 PCIe 80GB"),
        ("NVIDIA B200", "B200 (HGX)"),
        ("NVIDIA L4", "L4"),
        ("NVIDIA L40S", "L40S"),
        ("NVIDIA A10G", "A10G"),
        ("Tesla T4", "T4"),
        ("AMD Instinct MI300X", "MI300X"),
    ],
)
def test_lookup_by_the_fingerprints_gpu_name(name: str, part: str) -> None:
    found = lookup(name)
    assert found is not None and found.part == part and found.source == "table"


@pytest.mark.parametrize(
    "name",
    ["NVIDIA H100 NVL", "NVIDIA H200 NVL", "NVIDIA GeForce RTX 4090", "NVIDIA L40", "", None],
)
def test_unknown_parts_are_not_guessed(name: str | None) -> None:
    assert lookup(name) is None


def test_every_part_states_a_source_bandwidth_and_dense_fp16() -> None:
    table = load_table()
    assert len(table) >= 12
    for part in table:
        assert part.reference.startswith("https://")
        assert part.bandwidth is not None and part.bandwidth > 1e11
        assert part.flops["fp16"] > part.flops["fp32"] > 0
        assert all(math.isfinite(v) for v in part.flops.values())
    h200 = lookup("NVIDIA H200")
    assert h200 is not None
    # Dense, not the datasheet's headline sparse figure (1,979 TFLOP/s for FP16).
    assert h200.flops["fp16"] == pytest.approx(989.5e12) and h200.bandwidth == 4.8e12
