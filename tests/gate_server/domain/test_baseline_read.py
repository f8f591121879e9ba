"""GET /api/v1/baselines (adaptive sampling) on SQLite and PostgreSQL: a CI job reads exactly
the baseline runs its upload would be re-gated with, for its repository only."""

from __future__ import annotations

import gc
import hashlib
import json
import tracemalloc
from typing import Any

from starlette.testclient import TestClient

from gate_server.asgi import create_app
from gate_server.db import tokens
from gate_server.domain.baseline_reads import read_baseline
from gate_server.settings import ServerSettings
from testbed.factories import body, make_results
from testbed.gate_helpers import Token

URL = "/api/v1/baselines"
ENV = "linux-x86_64-cpu-test"
WORKLOAD = "kernels/attention.py"


def _upload(client: TestClient, token: Token, sign: Any, **doc: Any) -> dict[str, Any]:
    data = body(make_results(**doc))
    r = client.post("/api/v1/runs", content=data, headers=sign(token.secret, data))
    assert r.status_code == 201, r.text
    answer: dict[str, Any] = r.json()
    return answer


def _read(client: TestClient, token: Token, **params: str) -> Any:
    query = {"branch": "main", "environment": ENV, "workload": WORKLOAD} | params
    return client.get(URL, params=query, headers={"Authorization": f"Bearer {token.secret}"})


def test_a_pull_request_reads_what_its_upload_is_compared_with(
    client: TestClient, ci_token: Any, sign: Any
) -> None:
    token = ci_token()
    empty = _read(client, token)
    assert empty.status_code == 200, empty.text
    assert empty.json()["run_ids"] == [] and empty.json()["documents"] == []

    pushed = [_upload(client, token, sign, seed=s)["run_id"] for s in (1, 2)]
    _upload(client, token, sign, seed=3, environment="other-machine")
    found = _read(client, token, workload="./kernels//attention.py").json()
    assert found["run_ids"] == pushed[::-1]  # newest first, this environment only
    assert found["workload"] == WORKLOAD and found["branch"] == "main"
    assert [d["run_id"] for d in found["documents"]] == pushed[::-1]
    assert found["documents"][0]["configurations"][0]["samples"]["ns"]
    # The server's thresholds, which its re-gating uses (the server's settings, not a client's).
    assert found["gate"] == {"block_threshold": 0.25, "rope": 0.02, "probability": 0.95}

    # The upload of a pull request is compared with exactly these runs.
    answer = _upload(
        client,
        token,
        sign,
        seed=4,
        event="pull_request",
        pr_number=7,
        branch="f",
        base_branch="main",
    )
    assert answer["baseline"]["run_ids"] == found["run_ids"]


def test_refusals_are_clear_4xx_answers(
    client: TestClient, ci_token: Any, viewer_token: Any
) -> None:
    token = ci_token()
    missing = client.get(
        URL, params={"branch": "main"}, headers={"Authorization": f"Bearer {token.secret}"}
    )
    assert missing.status_code == 422
    assert {d["field"] for d in missing.json()["error"]["details"]} == {"environment", "workload"}
    assert _read(client, token, workload="../etc/passwd").status_code == 422
    assert _read(client, token, branch="x" * 2000).status_code == 422
    other = _read(client, token, repository="someone/else")
    assert other.status_code == 403 and other.json()["error"]["code"] == "repository_out_of_scope"
    assert _read(client, viewer_token()).status_code == 403
    assert client.get(URL, params={"branch": "main"}).status_code == 401


def test_the_endpoint_is_in_the_openapi_document(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    op = spec["paths"]["/api/v1/baselines"]["get"]
    assert {p["name"] for p in op["parameters"] if p.get("required")} == {
        "branch",
        "environment",
        "workload",
    }
    assert "Baseline" in spec["components"]["schemas"]


def test_large_baselines_are_sent_as_stored_not_parsed_in_memory(
    database_url: str, ci_token: Any, sign: Any
) -> None:
    # Three baseline documents of 1.6 MB: parsed into Python objects and dumped again (as the
    # answer once was) they took about ten times their size at once; sent as the stored bytes,
    # one at a time, the server holds one document (the client here keeps only a digest).
    # No change detection: its worker thread's memory would count in the peak measured here.
    settings = ServerSettings(database_url=database_url, detect_changes=False)
    with TestClient(create_app(settings)) as client:
        _read_large_baselines(client, ci_token(), sign)


def _read_large_baselines(client: TestClient, token: Token, sign: Any) -> None:
    configs = [
        (r, d, b)
        for r in ("pytorch_eager", "onnxruntime")
        for d in ("float32", "float16", "bfloat16", "float64")
        for b in (1, 8, 32)
    ]
    stored = [body(make_results(seed=s, configs=configs, n=6000, processes=6)) for s in (1, 2, 3)]
    for data in stored:
        r = client.post("/api/v1/runs", content=data, headers=sign(token.secret, data))
        assert r.status_code == 201, r.text
    # The server's side alone (the test client gathers a whole answer before handing it over).
    svc = client.app.state.services  # type: ignore[attr-defined]
    query = {"branch": "main", "environment": ENV, "workload": WORKLOAD}
    with svc.database.read() as conn:
        record = tokens.by_id(conn, token.id)
    assert record is not None
    digest = hashlib.sha256()
    gc.collect()
    tracemalloc.start()
    try:
        answer = read_baseline(svc.database, record, query, history=5, gate=svc.settings.gate)
        for chunk in answer.chunks(svc.database):
            digest.update(chunk)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    total = sum(map(len, stored))
    assert peak < 1.5 * total, f"reading {total} bytes of baselines took {peak} bytes at its peak"
    whole = _read(client, token)
    assert hashlib.sha256(whole.content).digest() == digest.digest()
    assert [d["run_id"] for d in whole.json()["documents"]] == [
        json.loads(d)["run_id"] for d in stored[::-1]
    ]
