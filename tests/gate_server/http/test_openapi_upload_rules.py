"""The upload rules /openapi.json states (gate_server/http/openapi.py's _state_upload_rules) are the
server's: each document that breaks one is refused 422 by POST /api/v1/runs and fails the
documented ResultsDocument schema, and a valid document passes both."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import jsonschema_rs
import pytest
from starlette.testclient import TestClient

from testbed.factories import body, make_results
from testbed.gate_helpers import Token, signed_headers


def _config(doc: dict[str, Any]) -> dict[str, Any]:
    return doc["configurations"][0]


def _broken_without_reason(doc: dict[str, Any]) -> None:
    _config(doc)["status"], _config(doc)["reason"] = "diverged", None


def _pull_request_without_base(doc: dict[str, Any]) -> None:
    doc["git"]["event"] = "pull_request"


def _numbered_pull_request_without_base(doc: dict[str, Any]) -> None:
    doc["git"]["pr_number"] = 7


def _base_samples_when_single(doc: dict[str, Any]) -> None:
    _config(doc)["base_samples"] = _config(doc)["samples"]


def _control_character_in_path(doc: dict[str, Any]) -> None:
    doc["workload"]["path"] = "kernels/att\x7fention.py"


def _no_schema_version(doc: dict[str, Any]) -> None:
    del doc["schema_version"]


BREAKS: list[Callable[[dict[str, Any]], None]] = [
    _broken_without_reason,
    _pull_request_without_base,
    _numbered_pull_request_without_base,
    _base_samples_when_single,
    _control_character_in_path,
    _no_schema_version,
]


def _validator(client: TestClient) -> Any:
    components = client.get("/openapi.json").json()["components"]
    schema = {"$ref": "#/components/schemas/ResultsDocument", "components": components}
    return jsonschema_rs.Draft202012Validator(schema)


def _upload(client: TestClient, token: Token, doc: dict[str, Any]) -> int:
    data = json.dumps(doc).encode()
    r = client.post("/api/v1/runs", content=data, headers=signed_headers(token.secret, data))
    return r.status_code


def _valid() -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(body(make_results()))
    return doc


def test_a_valid_document_meets_the_documented_schema(
    client: TestClient, ci_token: Callable[..., Token]
) -> None:
    doc = _valid()
    assert _validator(client).is_valid(doc)
    assert _upload(client, ci_token(), doc) == 201


@pytest.mark.parametrize("breaks", BREAKS, ids=lambda f: f.__name__.strip("_"))
def test_a_rule_the_schema_states_is_one_the_server_checks(
    client: TestClient, ci_token: Callable[..., Token], breaks: Callable[[dict[str, Any]], None]
) -> None:
    doc = _valid()
    breaks(doc)
    assert not _validator(client).is_valid(doc)
    assert _upload(client, ci_token(), doc) == 422


def test_not_blank_is_what_the_handlers_take() -> None:
    """NOT_BLANK (required query parameters, GitHub headers) matches exactly the text with no
    NUL character that str.strip() leaves non-empty, character by character."""
    import re
    import sys

    from gate_server.http.openapi import NO_NUL, NOT_BLANK

    not_blank, no_nul = re.compile(NOT_BLANK), re.compile(NO_NUL)
    for c in map(chr, range(sys.maxunicode + 1)):
        assert bool(not_blank.search(f" {c} ")) == (c != "\x00" and not c.isspace()), repr(c)
    assert not not_blank.search("main\x00") and not no_nul.search("a\x00b")
    assert no_nul.search("") and not not_blank.search("")


@pytest.mark.parametrize(
    "reason",
    [
        "ok",
        " padded\t",
        "two\nlines",
        "",
        " \t",
        "\x0b margin \x1c",
        "in\x0bside",
        "nul\x00",
        "a" * 2000,
        " " + "a" * 2000 + " ",
        "a" * 2001,
    ],
)
def test_the_accept_reason_pattern_is_check_reason(reason: str) -> None:
    """ACCEPT_REASON (both accept bodies) takes exactly what gate_server/domain/accepts.py takes."""
    from gate_server.domain.accepts import check_reason
    from gate_server.errors import InvalidInput
    from gate_server.http.openapi import ACCEPT_REASON

    try:
        check_reason(reason)
        taken = True
    except InvalidInput:
        taken = False
    assert jsonschema_rs.Draft202012Validator(ACCEPT_REASON).is_valid(reason) == taken
