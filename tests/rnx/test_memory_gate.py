"""Memory and launches as gated dimensions, and the diff carried by the gate's report."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rnx.config import ConfigError, GateSettings, parse_config
from rnx.memory_gate import MEMORY_FLOOR_BYTES, format_bytes, memory_change
from rnx.schema import MAX_CONFIGURATIONS, Memory, Profile, ResultsDocument, parse_results
from rnx.verdict import evaluate
from testbed.factories import make_results

DATA = Path(__file__).parents[1] / "data"
MiB = 1 << 20
CID = "pytorch_eager/float32/bs1"


def _profile(softmax_calls: int = 1, launches: float = 0.0) -> dict[str, Any]:
    ops = [
        {"name": "aten::addmm", "calls": 1, "self_ns": 400_000.0, "share": 0.7},
        {
            "name": "aten::_softmax",
            "calls": softmax_calls,
            "self_ns": 120_000.0 * softmax_calls,
            "share": 0.3,
        },
    ]
    total = sum(o["self_ns"] for o in ops)
    return {
        "source": "torch.profiler",
        "time_basis": "cpu",
        "calls": 5,
        "total_ns": total,
        "launches_per_call": launches,
        "operators": ops,
    }


def _with(
    doc: ResultsDocument, *, peak: int, profile: dict[str, Any] | None = None, launches: float = 0.0
) -> ResultsDocument:
    raw = json.loads(doc.to_json())
    for c in raw["configurations"]:
        c["memory"] = {"device": "cpu", "peak_allocated_bytes": peak}
        c["profile"] = profile or _profile(launches=launches)
    return parse_results(raw)


def _pair(head_peak: int, *, head_profile=None, head_launches=0.0, slowdown=1.0):
    base = _with(make_results(seed=1), peak=10 * MiB)
    head = _with(
        make_results(seed=2, slowdown=slowdown),
        peak=head_peak,
        profile=head_profile,
        launches=head_launches,
    )
    return base, head


def test_a_doubled_peak_warns_with_bytes_and_percent():
    base, head = _pair(20 * MiB)
    report = evaluate(head, [base], GateSettings())
    assert report.tier == "WARN"
    assert (
        f"{CID} peak memory 10 MiB → 20 MiB (+10 MiB, +100%), beyond gate.memory-threshold 10%"
        in report.reasons
    )
    row = next(c for c in report.comparisons if c.id == CID)
    assert row.memory is not None and row.memory.growth == pytest.approx(1.0)
    assert row.memory.tier == "WARN"


def test_block_threshold_blocks_and_off_turns_the_warning_off():
    base, head = _pair(20 * MiB)
    gate = parse_config({"gate": {"memory-block-threshold": "50%"}}).gate
    assert evaluate(head, [base], gate).tier == "BLOCK"
    off = parse_config({"gate": {"memory-threshold": "off"}}).gate
    assert evaluate(head, [base], off).tier == "PASS"


def test_an_unchanged_or_small_growth_passes():
    base, head = _pair(10 * MiB)
    assert evaluate(head, [base], GateSettings()).tier == "PASS"
    base, head = _pair(int(10.5 * MiB))  # +5%: under 10%
    assert evaluate(head, [base], GateSettings()).tier == "PASS"
    tiny = Memory(device="cpu", peak_allocated_bytes=1000)
    grown = Memory(device="cpu", peak_allocated_bytes=1000 + MEMORY_FLOOR_BYTES - 1)
    assert memory_change(CID, tiny, grown, None, None, GateSettings())[1] == []


def test_more_launches_per_call_warn():
    base, head = _pair(10 * MiB, head_launches=14.0)
    base = _with(base, peak=10 * MiB, launches=9.0)
    report = evaluate(head, [base], GateSettings())
    assert report.tier == "WARN"
    assert f"{CID} kernel launches per call 9 → 14" in report.reasons


def test_a_slower_configuration_is_explained_and_the_diff_never_decides():
    base, head = _pair(10 * MiB, head_profile=_profile(softmax_calls=2), slowdown=1.5)
    report = evaluate(head, [base], GateSettings())
    row = next(c for c in report.comparisons if c.id == CID)
    assert row.verdict == "slower"
    assert row.explanation[0].text == "+120 µs aten::_softmax (calls 1 → 2)"
    # The same profiles on an unchanged time: the diff is not asked for, and the tier stays.
    base, head = _pair(10 * MiB, head_profile=_profile(softmax_calls=2))
    quiet = evaluate(head, [base], GateSettings())
    assert quiet.tier == "PASS" and all(not c.explanation for c in quiet.comparisons)
    everything = evaluate(head, [base], GateSettings(), explain_all=True)
    assert everything.tier == "PASS" and all(c.explanation for c in everything.comparisons)


def test_old_documents_without_profiles_still_gate():
    raw = json.loads((DATA / "results-v1-single.json").read_text())
    base = parse_results(raw)
    head = parse_results({**raw, "run_id": "6c0f4f6e-0000-4000-8000-000000000002"})
    report = evaluate(head, [base], GateSettings())
    assert all(c.memory is None and not c.explanation for c in report.comparisons)
    # And a head with profiles against an old baseline: nothing to compare memory with.
    assert evaluate(_with(head, peak=MiB), [base], GateSettings()).tier == report.tier


def test_bad_memory_thresholds_are_refused_with_the_key():
    with pytest.raises(ConfigError, match="gate.memory-threshold"):
        parse_config({"gate": {"memory-threshold": "lots"}})
    with pytest.raises(ConfigError, match="gate.memory-block-threshold"):
        parse_config({"gate": {"memory-block-threshold": -0.1}})


def test_format_bytes():
    assert [format_bytes(v) for v in (512, 96 * 1024, 1.5 * MiB, 3 << 30)] == [
        "512 B",
        "96 KiB",
        "1.5 MiB",
        "3 GiB",
    ]


def _full_profile(prefix: str) -> dict[str, Any]:
    """A profile at every cap: 30 operators and 30 kernels with names of the longest length."""
    name = (prefix * 200)[:160]
    ops = [
        {
            "name": f"{i:02d}{name}"[:160],
            "calls": 1.0,
            "self_ns": 1234.5678,
            "share": 0.0333,
            "launches": 1.0,
            "kernels": [f"{j}{name}"[:160] for j in range(3)],
        }
        for i in range(30)
    ]
    kernels = [
        {"name": f"{i:02d}{name}"[:160], "launches": 1.0, "ns": 1234.5678, "share": 0.0333}
        for i in range(30)
    ]
    return {
        "source": "torch.profiler",
        "time_basis": "device",
        "calls": 5,
        "total_ns": 5e4,
        "launches_per_call": 30.0,
        "kernel_ns": 5e4,
        "operators": ops,
        "kernels": kernels,
    }


def test_a_48_configuration_document_of_full_profiles_stays_under_the_upload_limit():
    configs = [
        (r, d, bs)
        for r in ("pytorch_eager", "torch_compile", "onnxruntime")
        for d in ("float32", "float16")
        for bs in (1, 2, 4, 8, 16, 32, 64, 128)
    ]
    assert len(configs) == MAX_CONFIGURATIONS
    doc = make_results(configs=configs)
    raw = json.loads(doc.to_json())
    bare = len(doc.to_json())
    for c in raw["configurations"]:
        c["profile"] = _full_profile("at::native::kernel")
    full = parse_results(raw)
    added = len(full.to_json()) - bare
    # The worst case (every row, every name at 160 characters): 1.38 MB, a twelfth of the
    # server's 16 MiB body limit (RNX_MAX_BODY_BYTES); typical profiles are ~1.5 KB each.
    assert added < 1_500_000
    assert len(full.to_json()) < 16 * MiB


def test_profile_names_are_bounded_text():
    good = _full_profile("k")
    Profile(**good)
    for bad in ("x" * 161, "a\nb", "", "\x1b[31m"):
        data = json.loads(json.dumps(good))
        data["operators"][0]["name"] = bad
        with pytest.raises(ValueError):
            Profile(**data)
    data = json.loads(json.dumps(good))
    data["kernels"] = data["kernels"] * 2  # 60 rows: over the cap
    with pytest.raises(ValueError):
        Profile(**data)


def test_rnx_compare_prints_what_moved(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    from rnx_cli.compare import main

    base, head = _pair(20 * MiB, head_profile=_profile(softmax_calls=2), slowdown=1.5)
    (tmp_path / "base.json").write_text(base.to_json())
    (tmp_path / "head.json").write_text(head.to_json())
    assert main([str(tmp_path / "base.json"), str(tmp_path / "head.json")]) == 1
    out = capsys.readouterr().out
    assert f"why {CID} moved (profile diff; it explains, never decides):" in out
    assert "  +120 µs aten::_softmax (calls 1 → 2)" in out
    assert "  peak memory 10 MiB -> 20 MiB (+100%): WARN" in out
