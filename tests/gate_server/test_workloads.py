"""A workload's identity: its path in the repository, normalised (gate_server/workloads.py)."""

from __future__ import annotations

import json

import pytest

from gate_server.workloads import (
    UNKNOWN_WORKLOAD,
    InvalidWorkloadPath,
    several_workloads,
    stored_workload,
    workload_identity,
)
from testbed.factories import HOSTILE_WORKLOAD


@pytest.mark.parametrize(
    ("path", "identity"),
    [
        ("kernels/attention.py", "kernels/attention.py"),
        ("./kernels/attention.py", "kernels/attention.py"),
        ("././kernels/./attention.py", "kernels/attention.py"),
        ("kernels//attention.py", "kernels/attention.py"),
        ("kernels\\attention.py", "kernels/attention.py"),
        ("kernels/attention.py/", "kernels/attention.py"),
        ("Kernels/Attention.py", "Kernels/Attention.py"),  # git paths are case-sensitive
        ("model.onnx", "model.onnx"),
        ("kernels/..hidden.py", "kernels/..hidden.py"),  # a name, not a '..' segment
        # Odd but legal characters are kept (shown escaped, never refused); its "//" is one "/".
        (HOSTILE_WORKLOAD, HOSTILE_WORKLOAD.replace("//", "/")),
    ],
)
def test_paths_normalise_to_one_identity(path: str, identity: str) -> None:
    assert workload_identity(path) == identity


@pytest.mark.parametrize(
    "path",
    [
        "",
        ".",
        "./",
        "/",
        "/abs/kernel.py",
        "\\\\server\\share\\kernel.py",
        "C:\\kernels\\kernel.py",
        "c:kernel.py",
        "..",
        "../kernel.py",
        "kernels/../kernel.py",
        "kernels/..",
        "kernels/\x00kernel.py",
        "kernels/\x7fkernel.py",
        "k" * 1001,
        "é" * 501,  # 501 characters, 1002 bytes
    ],
)
def test_paths_that_name_no_file_in_the_repository_are_refused(path: str) -> None:
    with pytest.raises(InvalidWorkloadPath):
        workload_identity(path)


def test_the_longest_path_is_1000_bytes() -> None:
    assert workload_identity("k" * 1000) == "k" * 1000
    assert workload_identity("é" * 500) == "é" * 500


def test_the_placeholder_is_no_path_an_upload_can_have() -> None:
    with pytest.raises(InvalidWorkloadPath):
        workload_identity(UNKNOWN_WORKLOAD)


@pytest.mark.parametrize(
    ("document", "workload"),
    [
        (json.dumps({"workload": {"path": "./kernels/a.py"}}).encode(), "kernels/a.py"),
        (json.dumps({"workload": {"path": "/abs/a.py"}}).encode(), UNKNOWN_WORKLOAD),
        (json.dumps({"workload": {"path": 7}}).encode(), UNKNOWN_WORKLOAD),
        (json.dumps({"workload": "kernels/a.py"}).encode(), UNKNOWN_WORKLOAD),
        (json.dumps({"no": "workload"}).encode(), UNKNOWN_WORKLOAD),
        (json.dumps([1, 2]).encode(), UNKNOWN_WORKLOAD),
        (b"\xff\xfe not utf-8", UNKNOWN_WORKLOAD),
        (b"{not json", UNKNOWN_WORKLOAD),
        (b"[" * 100_000, UNKNOWN_WORKLOAD),
        (b"", UNKNOWN_WORKLOAD),
    ],
)
def test_a_stored_document_always_yields_a_workload(document: bytes, workload: str) -> None:
    assert stored_workload(document) == workload


def test_bodies_with_several_workloads_are_named() -> None:
    doc = {"workload": {"path": "a.py", "sha256": "0" * 64}}
    assert several_workloads(doc) is None
    assert several_workloads([doc, doc]) == "the body is a JSON array of 2 documents"
    assert several_workloads({**doc, "workloads": []}) is not None
    assert several_workloads({"workload": [doc["workload"]]}) is not None
    assert several_workloads([1, 2]) is None  # no documents at all: the parser says so
    assert several_workloads("text") is None
