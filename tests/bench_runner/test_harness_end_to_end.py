"""The whole harness through worker processes: interleaved rounds, paired mode, failures kept.

Each test starts real worker processes (spawn, about 2-4 s each on 2 cores).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter

import pytest

from bench_runner import run_benchmark
from bench_runner.cli import main as bench_main
from bench_runner.runner import plan_configurations
from rnx.config import Benchmark, ConfigError, HarnessSettings
from rnx.errors import UserError
from rnx.schema import parse_results
from tests.bench_runner.harness_helpers import EXAMPLES, WORKLOADS

FAST = HarnessSettings(samples=8, processes=2, warmup=1, **{"time-budget": 5.0})


def _bench(path, **kw) -> Benchmark:
    data = {
        "workload": str(path),
        "runtimes": ["pytorch_eager"],
        "dtypes": ["float32"],
        "batch-sizes": [1],
    }
    data.update(kw)
    return Benchmark.model_validate(data)


@pytest.mark.slow
def test_interleaved_rounds_spread_over_processes():
    bench = _bench(WORKLOADS / "tiny.py", dtypes=["float32", "float64"], **{"batch-sizes": [1, 2]})
    doc = run_benchmark(bench, FAST, progress=None, device="cpu")
    assert [c.status for c in doc.configurations] == ["ok"] * 4
    per_round: Counter[int] = Counter()
    for c in doc.configurations:
        assert c.samples is not None
        assert sorted(c.samples.round) == list(range(8))  # one sample per round
        assert Counter(c.samples.process) == {0: 4, 1: 4}  # two worker processes
        per_round.update(c.samples.round)
        assert c.correctness is not None and c.correctness.passed
        assert c.details["timing_method"] == "perf_counter_ns"
    assert set(per_round.values()) == {4}  # every round measured every configuration
    assert doc.settings.processes == 2 and doc.settings.mode == "single"
    assert doc.git.sha and doc.repository
    # The document the harness writes is one the server and action can read back.
    assert parse_results(doc.to_json()).configurations == doc.configurations


@pytest.mark.slow
def test_paired_mode_measures_base_and_head_in_the_same_rounds():
    bench = _bench(EXAMPLES / "softmax.py")
    one = FAST.model_copy(update={"processes": 1})  # each side still gets its own process
    doc = run_benchmark(
        bench, one, base_workload=str(EXAMPLES / "bad_kernel.py"), progress=None, device="cpu"
    )
    (c,) = doc.configurations
    assert doc.settings.mode == "paired"
    assert c.status == "ok" and c.samples is not None
    # The base is broken: recorded, not timed, and the head still measured.
    assert c.details["base_status"] == "diverged"
    assert c.base_samples is None

    doc2 = run_benchmark(
        bench, one, base_workload=str(EXAMPLES / "softmax.py"), progress=None, device="cpu"
    )
    (c2,) = doc2.configurations
    assert c2.base_samples is not None and c2.samples is not None
    assert sorted(c2.base_samples.round) == sorted(c2.samples.round) == list(range(8))
    assert doc2.workload.base_sha256 == doc2.workload.sha256


@pytest.mark.slow
def test_cli_writes_results_even_when_the_workload_fails(tmp_path, capsys):
    out = tmp_path / "results.json"
    rc = bench_main(
        [
            str(WORKLOADS / "import_error.py"),
            "--out",
            str(out),
            "--samples",
            "8",
            "--processes",
            "1",
            "--quiet",
            "--device",
            "cpu",
            "--batch-sizes",
            "1,2",
        ]
    )
    assert rc == 1
    doc = parse_results(out.read_text())
    assert [c.status for c in doc.configurations] == ["error", "error"]
    assert "broken on purpose" in doc.configurations[0].reason
    assert "Traceback" in doc.configurations[0].details["traceback"]
    assert "import_error.py" in capsys.readouterr().out  # the table names it


@pytest.mark.slow
def test_a_crashing_worker_costs_its_configurations_not_the_run(tmp_path):
    bench = _bench(WORKLOADS / "crashes.py", **{"batch-sizes": [1, 2]})
    doc = run_benchmark(
        bench, FAST.model_copy(update={"processes": 1}), progress=None, device="cpu"
    )
    assert [c.status for c in doc.configurations] == ["error", "error"]
    assert all("exit code 3" in (c.reason or "") for c in doc.configurations)


def test_more_than_48_configurations_is_a_clear_error():
    bench = _bench(
        WORKLOADS / "tiny.py",
        runtimes=["pytorch_eager", "torch_compile", "onnxruntime", "tensorrt"],
        dtypes=["float32", "float16", "bfloat16", "float64"],
        **{"batch-sizes": [1, 2, 4, 8]},
    )
    with pytest.raises(UserError, match="64 configurations; at most 48"):
        plan_configurations(bench)
    with pytest.raises(UserError, match="at most 48"):
        run_benchmark(bench, FAST, progress=None, device="cpu")


def test_missing_workload_is_a_user_error(tmp_path):
    with pytest.raises(UserError, match="does not exist"):
        run_benchmark(_bench(tmp_path / "nope.py"), FAST, progress=None, device="cpu")


def test_cli_flag_errors_name_the_flag(tmp_path):
    with pytest.raises(ConfigError, match="--samples"):
        bench_main([str(WORKLOADS / "tiny.py"), "--samples", "3", "--out", str(tmp_path / "r")])
    with pytest.raises(ConfigError, match="--dtypes"):
        bench_main([str(WORKLOADS / "tiny.py"), "--dtypes", "int8", "--out", str(tmp_path / "r")])


def test_cli_takes_tolerances_and_lists_from_kernalin_yml(tmp_path, monkeypatch):
    from bench_runner import cli

    cfg = tmp_path / "kernalin.yml"
    wl = WORKLOADS / "tiny.py"
    cfg.write_text(
        json.dumps(
            {
                "version": 1,
                "benchmarks": [
                    {
                        "workload": str(wl),
                        "dtypes": ["float64"],
                        "batch-sizes": [3],
                        "tolerances": {"float64": {"atol": 0.5, "rtol": 0.25}},
                    }
                ],
            }
        )
    )
    seen = {}

    def fake_run(benchmark, harness, **kw):  # capture what the CLI resolved, then stop
        seen["b"] = benchmark
        raise UserError("stop")

    monkeypatch.setattr(cli, "run_benchmark", fake_run)
    with pytest.raises(UserError, match="stop"):
        cli.main([str(wl), "--config", str(cfg), "--runtimes", "pytorch_eager,onnxruntime"])
    b = seen["b"]
    assert b.dtypes == ["float64"] and b.batch_sizes == [3]
    assert b.runtimes == ["pytorch_eager", "onnxruntime"]  # the flag overrides the file
    assert b.tolerances["float64"].atol == 0.5


def test_each_slot_runs_on_its_own_cpus_and_every_side_of_a_slot_on_the_same(monkeypatch):
    """Slots take consecutive blocks of `threads` CPUs (wrapping); RNX_PIN_CPUS=0 turns it off
    through the harness settings."""
    import os

    from bench_runner.placement import cpus_for_slot

    usable = sorted(os.sched_getaffinity(0))
    n = len(usable)
    assert cpus_for_slot(0, 1) == [usable[0]]
    assert cpus_for_slot(1, 1) == [usable[1 % n]]
    assert cpus_for_slot(n, 1) == [usable[0]]  # wraps around
    assert cpus_for_slot(0, n + 3) == usable  # never more CPUs than there are
    monkeypatch.setenv("RNX_PIN_CPUS", "0")
    harness = HarnessSettings()
    assert harness.pin_cpus is False
    assert cpus_for_slot(1, 1, pin=harness.pin_cpus) == []


def test_thread_count_comes_from_the_settings_model(monkeypatch):
    from bench_runner.placement import default_threads

    monkeypatch.setenv("RNX_THREADS", "3")
    assert HarnessSettings().threads == 3 and default_threads(HarnessSettings()) == 3
    # kernalin.yml's harness.threads wins over the machine's default
    assert default_threads(HarnessSettings(threads=2)) == 2
    monkeypatch.setenv("RNX_THREADS", "many")
    with pytest.raises(ConfigError, match="RNX_THREADS='many'"):
        HarnessSettings()


@pytest.mark.slow
def test_a_worker_process_runs_on_the_cpus_it_was_given():
    import os

    from bench_runner.worker_pool import WorkerHandle

    cpu = sorted(os.sched_getaffinity(0))[-1]
    spec = {"path": str(WORKLOADS / "tiny.py"), "device": "cpu", "threads": 1, "seed": 0}
    worker = WorkerHandle({**spec, "cpus": [cpu]})
    try:
        assert worker.hello["cpus"] == [cpu]
    finally:
        worker.close()
    unpinned = WorkerHandle(spec)
    try:
        assert unpinned.hello["cpus"] == []
    finally:
        unpinned.close()


@pytest.mark.slow
def test_no_batch_dimension_and_no_batch_sizes_run_at_the_workloads_own_shapes(tmp_path, capsys):
    out = tmp_path / "results.json"
    args = [str(WORKLOADS / "square_matmul.py"), "--out", str(out), "--device", "cpu"]
    rc = bench_main([*args, "--samples", "8", "--processes", "1", "--quiet", "--dtypes",
                     "float32,float64"])  # fmt: skip
    assert rc == 0
    doc = parse_results(out.read_text())
    assert [c.id for c in doc.configurations] == [
        "pytorch_eager/float32/native",
        "pytorch_eager/float64/native",
    ]
    assert all(c.batch_size is None and c.status == "ok" for c in doc.configurations)
    assert "no batch dimension" in doc.configurations[0].details["shapes"]
    printed = capsys.readouterr().out
    assert "pytorch_eager/float32/native" in printed and "own shapes" in printed
    # Given batch sizes, the same workload keeps the clear error.
    rc = bench_main([*args, "--samples", "8", "--processes", "1", "--quiet", "--batch-sizes", "1"])
    assert rc == 1
    (c,) = parse_results(out.read_text()).configurations
    assert c.id == "pytorch_eager/float32/bs1" and c.status == "error"
    assert "give no batch sizes" in (c.reason or "")


def test_cpu_runs_fork_their_workers_gpu_runs_spawn_them():
    from bench_runner.worker_pool import start_method

    assert start_method("cuda") == "spawn" and start_method("cuda:1") == "spawn"
    if sys.platform == "linux":
        assert start_method("cpu") == "forkserver"


def test_the_orchestrator_never_imports_torch():
    # Importing torch costs seconds on a small runner and its teardown at exit another second;
    # the workers import it, the process that drives them must not.
    code = (
        "import sys; import bench_runner.runner; "
        "from bench_runner.worker_pool import WorkerHandle; "
        "from bench_runner.orchestrator import Orchestrator; print('torch' in sys.modules)"
    )
    found = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert found.stdout.strip() == "False"


def test_a_shared_gpu_buys_more_rounds_within_the_budget():
    import io

    from bench_runner.gpu_checks import ContentionSigns
    from bench_runner.orchestrator import Orchestrator, WorkerPool
    from bench_runner.plan import Plan
    from bench_runner.progress import Progress

    bench = _bench(WORKLOADS / "tiny.py", **{"batch-sizes": [1, 2]})
    harness = HarnessSettings(samples=10, processes=2, **{"time-budget": 10.0})
    plan = Plan(
        configs=plan_configurations(bench), sides={"head": bench.workload}, samples=10,
        processes=2, harness=harness, benchmark=bench, device="cuda", threads=1,
    )  # fmt: skip
    stream = io.StringIO()
    orch = Orchestrator(
        plan, Progress(stream, n_configs=4, n_samples=10), WorkerPool(plan, None, None)
    )
    for st in orch.states.ok("head"):
        st.estimate_ns = 1e6
    orch._more_rounds_under_contention()
    assert orch.plan.samples == 10  # nobody else on the GPU: the rounds asked for
    st = orch.states["head"]["pytorch_eager/float32/bs1"]
    st.contention.append(
        ContentionSigns(
            gpu_pids=[7, 99],
            own_pid=7,
            calibration_spread=1.0,
            waited_for_gpu=False,
            active_pids=[99],
        )  # fmt: skip
    )
    orch._more_rounds_under_contention()
    assert orch.plan.samples == 20  # twice as many: 2 x 3 ms per round fits 60% of 10 s
    assert "shared with other work: 20 rounds instead of 10" in stream.getvalue()
    tight = Orchestrator(
        plan.with_samples(10),
        Progress(None, n_configs=4, n_samples=10),
        WorkerPool(plan, None, None),
    )
    tight.states["head"]["pytorch_eager/float32/bs1"].contention = list(st.contention)
    for s in tight.states.ok("head"):
        s.estimate_ns = 0.4e9  # 0.8 s per round: 60% of 10 s pays for 7 rounds, fewer than 10
    tight._more_rounds_under_contention()
    assert tight.plan.samples == 10  # never fewer than asked, never beyond the budget
