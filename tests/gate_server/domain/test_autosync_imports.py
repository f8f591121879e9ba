"""The import closure auto-sync follows (gate_server/domain/autosync/imports.py): absolute,
relative and `from pkg import module` imports resolved to the repository's files, from the root
and the workload's folder; third-party modules ignored; cycles followed once; the bound holds."""

from __future__ import annotations

from gate_server.domain.autosync.imports import import_closure, imported_modules

FILES = {
    "kernels/attn.py": "import torch\nfrom kernels.common import scale\nimport neighbour\n",
    "kernels/neighbour.py": "from .ops import fused\n",
    "kernels/common.py": "from kernels import ops\nimport kernels.attn\n",  # a cycle
    "kernels/ops/__init__.py": "",
    "kernels/ops/fused.py": "import numpy\n",
    "kernels/ops/unused.py": "x = 1\n",
    "kernels/broken.py": "def (:\n",
    "README.md": "# no\n",
}


def closure(workload: str, **kw: int) -> tuple[set[str], bool]:
    return import_closure(workload, FILES.keys(), FILES.get, **kw)


def test_the_closure_holds_what_is_imported_directly_and_through_other_files() -> None:
    found, cut = closure("kernels/attn.py")
    assert not cut
    assert found == {
        "kernels/attn.py",
        "kernels/common.py",
        "kernels/neighbour.py",  # the workload's own folder, as a script imports it
        "kernels/ops/__init__.py",
        "kernels/ops/fused.py",  # relative import from neighbour.py
    }
    assert "kernels/ops/unused.py" not in found


def test_relative_and_from_imports_name_their_modules() -> None:
    assert imported_modules("from ..b import c\n", "pkg/sub/mod.py") == ["pkg.b", "pkg.b.c"]
    assert imported_modules("from . import x\n", "pkg/mod.py") == ["pkg", "pkg.x"]
    assert imported_modules("def (:\n", "kernels/broken.py") == []


def test_a_file_that_does_not_parse_or_is_not_python_stands_alone() -> None:
    assert closure("kernels/broken.py") == ({"kernels/broken.py"}, False)
    assert closure("models/resnet.onnx") == ({"models/resnet.onnx"}, False)


def test_the_closure_is_cut_at_its_bound_and_says_so() -> None:
    found, cut = closure("kernels/attn.py", max_files=2)
    assert cut and len(found) == 2
