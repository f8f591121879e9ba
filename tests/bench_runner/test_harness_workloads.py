"""Loading workloads: batch sizes, ModelNew weights, and failures recorded instead of raised."""

from __future__ import annotations

import torch

from bench_runner.workload import PythonWorkload
from tests.bench_runner.harness_helpers import EXAMPLES, WORKLOADS


def test_batch_size_reaches_get_inputs_keyword():
    wl = PythonWorkload.load(str(WORKLOADS / "tiny.py"))
    assert wl.inputs(5, seed=0)[0].shape == (5, 8)


def test_batch_size_reaches_module_global():
    wl = PythonWorkload.load(str(EXAMPLES / "gelu_linear.py"))
    assert wl.inputs(3, seed=0)[0].shape[0] == 3
    assert wl.module.batch_size == 3


def test_each_load_has_its_own_namespace():
    a = PythonWorkload.load(str(EXAMPLES / "gelu_linear.py"))
    b = PythonWorkload.load(str(EXAMPLES / "gelu_linear.py"))
    a.inputs(2, seed=0)
    b.inputs(7, seed=0)
    assert a.module is not b.module and a.module.batch_size == 2


def test_inputs_are_signed_even_when_the_workload_draws_positive_values(tmp_path):
    path = tmp_path / "positive.py"
    path.write_text(
        "import torch\nbatch_size = 4\nclass Model(torch.nn.Module):\n"
        "    def forward(self, x):\n        return x\n"
        "def get_inputs():\n    return [torch.rand(batch_size, 64)]\n"
        "def get_init_inputs():\n    return []\n"
    )
    x = PythonWorkload.load(str(path)).inputs(4, seed=1)[0]
    assert (x < 0).any() and (x > 0).any()


def test_model_new_gets_model_state_when_parameters_match():
    wl = PythonWorkload.load(str(EXAMPLES / "conv_block.py"))
    ref, new, how = wl.build(seed=0)
    assert "state_dict" in how
    for k, v in ref.state_dict().items():
        assert torch.equal(v, new.state_dict()[k])


def test_import_error_is_an_error_with_traceback(prepare):
    r = prepare(WORKLOADS / "import_error.py")
    assert r["status"] == "error"
    assert "broken on purpose" in r["reason"]
    assert "Traceback" in r["details"]["traceback"]


def test_missing_name_is_an_error_naming_it(prepare):
    r = prepare(WORKLOADS / "missing_name.py")
    assert r["status"] == "error"
    assert "get_inputs" in r["reason"]


def test_no_way_to_set_batch_size_is_a_clear_error(prepare):
    # Explicit batch sizes for a workload without a batch dimension: the error says both fixes.
    r = prepare(WORKLOADS / "no_batch_size.py")
    assert r["status"] == "error"
    assert "batch_size" in r["reason"]
    assert "give no batch sizes to run it at its own shapes" in r["reason"]


def test_not_a_workload_file(prepare, tmp_path):
    path = tmp_path / "kernel.cu"
    path.write_text("// not python")
    r = prepare(path)
    assert r["status"] == "error" and ".py" in r["reason"]


# ---- Workloads without a batch dimension (KernelBench's square matmul and friends) ----


def test_batching_is_detected():
    assert PythonWorkload.load(str(WORKLOADS / "tiny.py")).batching == "keyword"
    assert PythonWorkload.load(str(EXAMPLES / "gelu_linear.py")).batching == "global"
    assert PythonWorkload.load(str(WORKLOADS / "square_matmul.py")).batching == "none"


def test_native_shapes_draw_the_workloads_own_inputs():
    wl = PythonWorkload.load(str(WORKLOADS / "square_matmul.py"))
    a, b = wl.inputs(None, seed=0)
    assert a.shape == b.shape == (64, 64)


def test_a_native_configuration_is_checked_and_timed(prepare):
    r = prepare(WORKLOADS / "square_matmul.py", batch_size=None)
    assert r["status"] == "ok", r.get("reason")
    assert r["correctness"]["passed"]
