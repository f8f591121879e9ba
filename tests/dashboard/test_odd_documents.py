"""Every page draws every document the schema stores: free-form `hardware`, and optional parts
left out (`tool`, a correctness record's errors). Once stored, none may break a page."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from starlette.testclient import TestClient

from gate_server.asgi import create_app
from gate_server.settings import ServerSettings
from testbed.factories import make_results
from testbed.gate_helpers import Token, signed_headers


def _gpus(value: Any) -> Callable[[dict[str, Any]], None]:
    def change(doc: dict[str, Any]) -> None:
        doc["environment"]["hardware"]["gpus"] = value

    return change


def _no_tool(doc: dict[str, Any]) -> None:
    doc.pop("tool", None)


def _no_errors(doc: dict[str, Any]) -> None:
    for config in doc["configurations"]:
        for field in ("max_abs_error", "max_rel_error"):
            (config.get("correctness") or {}).pop(field, None)


ODD = {
    "gpus is an integer": _gpus(3),
    "gpus is a boolean": _gpus(True),
    "gpus is a string": _gpus("H200"),
    "gpus holds numbers": _gpus([1, 2]),
    "no tool": _no_tool,
    "correctness without errors": _no_errors,
}
WORKLOAD = "kernels/attention.py"
PAGES = (
    "/",
    "/repos/acme/kernels",
    f"/hardware?repo=acme/kernels&workload={WORKLOAD}",
    f"/hardware.csv?repo=acme/kernels&workload={WORKLOAD}",
)


@pytest.fixture
def web(server_settings: ServerSettings) -> Iterator[TestClient]:
    with TestClient(create_app(server_settings), raise_server_exceptions=False) as c:
        yield c


@pytest.mark.parametrize("odd", list(ODD))
def test_an_odd_but_valid_document_never_breaks_a_page(
    web: TestClient,
    ci_token: Callable[..., Token],
    viewer_token: Callable[..., Token],
    odd: str,
) -> None:
    ci, viewer = ci_token().secret, viewer_token().secret
    doc = json.loads(make_results(n=12, seed=3).to_json())
    ODD[odd](doc)
    doc["run_id"] = str(uuid.uuid4())
    data = json.dumps(doc).encode()
    stored = web.post("/api/v1/runs", content=data, headers=signed_headers(ci, data))
    assert stored.status_code == 201, stored.text
    headers = {"Authorization": f"Bearer {viewer}"}
    run_page = web.get(f"/runs/{doc['run_id']}", headers=headers)
    assert run_page.status_code == 200, (odd, run_page.text[-300:])
    for page in PAGES:
        # /hardware.csv with one environment is a 400 naming what to pick: never a 5xx.
        answer = web.get(page, headers=headers)
        assert answer.status_code in (200, 400), (odd, page, answer.status_code)
