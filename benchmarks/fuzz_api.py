"""Hostile input against the real gate server: schemathesis over every operation in
/openapi.json, with no token, a CI token and a viewer token, valid and invalid data.

    .venv/bin/python benchmarks/fuzz_api.py [--examples 40] [--database sqlite|postgresql]

The server is `rnx serve` on loopback (the webhook secret set, so the webhook route is live).
Uploads are signed as the action signs them (X-Kernalin-Timestamp/Signature over the exact
bytes sent) and webhook deliveries carry a valid X-Hub-Signature-256, so generated bodies get
past authentication into validation; the unsigned variant ("none") fuzzes the headers too.
Every answer must be no 5xx and conform to the documented status codes, content type and
response schema. Prints one line per (operation, token, mode) and the failures, then a total.
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import json
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

import schemathesis  # noqa: E402
from factories import body, make_results  # noqa: E402
from gate_helpers import (  # noqa: E402
    create_token,
    fresh_postgres_schema,
    postgres_base_url,
    signed_headers,
    start_server,
)
from hypothesis import HealthCheck, Phase, given, settings  # noqa: E402
from hypothesis.errors import Unsatisfiable  # noqa: E402
from schemathesis.checks import not_a_server_error  # noqa: E402
from schemathesis.core.failures import FailureGroup  # noqa: E402
from schemathesis.specs.openapi.checks import (  # noqa: E402
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from gate_server.auth import sign_upload  # noqa: E402

WEBHOOK_SECRET = "fuzz-webhook-secret"
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]


@dataclass
class Tally:
    cases: int = 0
    unsendable: int = 0
    statuses: Counter[int] = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)


def _sign(case_kwargs: dict[str, Any], path: str, secret: str | None) -> dict[str, Any]:
    """Serialize the body ourselves so the signature covers exactly the bytes sent."""
    kwargs = dict(case_kwargs)
    headers = dict(kwargs.get("headers") or {})
    if "json" in kwargs:
        raw = json.dumps(kwargs.pop("json")).encode()
    else:
        raw = kwargs.pop("data", None) or b""
        raw = raw.encode() if isinstance(raw, str) else raw
    if path == "/api/v1/runs" and secret is not None:
        ts = str(int(time.time()))
        headers["X-Kernalin-Timestamp"] = ts
        headers["X-Kernalin-Signature"] = sign_upload(secret, ts, raw)
    if path == "/api/v1/github/webhook" and secret is not None:
        mac = hmac.new(WEBHOOK_SECRET.encode(), raw, hashlib.sha256).hexdigest()
        headers["X-Hub-Signature-256"] = "sha256=" + mac
    kwargs["headers"] = headers
    kwargs["content"] = raw if raw or "json" in case_kwargs else None
    return kwargs


def fuzz_operation(
    op: Any, url: str, secret: str | None, mode: schemathesis.GenerationMode, examples: int
) -> Tally:
    tally = Tally()
    auth = {"Authorization": f"Bearer {secret}"} if secret else {}
    client = httpx.Client(timeout=30)

    @settings(
        max_examples=examples,
        database=None,
        deadline=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(op.as_strategy(generation_mode=mode))
    def one(case: Any) -> None:
        kwargs = case.as_transport_kwargs(base_url=url, headers=auth)
        kwargs = _sign(kwargs, op.path, secret)
        request = client.build_request(
            kwargs["method"],
            kwargs["url"],
            headers=kwargs["headers"],
            params=kwargs.get("params"),
            cookies=kwargs.get("cookies"),
            content=kwargs["content"],
        )
        try:
            response = client.send(request)
        except httpx.LocalProtocolError:
            tally.unsendable += 1  # e.g. a header value HTTP cannot carry; no server sees it
            return
        tally.cases += 1
        tally.statuses[response.status_code] += 1
        try:
            case.validate_response(response, checks=CHECKS)
        except (AssertionError, FailureGroup) as e:  # what schemathesis raises on a failure
            first = str(e).strip().splitlines()
            tally.failures.append(
                f"{response.status_code} {request.method} {request.url}: "
                + " | ".join(line.strip() for line in first[:6] if line.strip())
            )

    try:
        one()
    except Unsatisfiable:
        pass  # nothing to negate (an operation without parameters or body): no case to send
    client.close()
    return tally


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--examples", type=int, default=40, help="cases per operation, token, mode")
    p.add_argument("--database", choices=["sqlite", "postgresql"], default="sqlite")
    args = p.parse_args(argv)

    work = Path(tempfile.mkdtemp(prefix="rnx-fuzz-"))
    drop = None
    if args.database == "sqlite":
        db = f"sqlite:///{work / 'fuzz.db'}"
    else:
        db, drop = fresh_postgres_schema(postgres_base_url())
    ci = create_token(db)
    viewer = create_token(db, viewer=True)
    server = start_server(db, work, env={"RNX_GITHUB_WEBHOOK_SECRET": WEBHOOK_SECRET})
    started = time.monotonic()
    try:
        # One stored run, so reads and accepts of a real run_id are reachable too.
        seed = body(make_results())
        httpx.post(
            f"{server.url}/api/v1/runs", content=seed, headers=signed_headers(ci.secret, seed)
        ).raise_for_status()
        schema = schemathesis.openapi.from_url(f"{server.url}/openapi.json")
        total = Tally()
        print(f"schemathesis {schemathesis.__version__}, {args.database}, {server.url}")
        print(f"{'operation':44} {'token':6} {'mode':8} {'cases':>5} {'fail':>4}  statuses")
        for result in schema.get_all_operations():
            op = result.ok()
            for name, secret in (("none", None), ("ci", ci.secret), ("viewer", viewer.secret)):
                for mode in (schemathesis.GenerationMode.POSITIVE, schemathesis.GenerationMode.NEGATIVE):
                    t = fuzz_operation(op, server.url, secret, mode, args.examples)
                    total.cases += t.cases
                    total.statuses.update(t.statuses)
                    total.failures.extend(t.failures)
                    statuses = " ".join(f"{k}x{v}" for k, v in sorted(t.statuses.items()))
                    label = f"{op.method.upper()} {op.path}"
                    print(
                        f"{label:44} {name:6} {mode.value:8} {t.cases:5} "
                        f"{len(t.failures):4}  {statuses}",
                        flush=True,
                    )
        print()
        for failure in dict.fromkeys(total.failures):
            print("FAIL", failure[:400])
        log = server.log.read_text(errors="replace")
        tracebacks = log.count("Traceback")
        print(
            f"total: {total.cases} cases, {len(total.failures)} failed, "
            f"{sum(v for k, v in total.statuses.items() if k >= 500)} answers 5xx, "
            f"{tracebacks} tracebacks in the server log, "
            f"{time.monotonic() - started:.0f} s"
        )
        return 1 if total.failures or tracebacks else 0
    finally:
        server.stop()
        if drop is not None:
            drop()


if __name__ == "__main__":
    raise SystemExit(main())
