"""A pull request's runs are listed from their records: no document is read for the list."""

from __future__ import annotations

import gc
import tracemalloc
from typing import Any

from starlette.testclient import TestClient

from gate_server.asgi import create_app
from gate_server.db import tokens
from gate_server.http.pull_requests import pull_runs
from gate_server.settings import ServerSettings
from testbed.factories import body, make_results

CONFIGS = [
    (r, d, b)
    for r in ("pytorch_eager", "onnxruntime")
    for d in ("float32", "float16", "bfloat16", "float64")
    for b in (1, 8, 32)
]


def test_listing_a_pull_requests_runs_reads_no_document(
    database_url: str, ci_token: Any, sign: Any
) -> None:
    # Up to 100 runs of 16 MiB each were read whole to list a pull request's runs (1.6 GB for
    # one request); the list needs only the runs' records.
    settings = ServerSettings(database_url=database_url, detect_changes=False)
    token = ci_token()
    with TestClient(create_app(settings)) as client:
        stored = []
        for seed in (1, 2, 3):
            doc = make_results(
                seed=seed,
                configs=CONFIGS,
                n=6000,
                processes=6,
                event="pull_request",
                pr_number=7,
                base_branch="main",
                branch="feature",
                sha=f"{seed:040x}",
                workload=f"kernels/k{seed}.py",
            )
            stored.append(body(doc))
            r = client.post(
                "/api/v1/runs", content=stored[-1], headers=sign(token.secret, stored[-1])
            )
            assert r.status_code == 201, r.text
        svc = client.app.state.services  # type: ignore[attr-defined]
        with svc.database.read() as conn:
            record = tokens.by_id(conn, token.id)
        assert record is not None and record.repository_id is not None
        gc.collect()
        tracemalloc.start()
        try:
            found = pull_runs(svc.database, record.repository_id, 7, None)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert [r.workload for r in found] == ["kernels/k3.py"]  # the newest commit's runs
        smallest = min(map(len, stored))
        assert peak < smallest / 4, f"listing took {peak} bytes; one document is {smallest}"
        listed = client.get(
            "/api/v1/pulls/7/runs", headers={"Authorization": f"Bearer {token.secret}"}
        )
        assert listed.status_code == 200 and len(listed.json()["runs"]) == 1
