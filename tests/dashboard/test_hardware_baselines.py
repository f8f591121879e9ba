"""/hardware compares each environment's newest baseline that the baseline branch ran itself,
never a pull request's run someone accepted later; it exports Markdown (the same text as
`rnx compare-hardware --markdown`) and names its currency. The real server on loopback, SQLite
and PostgreSQL."""

from __future__ import annotations

import httpx

from rnx.hardware import compare_hardware, to_markdown
from rnx.schema import ResultsDocument
from testbed.factories import body, make_results
from testbed.gate_helpers import LiveServer, Token, create_token, signed_headers

WORKLOAD = "kernels/attention.py"
CONFIGS = (("pytorch_eager", "float32", 1), ("pytorch_eager", "float32", 8))


def _upload(client: httpx.Client, ci: Token, doc: ResultsDocument) -> str:
    data = body(doc)
    answer = client.post("/api/v1/runs", content=data, headers=signed_headers(ci.secret, data))
    assert answer.status_code == 201, answer.text
    return str(doc.run_id)


def test_the_newest_branch_baseline_not_an_accepted_pr_run(
    shared_server: LiveServer, workspace: str
) -> None:
    live_server = shared_server
    ci = create_token(live_server.database_url, workspace=workspace)
    base = {"configs": CONFIGS, "workload": WORKLOAD}
    cpu = make_results(environment="env-cpu", seed=1, **base)  # type: ignore[arg-type]
    pushes = [
        make_results(environment="env-gpu", seed=10 + i, slowdown=0.5, **base)  # type: ignore[arg-type]
        for i in range(3)
    ]
    pr = make_results(
        environment="env-gpu",
        seed=20,
        slowdown=1.6,
        branch="feature/x",
        pr_number=4,
        **base,  # type: ignore[arg-type]
    )
    with httpx.Client(base_url=live_server.url, timeout=60) as client:
        _upload(client, ci, cpu)
        _upload(client, ci, pushes[0])
        pr_id = _upload(client, ci, pr)
        for doc in pushes[1:]:
            _upload(client, ci, doc)
        accepted = client.post(
            f"/api/v1/runs/{pr_id}/accept",
            json={"reason": "slower tiles, for now"},
            headers={"Authorization": f"Bearer {ci.secret}"},
        )
        assert accepted.status_code == 200, accepted.text
        # The accepted PR run is now the environment's newest baseline (it gates uploads)...
        listed = client.get(
            "/api/v1/baselines",
            params={
                "repository": "acme/kernels",
                "branch": "main",
                "environment": "env-gpu",
                "workload": WORKLOAD,
            },
            headers={"Authorization": f"Bearer {ci.secret}"},
        )
        assert listed.status_code == 200 and listed.json()["run_ids"][0] == pr_id

        # ...but /hardware compares what main ran: the newest push.
        viewer = create_token(live_server.database_url, workspace=workspace, viewer=True)
        auth = {"Authorization": f"Bearer {viewer.secret}"}
        query = f"?repo=acme/kernels&branch=main&workload={WORKLOAD}&env=env-cpu&env=env-gpu"
        page = client.get("/hardware" + query, headers=auth)
        assert page.status_code == 200, page.text[-2000:]
        assert f"/runs/{pushes[-1].run_id}" in page.text and pr_id not in page.text
        assert "Cost / 1M items (USD)" in page.text and "/hardware.md?" in page.text

        export = client.get("/hardware.md" + query, headers=auth)
        assert export.status_code == 200
        assert export.headers["content-type"].startswith("text/markdown")
        assert 'filename="hardware-attention.md"' in export.headers["content-disposition"]
        assert export.text == to_markdown(compare_hardware([cpu, pushes[-1]]))
        # A second viewer's reload is the same table, from the kept comparison.
        assert client.get("/hardware.md" + query, headers=auth).text == export.text
