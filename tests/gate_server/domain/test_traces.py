"""Kept profile traces (gate_server/domain/traces.py): the run's CI token keeps the traces its
document names, as gzip JSON; whoever may see the run downloads them, from the API and from
the run page; anything else is refused with what to do, never a 5xx."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator

import pytest
from starlette.testclient import TestClient

from gate_server.asgi import create_app
from gate_server.settings import ServerSettings
from testbed.factories import body, make_results
from testbed.gate_helpers import Token, create_token, signed_headers

NAME = "head-pytorch_eager-float32-bs8.json"
TRACE = {"traceEvents": [{"name": "aten::addmm", "ph": "X", "ts": 1, "dur": 5}]}


@pytest.fixture
def client(database_url: str) -> Iterator[TestClient]:
    with TestClient(create_app(ServerSettings(database_url=database_url))) as c:
        yield c


def _run(client: TestClient, token: Token) -> str:
    doc = json.loads(body(make_results(seed=1, configs=(("pytorch_eager", "float32", 8),))))
    doc["configurations"][0]["profile"] = {
        "source": "torch.profiler",
        "time_basis": "cpu",
        "calls": 3,
        "total_ns": 1000.0,
        "trace": NAME,
    }
    data = json.dumps(doc).encode()
    r = client.post("/api/v1/runs", content=data, headers=signed_headers(token.secret, data))
    assert r.status_code == 201, r.text
    return str(r.json()["run_id"])


def _put(client: TestClient, token: Token, run_id: str, data: bytes, name: str = NAME):
    headers = {**signed_headers(token.secret, data), "Content-Type": "application/octet-stream"}
    return client.put(f"/api/v1/runs/{run_id}/traces/{name}", content=data, headers=headers)


def test_a_kept_trace_is_stored_once_and_downloaded_where_the_run_is_read(
    client: TestClient, database_url: str
) -> None:
    ci = create_token(database_url, branches=("main",))
    run_id = _run(client, ci)
    gz = gzip.compress(json.dumps(TRACE).encode())
    first = _put(client, ci, run_id, gz)
    assert first.status_code == 201 and first.json() == {
        "run_id": run_id,
        "name": NAME,
        "bytes": len(gz),
        "stored": True,
    }
    again = _put(client, ci, run_id, gz)
    assert again.status_code == 200 and again.json()["stored"] is False
    other = _put(client, ci, run_id, gzip.compress(b'{"traceEvents": []}'))
    assert other.status_code == 409 and other.json()["error"]["code"] == "trace_exists"

    viewer = create_token(database_url, viewer=True)
    auth = {"Authorization": f"Bearer {viewer.secret}"}
    api = client.get(f"/api/v1/runs/{run_id}/traces/{NAME}", headers=auth)
    assert api.status_code == 200 and api.headers["content-encoding"] == "gzip"
    assert api.json() == TRACE  # the client inflates it: the JSON Perfetto opens
    assert f'filename="{NAME}"' in api.headers["content-disposition"]

    page = client.get(f"/runs/{run_id}", headers=auth).text
    assert 'aria-label="Kept traces"' in page and f"/runs/{run_id}/traces/{NAME}" in page
    download = client.get(f"/runs/{run_id}/traces/{NAME}", headers=auth)
    assert download.status_code == 200 and download.json() == TRACE
    # Another workspace sees neither the trace nor that it exists.
    stranger = create_token(database_url, workspace="other", viewer=True)
    elsewhere = {"Authorization": f"Bearer {stranger.secret}"}
    assert client.get(f"/api/v1/runs/{run_id}/traces/{NAME}", headers=elsewhere).status_code == 404
    assert client.get(f"/runs/{run_id}/traces/{NAME}", headers=elsewhere).status_code == 404


def test_what_is_not_a_kept_trace_of_the_run_is_refused_with_what_to_do(
    client: TestClient, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    ci = create_token(database_url, branches=("main",))
    run_id = _run(client, ci)
    gz = gzip.compress(json.dumps(TRACE).encode())
    refusals = {
        "not named": (_put(client, ci, run_id, gz, "other.json"), 404, "trace_not_named"),
        "not gzip": (_put(client, ci, run_id, json.dumps(TRACE).encode()), 422, "invalid_trace"),
        "not JSON": (_put(client, ci, run_id, gzip.compress(b"\xff\x00")), 422, "invalid_trace"),
        "not a trace": (_put(client, ci, run_id, gzip.compress(b'{"a": 1}')), 422, "invalid_trace"),
        "no such run": (
            _put(client, ci, "00000000-0000-0000-0000-000000000000", gz),
            404,
            "run_not_found",
        ),
        "not a run id": (_put(client, ci, "nope", gz), 404, "run_not_found"),
    }
    for why, (r, status, code) in refusals.items():
        assert (r.status_code, r.json()["error"]["code"]) == (status, code), (why, r.text)
        assert r.json()["error"]["message"], why
    # A body that inflates past the bound (a gzip bomb) stops there: the bound made small.
    monkeypatch.setattr("gate_server.domain.traces.MAX_TRACE_JSON_BYTES", 64)
    bomb = _put(client, ci, run_id, gzip.compress(b" " * 10_000 + json.dumps(TRACE).encode()))
    assert (bomb.status_code, bomb.json()["error"]["code"]) == (413, "trace_too_large")
    monkeypatch.undo()
    viewer = create_token(database_url, viewer=True)
    assert _put(client, viewer, run_id, gz).status_code == 403
    unsigned = client.put(
        f"/api/v1/runs/{run_id}/traces/{NAME}",
        content=gz,
        headers={"Authorization": f"Bearer {ci.secret}"},
    )
    assert unsigned.status_code == 401
    # Nothing refused was kept.
    auth = {"Authorization": f"Bearer {viewer.secret}"}
    assert client.get(f"/api/v1/runs/{run_id}/traces/{NAME}", headers=auth).status_code == 404
    assert 'aria-label="Kept traces"' not in client.get(f"/runs/{run_id}", headers=auth).text
