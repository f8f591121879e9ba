"""`rnx gate` with harness.keep-traces: the traces its run kept reach the real server beside
the run (tests/gate_server/domain/test_traces.py covers the server's refusals); a trace the server
refuses is a warning, never the build's failure."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from action.gate import main
from testbed.factories import make_results
from testbed.gate_helpers import Token, create_token, start_server

REPO = "acme/kernels"
TRACE = {"traceEvents": [{"name": "aten::softmax", "ph": "X", "ts": 1, "dur": 9}]}


def _results(tmp_path: Path, names: list[str]) -> Path:
    doc = json.loads(make_results(repository=REPO, seed=1).to_json())
    for c, name in zip(doc["configurations"], names, strict=False):
        c["profile"] = {
            "source": "torch.profiler",
            "time_basis": "cpu",
            "calls": 3,
            "total_ns": 1000.0,
            "trace": name,
        }
    path = tmp_path / "results.in.json"
    path.write_text(json.dumps(doc))
    return path


KEPT = "head-pytorch_eager-float32-bs1.json"


@dataclass(frozen=True)
class Gate:
    url: str
    ci: Token
    viewer: Token


@pytest.fixture(scope="module")
def gate(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gate]:
    """The real server on loopback (SQLite), with a CI and a viewer token."""
    root = tmp_path_factory.mktemp("gate")
    url = f"sqlite:///{root / 'gate.db'}"
    ci = create_token(url, repository=REPO, branches=("main",))
    viewer = create_token(url, viewer=True)
    live = start_server(url, root)
    try:
        yield Gate(live.url, ci, viewer)
    finally:
        live.stop()


def _checkout(
    gate: Gate, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, trace: str
) -> dict[str, str]:
    """A checkout whose kernalin.yml keeps traces and whose job kept KEPT with this text, made
    the working directory; the job's environment."""
    work = tmp_path / "checkout"
    (work / "rnx-traces").mkdir(parents=True)
    monkeypatch.chdir(work)
    (work / "kernalin.yml").write_text("version: 1\nharness:\n  keep-traces: true\n")
    (work / "rnx-traces" / KEPT).write_text(trace)
    return {"CI": "true", "KERNALIN_URL": gate.url, "KERNALIN_TOKEN": gate.ci.secret}


def test_the_kept_traces_reach_the_server_beside_the_run(
    gate: Gate, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    env = _checkout(gate, tmp_path, monkeypatch, json.dumps(TRACE))
    # The second configuration names a trace the job did not keep: nothing to send.
    results = _results(tmp_path, [KEPT, "head-pytorch_eager-float32-bs8.json"])
    argv = ["--from-results", str(results), "--repository", REPO, "--branch", "main"]
    assert main([*argv, "--sha", "a" * 40, "--results-dir", str(tmp_path / "out")], env=env) == 0
    log = capsys.readouterr().err
    assert "kept 1 profile trace(s) on the gate server" in log, log
    assert gate.ci.secret not in log
    (answer,) = (tmp_path / "out").glob("*.answer.json")
    run_id = json.loads(answer.read_text())["run_id"]
    r = httpx.get(
        f"{gate.url}/api/v1/runs/{run_id}/traces/{KEPT}",
        headers={"Authorization": f"Bearer {gate.viewer.secret}"},
    )
    assert r.status_code == 200 and r.json() == TRACE


def test_a_trace_the_server_refuses_is_a_warning_not_a_failure(
    gate: Gate, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    env = _checkout(gate, tmp_path, monkeypatch, '{"not": "a trace"}')
    argv = ["--from-results", str(_results(tmp_path, [KEPT])), "--repository", REPO]
    assert main([*argv, "--branch", "main", "--sha", "b" * 40], env=env) == 0
    out = capsys.readouterr()
    log = out.out + out.err
    assert f"did not keep a profile trace on the server: trace {KEPT}: 422" in log, log
