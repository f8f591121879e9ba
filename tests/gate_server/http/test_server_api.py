"""The JSON API in-process, on SQLite and PostgreSQL: refusals, idempotency, reads, accepts."""

from __future__ import annotations

import json
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

import jwt
import pytest
from sqlalchemy import text
from starlette.testclient import TestClient

from gate_server.asgi import create_app
from gate_server.db import Database, audit, runs
from gate_server.http import api, endpoints
from gate_server.settings import ServerSettings
from rnx_cli.receipt import verify
from testbed.factories import body, make_results
from testbed.gate_helpers import create_token, signed_headers

UPLOAD = "/api/v1/runs"


def assert_error(response: Any, status: int, code: str) -> dict[str, Any]:
    """The one error shape, with the expected status and code and a message that says something."""
    assert response.status_code == status, response.text
    data = response.json()
    assert set(data) == {"error"}
    err = data["error"]
    assert set(err) == {"code", "message", "details"}
    assert err["code"] == code, err
    assert isinstance(err["message"], str) and len(err["message"]) > 10
    assert isinstance(err["details"], list)
    return dict(err)


def stored(storage: Database) -> tuple[int, list[str]]:
    """(runs stored, audit actions): what a refused request must leave unchanged."""
    with storage.read() as conn:
        return runs.count(conn), [e["action"] for e in audit.entries(conn)]


def test_health_and_readiness(client):
    assert client.get("/healthz").json() == {"status": "ok"}
    ready = client.get("/readyz")
    assert ready.status_code == 200 and ready.json()["status"] == "ready"


def test_readyz_reports_an_unreachable_database(tmp_path):
    (tmp_path / "data").mkdir()
    app = create_app(ServerSettings(database_url=f"sqlite:///{tmp_path / 'data' / 'x.db'}"))
    with TestClient(app) as c:
        c.app.state.services.database.engine.dispose()  # type: ignore[attr-defined]
        # Its folder gone, nothing can open or create the database (removing only the file let
        # the outbox worker create an empty one before the test could put a folder in its place).
        (tmp_path / "data").rename(tmp_path / "gone")
        assert_error(c.get("/readyz"), 503, "database_unavailable")


def test_unknown_route_and_method_use_the_error_shape(client):
    assert_error(client.get("/api/v1/nothing"), 404, "not_found")
    assert_error(client.delete(UPLOAD), 405, "method_not_allowed")


def test_first_upload_has_no_baseline_and_is_warn(client, ci_token, sign, storage):
    tok = ci_token()
    data = body(make_results())
    r = client.post(UPLOAD, content=data, headers=sign(tok.secret, data))
    assert r.status_code == 201, r.text
    answer = r.json()
    assert answer["tier"] == "WARN"
    assert any("no baseline" in reason for reason in answer["reasons"])
    assert answer["baseline"] is None
    assert answer["is_baseline"] is True  # a push to main that is not BLOCK
    assert answer["url"] == f"http://gate.test/runs/{answer['run_id']}"
    assert len(answer["comparisons"]) == 8
    assert stored(storage)[0] == 1


@pytest.mark.parametrize(
    ("mutate", "status", "code"),
    [
        (lambda h, b: ({**h, "Content-Type": "text/plain"}, b), 415, "unsupported_media_type"),
        (
            lambda h, b: ({k: v for k, v in h.items() if k != "Content-Type"}, b),
            415,
            "unsupported_media_type",
        ),
        (
            lambda h, b: ({k: v for k, v in h.items() if k != "Authorization"}, b),
            401,
            "missing_token",
        ),
        (lambda h, b: ({**h, "Authorization": "Basic abc"}, b), 401, "bad_authorization"),
        (lambda h, b: ({**h, "Authorization": "Bearer rnx_ci_nope"}, b), 401, "unknown_token"),
        (
            lambda h, b: ({k: v for k, v in h.items() if k != "X-Kernalin-Timestamp"}, b),
            401,
            "missing_timestamp",
        ),
        (
            lambda h, b: ({k: v for k, v in h.items() if k != "X-Kernalin-Signature"}, b),
            401,
            "missing_signature",
        ),
        (lambda h, b: ({**h, "X-Kernalin-Timestamp": "yesterday"}, b), 401, "bad_timestamp"),
        (
            lambda h, b: ({**h, "X-Kernalin-Signature": "sha256=" + "0" * 64}, b),
            401,
            "bad_signature",
        ),
        (lambda h, b: (h, b.replace(b'"main"', b'"mainx"', 1)), 401, "bad_signature"),
    ],
    ids=[
        "text-plain",
        "no-content-type",
        "no-auth",
        "basic-auth",
        "unknown-token",
        "no-timestamp",
        "no-signature",
        "bad-timestamp",
        "zero-signature",
        "tampered-body",
    ],
)
def test_refused_uploads_store_nothing(client, ci_token, sign, storage, mutate, status, code):
    tok = ci_token()
    data = body(make_results())
    before = stored(storage)
    headers, sent = mutate(sign(tok.secret, data), data)
    assert_error(client.post(UPLOAD, content=sent, headers=headers), status, code)
    assert stored(storage) == before


@pytest.mark.parametrize("skew", [-301, 400, -10_000])
def test_stale_or_future_timestamps_are_refused(client, ci_token, sign, storage, skew):
    tok = ci_token()
    data = body(make_results())
    headers = sign(tok.secret, data, timestamp=int(time.time()) + skew)
    err = assert_error(client.post(UPLOAD, content=data, headers=headers), 401, "stale_timestamp")
    assert "300 s" in err["message"]
    assert stored(storage)[0] == 0


def _doc_dict(**kw: Any) -> dict[str, Any]:
    return json.loads(body(make_results(**kw)))


def _set(d: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    node: Any = d
    keys = path.split(".")
    for k in keys[:-1]:
        node = node[int(k)] if isinstance(node, list) else node[k]
    last = keys[-1]
    if isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value
    return d


BAD_BODIES: list[tuple[str, bytes, int, str]] = [
    ("not-json", b"{not json", 400, "invalid_json"),
    ("empty", b"", 400, "invalid_json"),
    ("bad-utf8", b'{"a": "\xff\xfe\xfa"}', 400, "invalid_json"),
    ("deep-nesting", b"[" * 100_000 + b"]" * 100_000, 400, "invalid_json"),
    ("array", b"[1, 2]", 422, "invalid_document"),
    ("string", b'"hello \xe2\x98\x83"', 422, "invalid_document"),
    (
        "nan",
        json.dumps(_set(_doc_dict(), "configurations.0.samples.ns.0", float("nan"))).encode(),
        400,
        "invalid_json",
    ),
    (
        "infinity",
        json.dumps(_set(_doc_dict(), "configurations.0.samples.ns.0", float("inf"))).encode(),
        400,
        "invalid_json",
    ),
    (
        "negative",
        json.dumps(_set(_doc_dict(), "configurations.0.samples.ns.0", -5)).encode(),
        422,
        "invalid_document",
    ),
    (
        "float-time",
        json.dumps(_set(_doc_dict(), "configurations.0.samples.ns.0", 1.5)).encode(),
        422,
        "invalid_document",
    ),
    (
        "wrong-type",
        json.dumps(_set(_doc_dict(), "configurations", "many")).encode(),
        422,
        "invalid_document",
    ),
    (
        "unknown-field",
        json.dumps({**_doc_dict(), "tier": "PASS"}).encode(),
        422,
        "invalid_document",
    ),
    (
        "future-version",
        json.dumps({**_doc_dict(), "schema_version": 99}).encode(),
        422,
        "invalid_document",
    ),
    (
        "unicode-repo",
        json.dumps({**_doc_dict(), "repository": "acme/k\u00e9rnels\u202e"}).encode(),
        422,
        "invalid_document",
    ),
    (
        "huge-int",
        json.dumps(_set(_doc_dict(), "configurations.0.batch_size", 123456789))
        .encode()
        .replace(b"123456789", b"9" * 5000),
        400,
        "invalid_json",
    ),
    (
        "pr-without-base",
        json.dumps(
            _set(_doc_dict(event="pull_request", pr_number=3), "git.base_branch", None)
        ).encode(),
        422,
        "missing_base_branch",
    ),
]


@pytest.mark.parametrize(
    ("data", "status", "code"), [b[1:] for b in BAD_BODIES], ids=[b[0] for b in BAD_BODIES]
)
def test_bad_documents_get_a_4xx_and_store_nothing(
    client, ci_token, sign, storage, data, status, code
):
    tok = ci_token()
    before = stored(storage)
    err = assert_error(
        client.post(UPLOAD, content=data, headers=sign(tok.secret, data)), status, code
    )
    if code == "invalid_document" and data.startswith(b"{") and b'schema_version": 99' not in data:
        assert err["details"] and {"field", "problem"} <= set(err["details"][0])
    assert stored(storage) == before


def test_body_and_sample_limits(server_settings, ci_token, sign, storage):
    settings = replace(server_settings, max_body_bytes=20_000, max_samples=100)
    tok = ci_token()
    with TestClient(create_app(settings)) as c:
        big = body(make_results(n=300))
        assert len(big) > 20_000
        assert_error(
            c.post(UPLOAD, content=big, headers=sign(tok.secret, big)), 413, "body_too_large"
        )
        # Without a Content-Length the limit still holds while the body streams in.
        chunks = (big[i : i + 4096] for i in range(0, len(big), 4096))
        headers = sign(tok.secret, big)
        assert_error(c.post(UPLOAD, content=chunks, headers=headers), 413, "body_too_large")
        many = body(make_results(n=24))  # 8 x 24 = 192 samples > 100
        err = assert_error(
            c.post(UPLOAD, content=many, headers=sign(tok.secret, many)), 422, "too_many_samples"
        )
        assert "192" in err["message"] and "RNX_MAX_SAMPLES" in err["message"]
    assert stored(storage)[0] == 0


def test_repository_outside_the_token_is_refused(client, ci_token, sign, storage):
    tok = ci_token(repository="acme/kernels")
    data = body(make_results(repository="acme/other"))
    err = assert_error(
        client.post(UPLOAD, content=data, headers=sign(tok.secret, data)),
        403,
        "repository_out_of_scope",
    )
    assert "acme/other" in err["message"]
    assert stored(storage)[0] == 0


def test_viewer_token_cannot_upload_or_accept(client, ci_token, viewer_token, sign, storage):
    viewer = viewer_token()
    data = body(make_results())
    assert_error(
        client.post(UPLOAD, content=data, headers=sign(viewer.secret, data)), 403, "viewer_token"
    )
    ci = ci_token()
    run = client.post(UPLOAD, content=data, headers=sign(ci.secret, data)).json()
    accept = client.post(
        f"{UPLOAD}/{run['run_id']}/accept",
        json={"reason": "x"},
        headers={"Authorization": f"Bearer {viewer.secret}"},
    )
    assert_error(accept, 403, "viewer_token")
    # ...but it reads runs of its workspace.
    seen = client.get(
        f"{UPLOAD}/{run['run_id']}", headers={"Authorization": f"Bearer {viewer.secret}"}
    )
    assert seen.status_code == 200 and seen.json()["tier"] == run["tier"]


def test_same_bytes_again_get_the_same_answer_other_bytes_get_409(client, ci_token, sign, storage):
    tok = ci_token()
    doc = make_results()
    data = body(doc)
    headers = sign(tok.secret, data)
    first = client.post(UPLOAD, content=data, headers=headers)
    assert first.status_code == 201
    # A byte-identical replay of the same request, and a retry signed afresh: the stored answer.
    replay = client.post(UPLOAD, content=data, headers=headers)
    resigned = client.post(
        UPLOAD, content=data, headers=sign(tok.secret, data, timestamp=int(time.time()) - 5)
    )
    assert replay.status_code == 200 and replay.json() == first.json()
    assert resigned.status_code == 200 and resigned.json() == first.json()
    other = body(make_results(run_id=doc.run_id, seed=99))
    err = assert_error(
        client.post(UPLOAD, content=other, headers=sign(tok.secret, other)), 409, "run_id_conflict"
    )
    assert str(doc.run_id) in err["message"]
    count, actions = stored(storage)
    assert count == 1
    assert actions[-2:] == ["run.upload.replay", "run.upload.retry"]
    assert actions.count("run.upload") == 1


def test_concurrent_uploads_are_all_answered_and_ingested_within_the_bound(
    client, ci_token, sign, storage, monkeypatch
):
    """Eight uploads at once: each gets its verdict. On PostgreSQL ingested in the event loop's
    own thread with its token lookup, taking turns while one waits on a statement, as many at
    once as the bound and no more (the re-gate holds the GIL: more only trade it); on SQLite,
    whose statements block their thread, in worker threads, as many at once as the bound."""
    lock = threading.Lock()
    now, most, threads = [0], [0], set()

    def counted(real: Any) -> Any:
        def run(database: Any, *args: Any, **kwargs: Any) -> Any:
            with lock:
                now[0] += 1
                most[0] = max(most[0], now[0])
                threads.add(threading.get_ident())
            try:
                # Long enough that calls let in together would overlap: on PostgreSQL a wait
                # on the database, which the loop awaits.
                if database.dialect == "postgresql":
                    with database.lookup() as conn:
                        conn.execute(text("SELECT pg_sleep(0.05)"))
                else:
                    time.sleep(0.05)
                return real(database, *args, **kwargs)
            finally:
                with lock:
                    now[0] -= 1

        return run

    monkeypatch.setattr(api, "ingest_run", counted(api.ingest_run))
    monkeypatch.setattr(endpoints, "authenticate", counted(endpoints.authenticate))
    tok = ci_token()
    bodies = [body(make_results(event="pull_request", pr_number=i + 1)) for i in range(8)]
    start = threading.Barrier(len(bodies))

    def upload(data: bytes) -> int:
        start.wait()
        return client.post(UPLOAD, content=data, headers=sign(tok.secret, data)).status_code

    with ThreadPoolExecutor(len(bodies)) as pool:
        statuses = list(pool.map(upload, bodies))
    assert statuses == [201] * len(bodies)
    assert stored(storage)[0] == len(bodies)
    if storage.dialect == "postgresql":
        assert len(threads) == 1  # the event loop's: no upload reached a worker thread
    else:
        assert threading.main_thread().ident not in threads and len(threads) > 1
    # Reached, not only bounded: eight uploads that each wait 50 ms fill every slot.
    assert most[0] == api.UPLOADS_AT_ONCE


def test_another_repositorys_token_cannot_claim_a_used_run_id(client, ci_token, sign):
    a = ci_token(repository="acme/kernels")
    b = ci_token(repository="acme/other")
    doc = make_results()
    data = body(doc)
    assert client.post(UPLOAD, content=data, headers=sign(a.secret, data)).status_code == 201
    twin = body(make_results(repository="acme/other", run_id=doc.run_id))
    assert_error(
        client.post(UPLOAD, content=twin, headers=sign(b.secret, twin)), 409, "run_id_conflict"
    )


def test_revoked_token_is_refused(client, ci_token, sign, storage):
    from gate_server.domain.auth import revoke_token

    tok = ci_token()
    assert revoke_token(storage, tok.id, actor="test")
    data = body(make_results())
    assert_error(
        client.post(UPLOAD, content=data, headers=sign(tok.secret, data)), 401, "revoked_token"
    )


def test_get_run_scoping_and_document(client, ci_token, viewer_token, sign):
    tok = ci_token()
    data = body(make_results())
    run_id = client.post(UPLOAD, content=data, headers=sign(tok.secret, data)).json()["run_id"]
    auth = {"Authorization": f"Bearer {tok.secret}"}
    view = client.get(f"{UPLOAD}/{run_id}", headers=auth).json()
    assert view["run_id"] == run_id and view["is_baseline"] and "document" not in view
    full = client.get(f"{UPLOAD}/{run_id}?document=true", headers=auth).json()
    assert full["document"] == json.loads(data)
    assert_error(client.get(f"{UPLOAD}/{uuid.uuid4()}", headers=auth), 404, "run_not_found")
    assert_error(client.get(f"{UPLOAD}/not-a-uuid", headers=auth), 404, "run_not_found")
    other_repo = ci_token(repository="acme/other")
    other_ws = viewer_token(workspace="elsewhere")
    for t in (other_repo, other_ws):
        r = client.get(f"{UPLOAD}/{run_id}", headers={"Authorization": f"Bearer {t.secret}"})
        assert_error(r, 404, "run_not_found")


def test_accept_needs_a_reason_and_the_branch_in_scope(client, ci_token, sign, storage):
    tok = ci_token(branches=("main",))
    pr = body(
        make_results(event="pull_request", pr_number=7, branch="feature", base_branch="release/2")
    )
    run_id = client.post(UPLOAD, content=pr, headers=sign(tok.secret, pr)).json()["run_id"]
    auth = {"Authorization": f"Bearer {tok.secret}"}
    url = f"{UPLOAD}/{run_id}/accept"
    wide = {"Authorization": f"Bearer {ci_token(branches=('main', 'release/*')).secret}"}
    before = stored(storage)
    assert_error(client.post(url, json={"reason": "x"}, headers=auth), 403, "branch_out_of_scope")
    assert_error(client.post(url, json={}, headers=wide), 422, "missing_reason")
    assert_error(client.post(url, json={"reason": "   "}, headers=wide), 422, "missing_reason")
    assert_error(client.post(url, json={"reason": 5}, headers=wide), 422, "missing_reason")
    assert_error(
        client.post(url, content=b"{oops", headers={**wide, "Content-Type": "application/json"}),
        400,
        "invalid_json",
    )
    assert_error(
        client.post(url, content=b"reason", headers={**wide, "Content-Type": "text/plain"}),
        415,
        "unsupported_media_type",
    )
    assert_error(
        client.post(url, json={"reason": "r" * 3000}, headers=wide), 422, "reason_too_long"
    )
    assert stored(storage) == before
    ok = client.post(
        url, json={"reason": "new attention kernel trades speed for memory"}, headers=wide
    )
    assert ok.status_code == 200, ok.text
    assert ok.json()["baseline_branch"] == "release/2"
    assert ok.json()["already_accepted"] is False
    again = client.post(url, json={"reason": "twice"}, headers=wide).json()
    assert again["already_accepted"] is True
    assert again["reason"] == "new attention kernel trades speed for memory"
    with storage.read() as conn:
        log = audit.entries(conn, subject=f"run:{run_id}")
    assert [e["action"] for e in log] == ["run.upload", "run.accept"]
    assert log[1]["details"]["reason"].startswith("new attention")


def test_receipt_verifies_with_the_served_key(client, ci_token, sign):
    tok = ci_token()
    doc = make_results()
    data = body(doc)
    answer = client.post(UPLOAD, content=data, headers=sign(tok.secret, data)).json()
    key = client.get("/api/v1/receipt-key").json()
    assert key["algorithm"] == "EdDSA"
    claims = verify(answer["receipt"], key["public_key_pem"])
    assert claims["run_id"] == answer["run_id"]
    assert claims["tier"] == answer["tier"]
    assert claims["repository"] == "acme/kernels"
    assert claims["sha"] == doc.git.sha
    header, payload, signature = answer["receipt"].split(".")
    forged = jwt.utils.base64url_encode(json.dumps({**claims, "tier": "PASS"}).encode()).decode()
    with pytest.raises(jwt.InvalidSignatureError):
        verify(f"{header}.{forged}.{signature}", key["public_key_pem"])


def test_the_receipt_key_survives_restarts(server_settings):
    keys = []
    for _ in range(2):
        with TestClient(create_app(server_settings)) as c:
            keys.append(c.get("/api/v1/receipt-key").json()["public_key_pem"])
    assert keys[0] == keys[1]


def _read_only(database_url: str) -> str:
    """The same database, opened so that it takes no writes: PostgreSQL as a standby would
    answer (default_transaction_read_only), SQLite as a read-only file would."""
    from sqlalchemy.engine import make_url

    url = make_url(database_url)
    if url.get_backend_name() == "sqlite":
        return f"sqlite:///file:{url.database}?mode=ro&uri=true"
    options = f"{url.query.get('options', '')} -cdefault_transaction_read_only=on".strip()
    return url.update_query_dict({"options": options}).render_as_string(hide_password=False)


def test_a_database_that_takes_no_writes_is_503_and_not_ready(database_url: str) -> None:
    token = create_token(database_url)  # the schema, a repository and its token, writable
    with TestClient(create_app(ServerSettings(database_url=database_url))) as c:
        assert c.get("/readyz").status_code == 200
    app = create_app(ServerSettings(database_url=_read_only(database_url)))
    with TestClient(app, raise_server_exceptions=False) as c:
        assert_error(c.get("/readyz"), 503, "database_read_only")
        data = body(make_results(seed=41))
        answer = c.post("/api/v1/runs", content=data, headers=signed_headers(token.secret, data))
        assert_error(answer, 503, "database_read_only")
        assert answer.headers["Retry-After"]
        assert "Traceback" not in answer.text
