"""The compiler's modules imported in the background of a spawned worker, waited for once."""

from __future__ import annotations

import os
import sys

import pytest

from bench_runner import compiler_preload
from bench_runner.worker_pool import compiler_modules


@pytest.fixture
def slow_module(tmp_path, monkeypatch):
    """A module whose import lasts until the test sets `rnx_import_gate.RELEASE`."""
    (tmp_path / "rnx_import_gate.py").write_text("import threading\nRELEASE = threading.Event()\n")
    (tmp_path / "rnx_slow_import.py").write_text(
        "from rnx_import_gate import RELEASE\nRELEASE.wait(60)\nLOADED = True\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(compiler_preload, "_thread", None)
    yield "rnx_slow_import"
    for name in ("rnx_slow_import", "rnx_import_gate"):
        sys.modules.pop(name, None)


def test_a_build_that_needs_the_compiler_waits_for_the_background_import(slow_module):
    from rnx_import_gate import RELEASE

    compiler_preload.start([slow_module])
    thread = compiler_preload._thread
    assert thread is not None
    join = thread.join

    def release_then_join(*args, **kwargs):
        # The import ends only once wait() joins it: with a 0.3 s sleep in the import instead, a
        # test thread stalled that long on a busy machine would find it done and wait 0 ns.
        RELEASE.set()
        join(*args, **kwargs)

    thread.join = release_then_join
    waited = compiler_preload.wait()
    assert sys.modules[slow_module].LOADED
    assert waited > 0  # it was still importing when the build asked
    assert compiler_preload.wait() == 0  # once done, nobody waits again


def test_modules_already_imported_start_no_thread(slow_module):
    import json  # noqa: F401 - imported already, as in a worker forked from the fork server

    compiler_preload.start(["json"])
    assert compiler_preload._thread is None and compiler_preload.wait() == 0


def test_an_import_that_fails_in_the_background_fails_later_where_it_is_needed(slow_module):
    compiler_preload.start(["rnx_no_such_module_here"])
    assert compiler_preload.wait() >= 0  # no exception from the thread
    assert "rnx_no_such_module_here" not in sys.modules


def test_only_runtimes_that_compile_import_the_compiler_ahead():
    assert compiler_modules(["pytorch_eager"]) == []
    assert "torch._dynamo" in compiler_modules(["pytorch_eager", "torch_compile"])
    assert compiler_modules(["onnxruntime"]) == compiler_modules(["tensorrt"])


def test_workers_compile_in_process_where_triton_would_start_a_pool(monkeypatch):
    from bench_runner import worker_pool

    monkeypatch.delenv("TORCHINDUCTOR_COMPILE_THREADS", raising=False)
    monkeypatch.delenv("PYTORCH_NVML_BASED_CUDA_CHECK", raising=False)
    monkeypatch.setattr(worker_pool, "_has_triton", lambda: True)
    assert worker_pool._worker_variables()["TORCHINDUCTOR_COMPILE_THREADS"] == "1"
    # Set only while a worker starts: this process keeps its own environment.
    with worker_pool._worker_environment():
        assert os.environ["TORCHINDUCTOR_COMPILE_THREADS"] == "1"
    assert "TORCHINDUCTOR_COMPILE_THREADS" not in os.environ
    assert "PYTORCH_NVML_BASED_CUDA_CHECK" not in os.environ
    # The job's own choice wins; without Triton inductor starts no subprocess pool anyway.
    monkeypatch.setenv("TORCHINDUCTOR_COMPILE_THREADS", "8")
    assert "TORCHINDUCTOR_COMPILE_THREADS" not in worker_pool._worker_variables()
    monkeypatch.delenv("TORCHINDUCTOR_COMPILE_THREADS")
    monkeypatch.setattr(worker_pool, "_has_triton", lambda: False)
    assert worker_pool._worker_variables() == {"PYTORCH_NVML_BASED_CUDA_CHECK": "1"}
