"""The peaks table (bench_runner/peaks.yml): a part's dense FLOP/s per dtype and DRAM bandwidth.

Pure data and lookup (yaml, no torch, no pydantic): the harness looks the GPU up by the name
the environment fingerprint records; a CPU or a GPU not in the table gets measured peaks
(bench_runner/peak_probe.py) instead.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml

TABLE = Path(__file__).with_name("peaks.yml")
PeakSource = Literal["table", "measured"]


@dataclass(frozen=True)
class Peaks:
    part: str  # "H200 SXM", or what was measured ("measured: cpu", "measured: NVIDIA ...")
    flops: dict[str, float]  # FLOP/s by peak key (fp64, fp32, tf32, fp16, bf16, fp8)
    bandwidth: float | None  # bytes per second
    source: PeakSource
    reference: str  # the datasheet URL, or how the figures were measured
    match: tuple[str, ...] = field(default=(), repr=False)
    exclude: tuple[str, ...] = field(default=(), repr=False)

    def as_dict(self) -> dict[str, Any]:
        return {
            "part": self.part,
            "flops": dict(self.flops),
            "bandwidth": self.bandwidth,
            "source": self.source,
            "reference": self.reference,
        }


def name_tokens(name: str) -> set[str]:
    """ "NVIDIA H100 80GB HBM3" -> {"nvidia", "h100", "80gb", "hbm3"}."""
    return set(re.findall(r"[a-z0-9]+", name.lower()))


def _part(entry: dict[str, Any]) -> Peaks:
    return Peaks(
        part=str(entry["part"]),
        flops={k: float(v) * 1e12 for k, v in (entry.get("tflops") or {}).items()},
        bandwidth=float(entry["bandwidth_gbs"]) * 1e9,
        source="table",
        reference=str(entry["source"]),
        match=tuple(entry["match"]),
        exclude=tuple(entry.get("exclude") or ()),
    )


@functools.lru_cache(maxsize=4)
def load_table(path: Path = TABLE) -> tuple[Peaks, ...]:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    return tuple(_part(entry) for entry in data["parts"])


def lookup(name: str | None, table: tuple[Peaks, ...] | None = None) -> Peaks | None:
    """The first part whose match tokens all appear in the name and no exclude token does."""
    if not name:
        return None
    tokens = name_tokens(name)
    for part in load_table() if table is None else table:
        if set(part.match) <= tokens and not (set(part.exclude) & tokens):
            return part
    return None
