"""The run page's "What moved": a head that adds an operator and doubles its peak memory is
explained on the page it is read on (ranked changes with their bars, the memory line), names
shown as text; an answer stored without explanations, or with odd values, renders without."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
from starlette.testclient import TestClient

from gate_server.asgi import create_app
from gate_server.dashboard.explanations import explained
from gate_server.settings import ServerSettings
from testbed.factories import body, make_results
from testbed.gate_helpers import Token, create_token, signed_headers

HOSTILE = "aten::<script>alert(1)</script>"


def _profile(ops: dict[str, tuple[float, float]]) -> dict[str, Any]:
    """ops: name -> (calls, self ns per call), CPU time."""
    total = sum(ns for _, ns in ops.values())
    return {
        "source": "torch.profiler",
        "time_basis": "cpu",
        "calls": 5,
        "total_ns": total,
        "operators": [
            {"name": n, "calls": c, "self_ns": ns, "share": ns / total}
            for n, (c, ns) in ops.items()
        ],
    }


BASE_OPS = {"aten::addmm": (1.0, 400_000.0), "aten::relu": (1.0, 30_000.0)}


def _document(seed: int, ops: dict[str, tuple[float, float]], peak: int, **kw: Any) -> bytes:
    doc = json.loads(
        body(make_results(seed=seed, configs=(("pytorch_eager", "float32", 8),), **kw))
    )
    for cfg in doc["configurations"]:
        cfg["profile"] = _profile(ops)
        cfg["memory"] = {"device": "cpu", "peak_allocated_bytes": peak}
    return json.dumps(doc).encode()


@pytest.fixture
def client(database_url: str) -> Iterator[TestClient]:
    with TestClient(create_app(ServerSettings(database_url=database_url))) as c:
        yield c


def _upload(client: TestClient, token: Token, data: bytes) -> dict[str, Any]:
    r = client.post("/api/v1/runs", content=data, headers=signed_headers(token.secret, data))
    assert r.status_code in (200, 201), r.text
    answer: dict[str, Any] = r.json()
    return answer


def test_an_added_operator_and_a_doubled_peak_are_shown_where_the_verdict_is_read(
    client: TestClient, database_url: str
) -> None:
    ci = create_token(database_url, branches=("main",))
    _upload(client, ci, _document(1, BASE_OPS, 4 << 20))
    head_ops = {**BASE_OPS, HOSTILE: (1.0, 120_000.0)}
    answer = _upload(
        client,
        ci,
        _document(2, head_ops, 8 << 20, event="pull_request", pr_number=5, branch="feat"),
    )
    assert answer["tier"] in ("WARN", "BLOCK")
    viewer = create_token(database_url, viewer=True)
    page = client.get(
        f"/runs/{answer['run_id']}", headers={"Authorization": f"Bearer {viewer.secret}"}
    ).text
    section = page[page.index('aria-label="What moved"') :]
    assert "peak memory 4 MiB → 8 MiB (+100%)" in section
    assert "new operator aten::&lt;script&gt;alert(1)&lt;/script&gt;" in section
    assert "<script>alert" not in page
    assert 'class="bar-slower"' in section


def test_answers_without_explanations_or_with_odd_values_render_nothing_or_what_is_sound() -> None:
    assert explained([{"id": "a", "verdict": "equivalent"}]) == []
    odd = [
        "not a dict",
        {"id": "b", "verdict": "slower", "explanation": "nope", "memory": [1]},
        {
            "id": "c",
            "verdict": "slower",
            "explanation": [
                {"text": "+1 µs x", "delta_ns": float("nan")},
                {"text": "+2 µs y", "delta_ns": 2000.0, "kind": "kernel"},
                {"delta_ns": 5.0},
            ],
            "memory": {"base_bytes": "x", "tier": "WARN", "base_launches": 9, "head_launches": 14},
        },
    ]
    (found,) = explained(odd)
    assert [m.text for m in found.moved] == ["+2 µs y"]
    assert found.memory is None and found.launches == "kernel launches per call 9 → 14"
    assert found.memory_tier == "WARN"


def test_the_history_draws_peak_memory_beside_time(client: TestClient, database_url: str) -> None:
    ci = create_token(database_url, branches=("main",))
    for seed, peak in ((1, 4 << 20), (2, 4 << 20), (3, 6 << 20)):
        _upload(client, ci, _document(seed, BASE_OPS, peak))
    viewer = create_token(database_url, viewer=True)
    page = client.get(
        "/repos/acme/kernels", headers={"Authorization": f"Bearer {viewer.secret}"}
    ).text
    assert "Peak memory per commit" in page
    chart = page[page.index('class="chart memory-history"') :]
    chart = chart[: chart.index("</svg>")]
    drawn = [int(b) for b in re.findall(r'data-bytes="(\d+)"', chart)]
    assert drawn == [4 << 20, 4 << 20, 6 << 20]  # oldest first, as the time chart
    assert "peak memory 6 MiB" in chart


def test_a_history_without_memory_draws_no_memory_chart(
    client: TestClient, database_url: str
) -> None:
    ci = create_token(database_url, branches=("main",))
    _upload(client, ci, body(make_results(seed=1, configs=(("pytorch_eager", "float32", 8),))))
    viewer = create_token(database_url, viewer=True)
    page = client.get(
        "/repos/acme/kernels", headers={"Authorization": f"Bearer {viewer.secret}"}
    ).text
    assert 'class="chart history"' in page and "Peak memory per commit" not in page
