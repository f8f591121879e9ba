"""Hostile input: fuzzed results documents and kernalin.yml files, and malicious uploads.

The parsers may only ever answer with a parsed value or their own clear error (InvalidDocument,
ConfigError); the server may only answer 4xx with the one error shape, store nothing, and render
whatever it did store as text, never as markup.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient

from gate_server.asgi import create_app
from gate_server.db import Database, runs
from gate_server.settings import ServerSettings
from rnx.config import ConfigError, KernalinConfig, load_config, parse_config
from rnx.schema import InvalidDocument, ResultsDocument, parse_results
from testbed.factories import body, make_results
from testbed.gate_helpers import create_token, signed_headers, webhook_headers

FUZZ = settings(
    max_examples=150, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)
# Strings that have broken parsers and templates elsewhere: traversal, injection, markup,
# bidirectional overrides, NUL, lone surrogates' neighbours, very long text.
NASTY = [
    "../../../etc/passwd",
    "..\\..\\windows\\system32",
    "%2e%2e%2f%2e%2e%2fetc",
    "/etc/passwd",
    "main/../../x",
    "x'; DROP TABLE runs; --",
    '" OR 1=1 --',
    "<script>alert(1)</script>",
    "{{7*7}}",
    "${jndi:ldap://x}",
    "\u202egnp.exe",
    "\x00",
    "ｍａｉｎ",
    "🔥" * 50,
    "a" * 5000,
]
JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=30)
    | st.sampled_from(NASTY),
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=12), children, max_size=5)
    ),
    max_leaves=30,
)
VALID = json.loads(body(make_results(configs=[("pytorch_eager", "float32", 1)], n=8)))


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield prefix
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _paths(v, (*prefix, i))


PATHS = [p for p in _paths(VALID) if p]


def _replace(doc: Any, path: tuple[Any, ...], value: Any) -> Any:
    doc = json.loads(json.dumps(doc))
    target = doc
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return doc


@FUZZ
@given(JSON)
def test_parse_results_of_any_json_is_a_document_or_a_clear_error(value: Any) -> None:
    for data in (value, json.dumps(value)):
        try:
            assert isinstance(parse_results(data), ResultsDocument)
        except InvalidDocument as e:
            assert str(e)


@FUZZ
@given(st.sampled_from(PATHS), JSON)
def test_a_valid_document_with_one_field_replaced_is_a_document_or_a_clear_error(
    path: tuple[Any, ...], value: Any
) -> None:
    try:
        parse_results(json.dumps(_replace(VALID, path, value)))
    except InvalidDocument as e:
        assert str(e)


@FUZZ
@given(st.binary(max_size=300))
def test_parse_results_of_any_bytes_is_a_clear_error(data: bytes) -> None:
    with pytest.raises(InvalidDocument):
        parse_results(data)


CONFIG_KEYS = st.sampled_from(
    ["version", "gate", "harness", "benchmarks", "mode", "rope", "block-threshold", "workload"]
)
CONFIG = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(CONFIG_KEYS | st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=25,
)


@FUZZ
@given(st.dictionaries(CONFIG_KEYS, CONFIG, max_size=4))
def test_parse_config_of_any_mapping_is_a_config_or_a_clear_error(data: dict[str, Any]) -> None:
    try:
        assert isinstance(parse_config(data), KernalinConfig)
    except ConfigError as e:
        assert str(e).startswith("kernalin.yml")


@settings(  # too_slow: generating examples on a loaded machine is slow, never wrong
    max_examples=150, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)
@given(st.binary(max_size=200) | st.text(max_size=200).map(str.encode))
def test_load_config_of_any_file_is_a_config_or_a_clear_error(
    tmp_path_factory, data: bytes
) -> None:
    path = tmp_path_factory.mktemp("cfg") / "kernalin.yml"
    path.write_bytes(data)
    try:
        load_config(path)
    except ConfigError as e:
        assert str(path) in str(e)


def _alias_bomb(levels: int) -> str:
    lines = ["x-bomb:", "  a: &a [x,x,x,x,x,x,x,x,x,x]"]
    for i in range(1, levels + 1):
        prev = "a" if i == 1 else f"l{i - 1}"
        lines.append(f"  l{i}: &l{i} [" + ",".join([f"*{prev}"] * 10) + "]")
    return "\n".join(lines) + f"\ngate:\n  mode: *l{levels}\n"


@pytest.mark.parametrize(
    "name, data, says",
    [
        ("not UTF-8", b"version: 1\ngate: {mode: \xff\xfe}\n", "is not UTF-8"),
        ("nested 5000 deep", b"x: " + b"[" * 5000 + b"]" * 5000, "nests too deeply"),
        ("alias bomb, 10**9 leaves", _alias_bomb(8).encode(), "gate.mode"),
        ("python tag", b"!!python/object/apply:os.system ['true']", "not valid YAML"),
    ],
)
@pytest.mark.timeout(60)  # a hang guard, not a speed claim: the alias bomb once ran for ever
def test_hostile_kernalin_yml_is_a_quick_clear_error(
    tmp_path: Path, name: str, data: bytes, says: str
) -> None:
    """Regressions: each of these used to escape as a traceback or run for ever."""
    path = tmp_path / "kernalin.yml"
    path.write_bytes(data)
    with pytest.raises(ConfigError, match=says) as e:
        load_config(path)
    assert len(str(e.value)) < 2000


# ---- the server


@pytest.fixture
def small_limits(database_url: str) -> Iterator[tuple[TestClient, str]]:
    settings_ = ServerSettings(
        database_url=database_url, public_url="http://gate.test", max_body_bytes=200_000
    )
    with TestClient(create_app(settings_)) as c:
        yield c, create_token(database_url).secret


def _doc(**changes: Any) -> dict[str, Any]:
    doc = json.loads(body(make_results()))
    for dotted, value in changes.items():
        target = doc
        keys = dotted.split(".")
        for k in keys[:-1]:
            target = target[int(k)] if isinstance(target, list) else target[k]
        target[keys[-1]] = value
    return doc


HOSTILE_BODIES: dict[str, bytes] = {
    "over the size limit": b'{"a": "' + b"x" * 300_000 + b'"}',
    "nested 100000 deep": b"[" * 100_000 + b"]" * 100_000,
    "objects nested 50000 deep": b'{"a":' * 50_000 + b"1" + b"}" * 50_000,
    "not JSON": b"\x00\xff\xfe garbage",
    "a JSON string": b'"hello"',
    "a JSON array": b"[1, 2, 3]",
    "Latin-1, not UTF-8": json.dumps(_doc(**{"environment.name": "é"}), ensure_ascii=False).encode(
        "latin-1"
    ),
    "NaN sample": json.dumps(_doc()).replace('"ns": [', '"ns": [NaN, ', 1).encode(),
    "Infinity sample": json.dumps(_doc()).replace('"ns": [', '"ns": [Infinity, ', 1).encode(),
    "negative sample": json.dumps(_doc()).replace('"ns": [', '"ns": [-5, ', 1).encode(),
    "float sample": json.dumps(_doc()).replace('"ns": [', '"ns": [1.5, ', 1).encode(),
    "huge integer sample": json.dumps(_doc())
    .replace('"ns": [', '"ns": [' + "9" * 5000 + ", ", 1)
    .encode(),
    "samples as a string": json.dumps(_doc(**{"configurations.0.samples.ns": "1,2,3"})).encode(),
    "schema_version 2": json.dumps(_doc(schema_version=2)).encode(),
    "schema_version '1'": json.dumps(_doc(schema_version="1")).encode(),
    "unknown field": json.dumps({**_doc(), "tier": "PASS"}).encode(),
    "repository traversal": json.dumps(_doc(repository="../../etc/passwd")).encode(),
    "repository with a slash too many": json.dumps(_doc(repository="acme/kernels/../x")).encode(),
    "branch traversal": json.dumps(_doc(**{"git.branch": "main/../../x"})).encode(),
    "branch with a NUL": json.dumps(_doc(**{"git.branch": "ma\x00in"})).encode(),
    "branch with a newline": json.dumps(_doc(**{"git.branch": "main\nX-Injected: 1"})).encode(),
    "branch too long": json.dumps(_doc(**{"git.branch": "b" * 300})).encode(),
    "workload path with a newline": json.dumps(_doc(**{"workload.path": "a\nb"})).encode(),
    "environment key traversal": json.dumps(_doc(**{"environment.key": "../x"})).encode(),
    "sha with SQL": json.dumps(_doc(**{"git.sha": "abc' OR '1'='1"})).encode(),
    "run_id not a UUID": json.dumps(_doc(run_id="../../x")).encode(),
    "49 configurations": json.dumps(
        _doc(configurations=[_doc()["configurations"][0]] * 49)
    ).encode(),
}


@pytest.mark.parametrize("name", list(HOSTILE_BODIES))
def test_hostile_upload_is_a_4xx_in_the_error_shape_and_stores_nothing(
    small_limits: tuple[TestClient, str], database_url: str, name: str
) -> None:
    client, secret = small_limits
    raw = HOSTILE_BODIES[name]
    r = client.post("/api/v1/runs", content=raw, headers=signed_headers(secret, raw))
    assert 400 <= r.status_code < 500, (name, r.status_code, r.text[:300])
    error = r.json()["error"]
    assert error["code"] and error["message"], r.text[:300]
    storage = Database(database_url)
    try:
        with storage.read() as conn:
            assert runs.count(conn) == 0
    finally:
        storage.close()


def test_nasty_but_valid_names_are_stored_verbatim_and_rendered_as_text(
    client: TestClient, database_url: str
) -> None:
    """Git allows quotes and semicolons in branch names and anything printable in workload
    paths (a path in the repository: no '..' segment): such a run is stored as sent, found
    again by its name, and shown escaped."""
    secret = create_token(database_url, branches=("*",)).secret
    viewer = create_token(database_url, viewer=True).secret
    branch = "x';DROP-TABLE-runs;--"
    doc = _doc(**{"git.branch": branch})
    doc["workload"]["path"] = "<img src=x onerror=alert(1)>/..etc/passwd"
    doc["environment"]["name"] = "<script>alert(1)</script>\u202e"
    doc["configurations"][0]["details"] = {"note": "</td><script>alert(2)</script>"}
    raw = json.dumps(doc).encode()
    r = client.post("/api/v1/runs", content=raw, headers=signed_headers(secret, raw))
    assert r.status_code == 201, r.text
    assert r.json()["is_baseline"] is True
    stored = client.get(
        f"/api/v1/runs/{doc['run_id']}?document=true", headers={"Authorization": f"Bearer {secret}"}
    ).json()
    assert stored["branch"] == branch and stored["document"]["workload"] == doc["workload"]
    pages = [f"/runs/{doc['run_id']}", f"/repos/acme/kernels?branch={branch}", "/"]
    for page in pages:
        html = client.get(page, headers={"Authorization": f"Bearer {viewer}"})
        assert html.status_code == 200, (page, html.status_code)
        for raw_markup in ("<script>alert", "<img src=x", "</td><script>"):
            assert raw_markup not in html.text, (page, raw_markup)
    # The runs table survived the branch name.
    storage = Database(database_url)
    try:
        with storage.read() as conn:
            assert runs.count(conn) == 1
    finally:
        storage.close()


@pytest.mark.parametrize(
    "path",
    [
        "/static/../../../../etc/passwd",
        "/static/..%2f..%2f..%2fetc%2fpasswd",
        "/repos/..%2F..%2Fetc/passwd",
        "/repos/acme/..%2f..%2fetc",
        "/runs/..%2f..%2fetc%2fpasswd",
        "/api/v1/runs/..%2f..%2fetc%2fpasswd",
        "/api/v1/runs/%00",
        "/api/v1/pulls/..%2f1/runs",
        "/api/v1/pulls/99999999999999999999999/runs",
    ],
)
def test_path_traversal_in_urls_finds_nothing(
    client: TestClient, database_url: str, path: str
) -> None:
    viewer = create_token(database_url, viewer=True).secret
    ci = create_token(database_url).secret
    for secret in (viewer, ci):
        r = client.get(path, headers={"Authorization": f"Bearer {secret}"})
        assert r.status_code in (400, 403, 404), (path, r.status_code, r.text[:200])
        assert "root:" not in r.text


OTHER_BODIES: dict[str, bytes] = {
    "nested 100000 deep": b"[" * 100_000 + b"]" * 100_000,
    "not JSON": b"\xff\xfe{",
    "an array": b'["reason"]',
    "reason is a number": b'{"reason": 7, "user": "octocat", "run_ids": [7]}',
    "reason too long": json.dumps(
        {"reason": "x" * 3000, "user": "octocat", "run_ids": []}
    ).encode(),
    "reason is blank": b'{"reason": "  ", "user": "octocat", "run_ids": ["x"]}',
    "over 64 KiB": b'{"reason": "' + b"x" * 70_000 + b'"}',
}


@pytest.mark.parametrize("name", list(OTHER_BODIES))
@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_hostile_bodies_to_the_accept_endpoints_are_4xx(
    client: TestClient, database_url: str, name: str
) -> None:
    secret = create_token(database_url).secret
    raw = body(make_results(repository="acme/kernels", branch="f", pr_number=3))
    stored = client.post("/api/v1/runs", content=raw, headers=signed_headers(secret, raw))
    run_id = stored.json()["run_id"]
    auth = {"Authorization": f"Bearer {secret}", "Content-Type": "application/json"}
    for path in (f"/api/v1/runs/{run_id}/accept", "/api/v1/pulls/3/accept"):
        r = client.post(path, content=OTHER_BODIES[name], headers=auth)
        assert 400 <= r.status_code < 500, (path, name, r.status_code, r.text[:200])
        assert r.json()["error"]["message"]
    view = client.get(f"/api/v1/runs/{run_id}", headers=auth).json()
    assert view["accepted"] is None


@pytest.mark.parametrize("name", ["nested 100000 deep", "not JSON", "an array"])
@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_hostile_webhook_bodies_with_a_valid_signature_are_4xx_or_ignored(
    database_url: str, name: str
) -> None:
    from gate_server.http.webhook import WEBHOOK_PATH

    settings_ = ServerSettings(database_url=database_url, github_webhook_secret="s3cret")
    raw = OTHER_BODIES[name]
    with TestClient(create_app(settings_)) as c:
        r = c.post(
            WEBHOOK_PATH,
            content=raw,
            headers=webhook_headers("s3cret", raw, "issue_comment", "d-1"),
        )
    assert r.status_code in (200, 400), (name, r.status_code, r.text[:200])


# '¹' and '٣' pass str.isdigit() and fail int(); 5,000 digits pass both checks and fail int().
@pytest.mark.parametrize("number", ["\u00b9", "\u0663", "9" * 5000])
def test_numbers_in_urls_are_ascii_digits_or_a_4xx(
    client: TestClient, database_url: str, number: str
) -> None:
    from tests.dashboard.test_access import login

    ci = {"Authorization": f"Bearer {create_token(database_url).secret}"}
    viewer = create_token(database_url, viewer=True).secret
    answers = {
        "ack": client.post(
            f"/api/v1/change-points/{number}/acknowledge", json={"note": "x"}, headers=ci
        ),
        "pull runs": client.get(f"/api/v1/pulls/{number}/runs", headers=ci),
        "pull accept": client.post(
            f"/api/v1/pulls/{number}/accept",
            json={"reason": "on purpose", "user": "octocat", "run_ids": []},
            headers=ci,
        ),
    }
    for name, r in answers.items():
        assert 400 <= r.status_code < 500, (name, r.status_code, r.text[:200])
        assert r.json()["error"]["message"], (name, r.text[:200])
    status, _, _ = login(client, viewer)
    assert status in (200, 303)  # this client follows the redirect
    for page in ("/audit", "/repos/acme/kernels"):
        r = client.get(f"{page}?page={number}", follow_redirects=False)
        assert r.status_code == 200, (page, r.status_code, r.text[:200])
