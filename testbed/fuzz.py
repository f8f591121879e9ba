"""Hostile input against the real gate server: schemathesis over every operation in
/openapi.json, with no token, a CI token and a viewer token, valid and invalid data.

The server is `rnx serve` on loopback (the webhook secret set, so the webhook route is live).
Uploads are signed as the action signs them (X-Kernalin-Timestamp/Signature over the exact
bytes sent) and webhook deliveries carry a valid X-Hub-Signature-256, so generated bodies get
past authentication into validation; the unsigned variant ("none") fuzzes the headers too.
Every answer must be no 5xx and conform to the documented status codes, content type and
response schema. `run` is used by tests/reliability/test_reliability_schemathesis.py (a few
cases) and by `python -m benchmarks.reliability.fuzz_api` (many, with the counts printed).
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import schemathesis
import schemathesis.specs.openapi.checks  # noqa: F401 (registers the OpenAPI checks)
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st
from hypothesis.errors import Unsatisfiable
from schemathesis.checks import CHECKS as ALL_CHECKS
from schemathesis.config._checks import POSITIVE_DATA_ACCEPTANCE_EXPECTED_STATUSES
from schemathesis.core.failures import FailureGroup

from gate_server.domain.auth import sign_upload
from testbed.factories import body, make_results
from testbed.gate_helpers import (
    create_token,
    signed_headers,
    start_server,
)

WEBHOOK_SECRET = "fuzz-webhook-secret"
# What _sign sets, replacing whatever was generated.
SIGNATURE_HEADERS = ("X-Kernalin-Timestamp", "X-Kernalin-Signature", "X-Hub-Signature-256")
# schemathesis's `--checks all`: every check it registers (the OpenAPI ones load with
# schemathesis.specs.openapi.checks above), positive_data_acceptance included.
CHECKS = ALL_CHECKS.get_all()


def _schema_valid_but_refused(method: str, path: str, status: int) -> dict[str, Any]:
    """positive_data_acceptance's default statuses plus `status`, for one operation."""
    statuses = [*POSITIVE_DATA_ACCEPTANCE_EXPECTED_STATUSES, str(status)]
    return {
        "include-method": method,
        "include-path": path,
        "checks": {"positive_data_acceptance": {"expected-statuses": statuses}},
    }


# /openapi.json states what the code checks where a JSON schema can (non-blank required query
# parameters and GitHub headers, length bounds, no NUL in a query parameter, an accept reason
# as check_reason takes it, and in an upload:
# schema_version, samples per side, no control characters in workload paths, a reason for a
# configuration not ok, a base branch for a pull request, base_samples only in paired mode), so
# schema-valid requests are accepted, except on two operations with rules no JSON schema states;
# positive_data_acceptance expects their documented 422 too:
# - POST /api/v1/runs: created_at from 2000-01-01 to a day ahead of the server's clock;
#   git.branch and git.base_branch valid git branch names without look-alike characters
#   (rnx/branches.py); configuration ids unique; samples.ns, .round and .process of one length;
#   at most RNX_MAX_SAMPLES samples in all; workload.path as below.
# - GET /api/v1/baselines: a workload path that is relative, without '..' segments, names a file
#   and fits MAX_WORKLOAD_BYTES in UTF-8 (gate_server/workloads.py).
CONFIG = schemathesis.Config.from_dict(
    {
        "operations": [
            _schema_valid_but_refused("POST", "/api/v1/runs", 422),
            _schema_valid_but_refused("GET", "/api/v1/baselines", 422),
        ]
    }
)


@dataclass
class Tally:
    cases: int = 0
    unsendable: int = 0
    tracebacks: int = 0
    seconds: float = 0.0
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


def generated(examples: int) -> settings:
    """Hypothesis settings for `examples` generated cases and nothing else (no example database,
    replay or shrinking: each case is a request to a live server), no deadline or health check."""
    return settings(
        max_examples=examples,
        database=None,
        deadline=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )


def fuzz_operation(
    op: Any,
    url: str,
    secret: str | None,
    mode: schemathesis.GenerationMode,
    examples: int,
    random_seed: int = 0,
) -> Tally:
    tally = Tally()
    auth = {"Authorization": f"Bearer {secret}"} if secret else {}
    client = httpx.Client(timeout=30)

    @generated(examples)
    @seed(random_seed)  # the same cases on every run, so a failure can be replayed
    @given(op.as_strategy(generation_mode=mode))
    def one(case: Any) -> None:
        kwargs = case.as_transport_kwargs(base_url=url, headers=auth)
        kwargs = _sign(kwargs, op.path, secret)
        # The case holds the signature headers as sent, so the checks judge the request that
        # went out: a negative case whose only mutation was a replaced signature header is valid.
        signed = {k: v for k, v in kwargs["headers"].items() if k in SIGNATURE_HEADERS}
        if signed:
            case.headers = {**(case.headers or {}), **signed}
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
            # The token goes in as explicit headers, so ignored_auth probes without it.
            case.validate_response(
                response, checks=CHECKS, headers=auth, transport_kwargs={"base_url": url}
            )
        except (AssertionError, FailureGroup) as e:  # what schemathesis raises on a failure
            first = str(e).strip().splitlines()
            tally.failures.append(
                f"{response.status_code} {request.method} {request.url}: {response.text[:300]} "
                + " | ".join(line.strip() for line in first[:6] if line.strip())
            )

    # Unsatisfiable: nothing to negate (no parameters, no body), so no case to send.
    with contextlib.suppress(Unsatisfiable):
        one()
    client.close()
    return tally


# Valid documents that stress the gate's statistics rather than the parser: any sample
# count the schema allows, times from 1 ns to minutes, one to many processes, identical samples,
# broken configurations, pull requests and pushes, so re-gating meets its edge cases.
DOC_SHAPE = st.fixed_dictionaries(
    {
        "n": st.integers(min_value=1, max_value=80),
        "processes": st.integers(min_value=1, max_value=6),
        # Up to a second x 1000 slowdown x the factory's 5.7x config spread x 7x noise: under
        # the schema's one-day cap on a sample.
        "median_ns": st.sampled_from([1.0, 3.0, 1e3, 1e6, 1e9]),
        "spread": st.sampled_from([0.0, 1e-6, 0.01, 0.5]),
        "slowdown": st.sampled_from([1e-3, 0.5, 1.0, 1.02, 1.3, 2.0, 1e3]),
        "configs": st.integers(min_value=1, max_value=48),
        "broken": st.integers(min_value=0, max_value=2),
        "pr": st.booleans(),
        "environment": st.sampled_from(["env-a", "env-b"]),
    }
)
ALL_CONFIGS = [
    (r, d, b)
    for r in ("pytorch_eager", "torch_compile", "onnxruntime", "tensorrt")
    for d in ("float32", "float16", "bfloat16")
    for b in (1, 2, 4, 8)
]


def fuzz_documents(url: str, secret: str, examples: int, random_seed: int = 0) -> Tally:
    """Signed uploads of generated valid documents: each must be stored (201) with an answer
    the action can read, or refused with a 4xx in the error shape; never a 5xx."""
    from action.upload import UploadAnswer

    tally = Tally()
    client = httpx.Client(timeout=60)

    @seed(random_seed)
    @generated(examples)
    @given(DOC_SHAPE, st.randoms(use_true_random=False))
    def one(shape: dict[str, Any], rnd: Any) -> None:
        configs = rnd.sample(ALL_CONFIGS, shape["configs"])
        doc = make_results(
            configs=configs,
            n=shape["n"],
            processes=shape["processes"],
            median_ns=shape["median_ns"],
            spread=shape["spread"],
            slowdown=shape["slowdown"],
            broken=[f"{r}/{d}/bs{b}" for r, d, b in configs[: shape["broken"]]],
            branch="feature" if shape["pr"] else "main",
            pr_number=5 if shape["pr"] else None,
            environment=shape["environment"],
            seed=rnd.randrange(2**31),
        )
        raw = body(doc)
        r = client.post(f"{url}/api/v1/runs", content=raw, headers=signed_headers(secret, raw))
        tally.cases += 1
        tally.statuses[r.status_code] += 1
        problem = None
        if r.status_code == 201:
            try:
                UploadAnswer.model_validate(r.json())
            except Exception as e:  # report any answer the action could not read
                problem = f"answer the action cannot read: {e}"
        elif not 400 <= r.status_code < 500:
            problem = f"status {r.status_code}: {r.text[:200]}"
        elif "error" not in r.json():
            problem = f"{r.status_code} outside the error shape: {r.text[:200]}"
        if problem:
            tally.failures.append(f"document {shape}: {problem}")

    one()
    client.close()
    return tally


def run(db: str, work: Path, *, examples: int, random_seed: int = 0, quiet: bool = False) -> Tally:
    """Fuzz every operation of a fresh server on `db`; the tally of all cases."""
    say = (lambda *a, **k: None) if quiet else print
    ci = create_token(db)
    viewer = create_token(db, viewer=True)
    server = start_server(db, work, env={"RNX_GITHUB_WEBHOOK_SECRET": WEBHOOK_SECRET})
    started = time.monotonic()
    total = Tally()
    try:
        # One stored run, so reads and accepts of a real run_id are reachable too.
        first = body(make_results())
        httpx.post(
            f"{server.url}/api/v1/runs",
            content=first,
            headers=signed_headers(ci.secret, first),
            timeout=60,
        ).raise_for_status()
        schema = schemathesis.openapi.from_url(f"{server.url}/openapi.json", config=CONFIG)
        say(f"schemathesis {schemathesis.__version__}, {db.split(':')[0]}, {server.url}")
        say(f"{'operation':44} {'token':6} {'mode':8} {'cases':>5} {'fail':>4}  statuses")
        for result in schema.get_all_operations():
            op = result.ok()
            for name, secret in (("none", None), ("ci", ci.secret), ("viewer", viewer.secret)):
                for mode in (
                    schemathesis.GenerationMode.POSITIVE,
                    schemathesis.GenerationMode.NEGATIVE,
                ):
                    t = fuzz_operation(op, server.url, secret, mode, examples, random_seed)
                    total.cases += t.cases
                    total.unsendable += t.unsendable
                    total.statuses.update(t.statuses)
                    total.failures.extend(t.failures)
                    statuses = " ".join(f"{k}x{v}" for k, v in sorted(t.statuses.items()))
                    label = f"{op.method.upper()} {op.path}"
                    say(
                        f"{label:44} {name:6} {mode.value:8} {t.cases:5} "
                        f"{len(t.failures):4}  {statuses}",
                        flush=True,
                    )
        t = fuzz_documents(server.url, ci.secret, examples * 4, random_seed)
        total.cases += t.cases
        total.statuses.update(t.statuses)
        total.failures.extend(t.failures)
        statuses = " ".join(f"{k}x{v}" for k, v in sorted(t.statuses.items()))
        label = "POST /api/v1/runs (valid documents)"
        say(f"{label:44} {'ci':6} {'edges':8} {t.cases:5} {len(t.failures):4}  {statuses}")
    finally:
        server.stop()
    total.tracebacks = server.log.read_text(errors="replace").count("Traceback")
    total.seconds = time.monotonic() - started
    return total
