"""Signed uploads of randomly broken documents: always a 4xx in the one error shape, or a
stored run; never a 5xx. Signed, so the junk reaches the parser and the validator."""

from __future__ import annotations

import json
import uuid
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient

from gate_server.asgi import create_app
from gate_server.settings import ServerSettings
from testbed.factories import body, make_results
from testbed.gate_helpers import create_token, signed_headers

JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=8,
)
ONE_CONFIG = [("pytorch_eager", "float32", 1)]
VALID: dict[str, Any] = json.loads(
    body(make_results(configs=ONE_CONFIG, event="pull_request", pr_number=3, branch="f"))
)


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(node, dict):
        for k, v in node.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(node, list):
        for i, v in enumerate(node[:2]):
            out += _paths(v, (*prefix, i))
    return out


PATHS = _paths(VALID)[1:]


def _replace(doc: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    head, rest = path[0], path[1:]
    if isinstance(doc, dict):
        return {**doc, head: _replace(doc[head], rest, value)}
    copy = list(doc)
    copy[head] = _replace(doc[head], rest, value)
    return copy


def test_signed_junk_never_gets_a_5xx(tmp_path):
    url = f"sqlite:///{tmp_path / 'fuzz.db'}"
    token = create_token(url)
    with TestClient(create_app(ServerSettings(database_url=url))) as client:
        # A baseline, so that documents which pass validation are really gated by stats.
        base = body(make_results(configs=ONE_CONFIG))
        assert (
            client.post(
                "/api/v1/runs", content=base, headers=signed_headers(token.secret, base)
            ).status_code
            == 201
        )

        @settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
        @given(path=st.sampled_from(PATHS), value=JSON, drop=st.booleans())
        def check(path: tuple[Any, ...], value: Any, drop: bool) -> None:
            fresh = {**VALID, "run_id": str(uuid.uuid4())}  # else most would be 409s
            doc = _replace(fresh, path, value)
            if drop and isinstance(value, dict) and path[:-1]:
                doc = _replace(fresh, path[:-1], {})
            data = json.dumps(doc).encode()
            r = client.post(
                "/api/v1/runs", content=data, headers=signed_headers(token.secret, data)
            )
            assert r.status_code < 500, r.text
            if r.status_code >= 400:
                assert set(r.json()) == {"error"} and r.json()["error"]["message"]
            else:
                assert r.status_code == 201
                outcomes.add(r.json()["tier"])

        outcomes: set[str] = set()
        check()
        assert outcomes  # some mutated documents were valid and went through the gate
