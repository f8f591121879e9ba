"""Paired mode: base and head share one worker process per slot, and a broken side stays its own.

Each run starts real worker processes (spawn, about 2-4 s each on 2 cores).
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest
import torch
from harness_helpers import WORKLOADS, prepare_cmd

from bench_runner import run_benchmark
from bench_runner.worker import Side
from rnx.config import Benchmark, HarnessSettings

FAST = HarnessSettings(samples=8, processes=2, warmup=1, **{"time-budget": 5.0})


def _bench(path: Path, **kw: object) -> Benchmark:
    data: dict[str, object] = {
        "workload": str(path),
        "runtimes": ["pytorch_eager"],
        "dtypes": ["float32"],
        "batch-sizes": [1],
    }
    data.update(kw)
    return Benchmark.model_validate(data)


def _base_copy(tmp_path: Path, scale: str = "2.0") -> Path:
    """The base as a git worktree would give it: the same file name, elsewhere, edited."""
    base = tmp_path / "base" / "scaled.py"
    base.parent.mkdir()
    shutil.copy(WORKLOADS / "scaled.py", base)
    base.write_text(base.read_text().replace("SCALE = 1.0", f"SCALE = {scale}"))
    return base


@pytest.mark.slow
def test_each_rounds_base_and_head_are_timed_in_one_process(tmp_path, monkeypatch):
    log = tmp_path / "pids.log"
    monkeypatch.setenv("RNX_TEST_PID_LOG", str(log))  # spawned workers inherit it
    head = WORKLOADS / "scaled.py"
    base = _base_copy(tmp_path)
    doc = run_benchmark(
        _bench(head, **{"batch-sizes": [1, 2]}),
        FAST,
        base_workload=str(base),
        progress=None,
        device="cpu",
    )
    loaded: dict[int, set[str]] = {}
    for line in log.read_text().splitlines():
        pid, path = line.split(" ", 1)
        loaded.setdefault(int(pid), set()).add(str(Path(path).resolve()))
    assert os.getpid() not in loaded  # the orchestrator never imports a workload
    for c in doc.configurations:
        assert c.status == "ok" and c.details["base_status"] == "ok", c.reason
        assert c.samples is not None and c.base_samples is not None
        pids = c.details["worker_pids"]
        assert pids == c.details["base_worker_pids"]
        assert len(set(pids)) == 2 and None not in pids  # one process per slot, two slots
        head_process = dict(zip(c.samples.round, c.samples.process, strict=True))
        base_process = dict(zip(c.base_samples.round, c.base_samples.process, strict=True))
        assert head_process == base_process and sorted(head_process) == list(range(8))
        for pid in pids:
            # The process that timed both sides imported both files, each its own module.
            assert loaded[pid] == {str(head.resolve()), str(base.resolve())}


@pytest.mark.slow
def test_a_base_that_fails_to_import_leaves_the_head_measured():
    doc = run_benchmark(
        _bench(WORKLOADS / "tiny.py"),
        FAST.model_copy(update={"processes": 1}),
        base_workload=str(WORKLOADS / "import_error.py"),
        progress=None,
        device="cpu",
    )
    (c,) = doc.configurations
    assert c.status == "ok" and c.samples is not None and len(c.samples.ns) == 8
    assert c.details["base_status"] == "error"
    assert "broken on purpose" in c.details["base_reason"]
    assert c.base_samples is None and "base_worker_pids" not in c.details


@pytest.mark.slow
def test_a_base_whose_import_kills_the_shared_process_is_charged_to_the_base():
    doc = run_benchmark(
        _bench(WORKLOADS / "tiny.py"),
        FAST,
        base_workload=str(WORKLOADS / "exits_on_import.py"),
        progress=None,
        device="cpu",
    )
    (c,) = doc.configurations
    assert c.details["base_status"] == "error"
    assert "importing the base workload" in c.details["base_reason"]
    assert "exit code 5" in c.details["base_reason"]
    # Every slot's shared process died; each was replaced by one hosting the head alone.
    assert c.status == "ok" and c.samples is not None
    assert sorted(c.samples.round) == list(range(8))
    assert sorted(set(c.samples.process)) == [0, 1]


@pytest.mark.slow
def test_a_base_that_kills_the_process_while_building_costs_the_head_nothing():
    doc = run_benchmark(
        _bench(WORKLOADS / "tiny.py", **{"batch-sizes": [1, 2]}),
        FAST.model_copy(update={"processes": 1}),
        base_workload=str(WORKLOADS / "crashes.py"),
        progress=None,
        device="cpu",
    )
    for c in doc.configurations:
        assert c.details["base_status"] == "error"
        assert "exit code 3" in c.details["base_reason"]
        # The head was built in the process the base killed, and built again in the next.
        assert c.status == "ok" and c.samples is not None, c.reason
        assert sorted(c.samples.round) == list(range(8))
        assert "lost_processes" not in c.details


@pytest.mark.slow  # two inductor compilations, about 10 s on 2 cores
def test_two_versions_of_one_file_compile_apart_in_one_process(cpu_process, tmp_path):
    """Same file name and code, SCALE 1 vs 2: a shared module or dynamo cache would hand one
    side the other's graph, and its check against its own float64 reference would fail."""
    shared: dict[str, object] = {}
    head = Side(
        path=str(WORKLOADS / "scaled.py"),
        device=torch.device("cpu"),
        threads=1,
        seed=0,
        timer_cache=shared,
    )
    base = Side(
        path=str(_base_copy(tmp_path)),
        device=torch.device("cpu"),
        threads=1,
        seed=0,
        timer_cache=shared,
    )
    for side in (head, base):
        side.load()
        r = side.prepare(prepare_cmd("torch_compile", "float32", 2))
        assert r["status"] == "ok", r.get("reason")
        assert r["correctness"]["passed"]
    assert head.workload is not None and base.workload is not None
    hm, bm = head.workload.module, base.workload.module  # type: ignore[union-attr]
    assert hm is not bm and hm.__name__ != bm.__name__
    assert sys.modules[hm.__name__] is hm and sys.modules[bm.__name__] is bm
    assert (hm.SCALE, bm.SCALE) == (1.0, 2.0)
    for side in (head, base):
        side.arm()
    for side in (base, head):  # interleaved after both are armed: no recompile, no error
        assert side.measure("torch_compile/float32/bs2")["ns"] > 0
