"""/openapi.json: built from the app's own routes, each endpoint carrying its operation."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from starlette.routing import BaseRoute, Mount, Route

from rnx.schema import MAX_SAMPLES_PER_SIDE, GateReport, ResultsDocument

F = TypeVar("F", bound=Callable[..., Any])
_REF = "#/components/schemas/{model}"


def operation(method: str, spec: dict[str, Any]) -> Callable[[F], F]:
    """Attach an endpoint's OpenAPI operation for `method`; an undocumented route is missing
    from /openapi.json, which tests/gate_server/http/test_server_openapi.py catches."""

    def attach(fn: F) -> F:
        ops: dict[str, Any] = dict(getattr(fn, "__openapi__", {}))
        ops[method.lower()] = spec
        fn.__openapi__ = ops  # type: ignore[attr-defined]
        return fn

    return attach


def json_body(ref: str, description: str) -> dict[str, Any]:
    """A response (or request) whose JSON body is the component schema `ref`."""
    return {
        "description": description,
        "content": {"application/json": {"schema": {"$ref": _REF.format(model=ref)}}},
    }


def error(description: str) -> dict[str, Any]:
    """An error response: the one JSON error shape."""
    return json_body("Error", description)


# What an endpoint that reads a JSON body may answer besides its own responses.
BODY_ERRORS = {
    "400": error("the body is not JSON"),
    "413": error("the body is too large"),
}
# What every route may answer: gate_server/asgi.py refuses a NUL character in any query parameter.
QUERY_ERROR = error("a query parameter holds a NUL character")
# What every endpoint that takes a bearer token may answer besides its own responses.
AUTH_ERRORS = {
    "401": error("missing, unknown or revoked token"),
    "403": error("the token may not do this"),
}


def endpoint(
    method: str,
    summary: str,
    *,
    responses: dict[str, Any],
    bearer: bool = False,
    parameters: Iterable[dict[str, Any]] = (),
    body: dict[str, Any] | None = None,
) -> Callable[[F], F]:
    """`operation` for the usual endpoint: a summary, its query or header parameters, a JSON
    request body of schema `body`, and its responses (plus AUTH_ERRORS when `bearer`)."""
    spec: dict[str, Any] = {"summary": summary}
    if bearer:
        spec["security"] = [{"bearer": []}]
    if parameters:
        spec["parameters"] = list(parameters)
    if body is not None:
        spec["requestBody"] = {"required": True, "content": {"application/json": {"schema": body}}}
    spec["responses"] = {**responses, **(AUTH_ERRORS if bearer else {})}
    return operation(method, spec)


# gate_server/asgi.py answers 400 to a query parameter holding a NUL character, so no text
# parameter may hold one.
NO_NUL = r"^[^\x00]*$"
# Python's whitespace, which str.strip() removes: listed rather than written as \s, whose
# ECMA-262 (JSON schema) meaning takes U+FEFF and leaves U+001C-U+001F and U+0085.
_BLANK = "\t-\r\x1c- \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
# No NUL and not blank: the handlers strip these parameters and headers and refuse what is left
# empty.
NOT_BLANK = rf"^[^\x00]*[^\x00{_BLANK}][^\x00]*$"
# What gate_server/domain/accepts.py's check_reason takes: after str.strip(), 1 to 2000 characters
# with no C0 control but tab and line breaks (the margins strip() removes may hold any blank).
_MARGIN = f"[{_BLANK}]*"
_KEPT = "[^\\x00-\\x08\\x0b\\x0c\\x0e-\\x1f\\x7f]"
_KEPT_NOT_BLANK = f"[^\\x00-\\x08\\x0b\\x0c\\x0e-\\x1f\\x7f{_BLANK}]"
ACCEPT_REASON = {
    "type": "string",
    "pattern": f"^{_MARGIN}{_KEPT_NOT_BLANK}(?:{_KEPT}{{0,1998}}{_KEPT_NOT_BLANK})?{_MARGIN}$",
}


def header(name: str, description: str | None = None, **schema: Any) -> dict[str, Any]:
    """A required string header parameter (`schema`: more keywords, such as the code's bounds)."""
    found = {"name": name, "in": "header", "required": True, "schema": {"type": "string", **schema}}
    return found if description is None else {**found, "description": description}


def query(
    name: str,
    schema_type: str,
    *,
    pattern: str | None = None,
    max_length: int | None = None,
    required: bool = False,
) -> dict[str, Any]:
    """A query parameter; a string one has the pattern (by default: no NUL character) and the
    length bound the code checks."""
    schema: dict[str, Any] = {"type": schema_type}
    if schema_type == "string":
        schema["pattern"] = NO_NUL if pattern is None else pattern
    if max_length is not None:
        schema["maxLength"] = max_length
    return {"name": name, "in": "query", "required": required, "schema": schema}


def schema_routes(routes: Iterable[BaseRoute], prefix: str = "") -> Iterable[tuple[str, str, Any]]:
    """(path, method, endpoint) for every route that belongs in the schema."""
    for route in routes:
        if isinstance(route, Mount):
            yield from schema_routes(route.routes or [], prefix + route.path)
        elif isinstance(route, Route) and route.include_in_schema:
            for method in sorted(route.methods or []):
                if method != "HEAD":
                    yield prefix + route.path, method.lower(), route.endpoint


def _path_parameters(path: str) -> list[dict[str, Any]]:
    return [
        {"name": name, "in": "path", "required": True, "schema": {"type": "string"}}
        for name in re.findall(r"{([^}:]+)(?::[^}]*)?}", path)
    ]


def _object(required: list[str], **props: Any) -> dict[str, Any]:
    return {"type": "object", "required": required, "properties": props}


_STR: dict[str, Any] = {"type": "string"}
_WORKLOAD = {
    "type": "string",
    "description": "the workload's path in the repository, normalised: baselines are kept "
    "per (repository, base branch, environment, workload)",
}
_COMPARISONS = {"type": "array", "items": {"$ref": "#/components/schemas/ConfigComparison"}}
_INCONCLUSIVE = {
    "oneOf": [{"type": "null"}, {"$ref": "#/components/schemas/Inconclusive"}],
    "description": "set when a PASS or WARN could not have seen a block-sized slowdown: the "
    "widest resolution of its undecided configurations, which exceeds the block threshold",
}
_BASELINE = {
    "oneOf": [
        {"type": "null"},
        _object(
            ["branch", "environment", "run_ids", "shas"],
            branch=_STR,
            environment=_STR,
            workload={
                "type": "string",
                "description": "the workload compared (its normalised path); in every answer "
                "since baselines are kept per workload (schema version 5), absent from the "
                "stored answers of runs uploaded before",
            },
            run_ids={"type": "array", "items": _STR},
            shas={"type": "array", "items": _STR},
        ),
    ]
}
_ANSWERS: dict[str, Any] = {
    "KeptTrace": _object(
        ["run_id", "name", "bytes", "stored"],
        run_id=_STR,
        name=_STR,
        bytes={"type": "integer", "description": "the gzip bytes kept"},
        stored={"type": "boolean", "description": "false: the same bytes were kept before"},
    ),
    "UploadAnswer": _object(
        ["run_id", "tier", "reasons", "comparisons", "baseline", "is_baseline", "url", "receipt"],
        run_id=_STR,
        tier={"enum": ["PASS", "WARN", "BLOCK"]},
        reasons={"type": "array", "items": _STR},
        comparisons=_COMPARISONS,
        inconclusive=_INCONCLUSIVE,
        baseline=_BASELINE,
        is_baseline={"type": "boolean"},
        url=_STR,
        receipt={"type": "string", "description": "JWT signed by the server"},
    ),
    "RunView": _object(
        [
            "run_id",
            "repository",
            "sha",
            "workload",
            "tier",
            "reasons",
            "comparisons",
            "is_baseline",
        ],
        run_id=_STR,
        repository=_STR,
        sha=_STR,
        branch=_STR,
        base_branch=_STR,
        event=_STR,
        environment=_STR,
        workload=_WORKLOAD,
        tier={"enum": ["PASS", "WARN", "BLOCK"]},
        reasons={"type": "array", "items": _STR},
        comparisons=_COMPARISONS,
        inconclusive=_INCONCLUSIVE,
        baseline=_BASELINE,
        url=_STR,
        receipt=_STR,
        received_at=_STR,
        is_baseline={"type": "boolean"},
        accepted={"type": ["object", "null"]},
        document={"type": "object"},
    ),
    "Acceptance": _object(
        [
            "run_id",
            "baseline_branch",
            "environment",
            "workload",
            "accepted_at",
            "accepted_by",
            "reason",
        ],
        run_id=_STR,
        baseline_branch=_STR,
        environment=_STR,
        workload=_WORKLOAD,
        accepted_at=_STR,
        accepted_by=_STR,
        reason=_STR,
        via=_STR,
        already_accepted={"type": "boolean"},
    ),
    "Baseline": _object(
        ["repository", "branch", "environment", "workload", "run_ids", "documents", "gate"],
        repository=_STR,
        branch={"type": "string", "description": "the base branch, by the name it has now"},
        environment=_STR,
        workload=_WORKLOAD,
        run_ids={"type": "array", "items": _STR, "description": "newest first"},
        documents={
            "type": "array",
            "items": {"$ref": "#/components/schemas/ResultsDocument"},
            "description": "the baseline runs' results documents as uploaded, newest first",
        },
        gate=_object(
            ["block_threshold", "rope", "probability"],
            block_threshold={"type": "number"},
            rope={"type": "number"},
            probability={"type": "number"},
        ),
    ),
    "ReceiptKey": _object(
        ["algorithm", "kid", "public_key_pem"], algorithm=_STR, kid=_STR, public_key_pem=_STR
    ),
    "ChangePoint": _object(
        [
            "id",
            "repository",
            "branch",
            "environment",
            "workload",
            "configuration",
            "before_run_id",
            "before_sha",
            "after_run_id",
            "after_sha",
            "ratio",
            "low",
            "high",
            "detected_at",
            "status",
        ],
        id={"type": "integer"},
        repository=_STR,
        branch=_STR,
        environment=_STR,
        workload=_WORKLOAD,
        configuration={"type": "string", "description": "runtime/dtype/bsN"},
        before_run_id={"type": "string", "description": "the last run before the change"},
        before_sha=_STR,
        after_run_id={"type": "string", "description": "the first run after the change"},
        after_sha=_STR,
        ratio={"type": "number", "description": "later/earlier typical time"},
        low={"type": "number", "description": "90% interval of the ratio"},
        high={"type": "number"},
        p_value={"type": "number"},
        early={
            "type": "boolean",
            "description": "found in a short history, too few runs for the rank test: "
            "weaker evidence (docs/statistics.md#change-points)",
        },
        drift={"type": "boolean", "description": "a gradual change from after_sha to end_sha"},
        end_run_id={"type": ["string", "null"], "description": "a drift's newest-level run"},
        end_sha={"type": ["string", "null"]},
        detected_at=_STR,
        status={"enum": ["open", "acknowledged", "resolved"]},
        note={"type": ["string", "null"]},
        acknowledged_at={"type": ["string", "null"]},
        acknowledged_by={"type": ["string", "null"]},
        resolved_at={"type": ["string", "null"]},
        undoes_id={
            "type": ["integer", "null"],
            "description": "the earlier change point this one takes back (both resolved)",
        },
        compare_url={"type": "string", "description": "GitHub's compare view of the commits"},
    ),
    "ChangePoints": _object(
        ["change_points"],
        change_points={"type": "array", "items": {"$ref": "#/components/schemas/ChangePoint"}},
    ),
    "AutoSyncLink": _object(
        ["repository", "branch", "workload", "created_by", "created_at"],
        repository=_STR,
        branch=_STR,
        workload=_WORKLOAD,
        created_by={"type": "string", "description": "who linked it (token or GitHub user)"},
        created_at=_STR,
        created={"type": "boolean", "description": "false: it was linked before"},
    ),
    "AutoSyncLinks": _object(
        ["links", "recent"],
        links={"type": "array", "items": {"$ref": "#/components/schemas/AutoSyncLink"}},
        recent={
            "type": "array",
            "description": "the newest auto-sync commits, oldest first: sha, branch, reason "
            "(touched, every-n), state (queued, dispatching, dispatched, skipped, refused), "
            "workloads, note",
        },
    ),
    "AutoSyncUnlinked": _object(
        ["removed"],
        removed={"type": "object", "description": "repository, branch and workload unlinked"},
    ),
    "Bisection": _object(
        ["change_point_id", "state", "steps"],
        change_point_id={"type": "integer"},
        id={"type": "integer"},
        state={"enum": ["none", "running", "found", "stopped", "cancelled"]},
        commits={"type": "integer", "description": "commits in the change point's range"},
        culprit={
            "type": ["object", "null"],
            "description": "sha, author, pull_request, url, pull_request_url",
        },
        range={"type": "object", "description": "the narrowed range: after (exclusive), to"},
        reason={"type": ["string", "null"], "description": "why it ended without a culprit"},
        steps={
            "type": "array",
            "items": _object(
                ["sha", "attempt", "state"],
                sha=_STR,
                attempt={"type": "integer"},
                state={"enum": ["dispatching", "dispatched", "measured"]},
                side={"type": ["string", "null"]},
                run_id={"type": ["string", "null"]},
                evidence={
                    "type": ["object", "null"],
                    "description": "ratio and 90% interval against the before and after ends",
                },
            ),
        },
    ),
}


def _state_upload_rules(schemas: dict[str, Any]) -> None:
    """Add to the results document's schemas the checks of rnx/schema.py's validators and of
    gate_server/domain/uploads.py that JSON Schema 2020-12 can state, so a schema-valid upload is
    not refused for them."""
    samples = schemas["Samples"]["properties"]
    for column in ("ns", "round", "process"):
        samples[column]["maxItems"] = MAX_SAMPLES_PER_SIDE
    workload = schemas["Workload"]["properties"]
    # Control characters: the model refuses them in both paths, workload_identity DEL in `path`.
    workload["path"]["pattern"] = "^[^\\x00-\\x1f\\x7f]*$"
    workload["base_path"]["anyOf"][0]["pattern"] = "^[^\\x00-\\x1f]*$"
    reason = {"type": "string", "minLength": 1}
    schemas["Configuration"]["if"] = {"properties": {"status": {"not": {"const": "ok"}}}}
    schemas["Configuration"]["then"] = {"required": ["reason"], "properties": {"reason": reason}}
    # GitRef.is_pull_request, which _check_limits requires a base branch of.
    pull_request = {
        "anyOf": [
            {"required": ["pr_number"], "properties": {"pr_number": {"type": "integer"}}},
            {"required": ["event"], "properties": {"event": {"pattern": "^pull_request"}}},
        ]
    }
    schemas["GitRef"]["if"] = pull_request
    schemas["GitRef"]["then"] = {
        "required": ["base_branch"],
        "properties": {"base_branch": {"type": "string"}},
    }
    paired = {"required": ["mode"], "properties": {"mode": {"const": "paired"}}}
    no_base_samples = {"properties": {"base_samples": {"type": "null"}}}
    schemas["ResultsDocument"]["if"] = {"properties": {"settings": paired}}
    schemas["ResultsDocument"]["else"] = {
        "properties": {"configurations": {"items": no_base_samples}}
    }


def _components() -> dict[str, Any]:
    results = ResultsDocument.model_json_schema(ref_template=_REF)
    report = GateReport.model_json_schema(ref_template=_REF)
    schemas: dict[str, Any] = {}
    for model in (results, report):
        schemas.update(model.pop("$defs", {}))
    # parse_results refuses a document without schema_version (the model's default of 1 only
    # serves the code that writes documents), so an upload must carry it.
    results["required"] = sorted({*results.get("required", []), "schema_version"})
    schemas["ResultsDocument"] = results
    _state_upload_rules(schemas)
    schemas["GateReport"] = report
    schemas.update(_ANSWERS)
    schemas["Error"] = {
        "type": "object",
        "required": ["error"],
        "properties": {
            "error": {
                "type": "object",
                "required": ["code", "message", "details"],
                "properties": {
                    "code": {"type": "string"},
                    "message": {"type": "string"},
                    "details": {"type": "array", "items": {}},
                },
            }
        },
    }
    return schemas


def openapi_document(routes: Iterable[BaseRoute], *, version: str) -> dict[str, Any]:
    paths: dict[str, dict[str, Any]] = {}
    for path, method, endpoint in schema_routes(routes):
        spec = getattr(endpoint, "__openapi__", {}).get(method)
        if spec is None:
            continue
        clean = re.sub(r"{([^}:]+):[^}]*}", r"{\1}", path)
        op = dict(spec)
        # Every route answers 400 to a NUL character in its query (gate_server/asgi.py).
        op["responses"] = {"400": QUERY_ERROR, **op.get("responses", {})}
        params = _path_parameters(path)
        if params:
            op["parameters"] = params + list(op.get("parameters", []))
        paths.setdefault(clean, {})[method] = op
    return {
        "openapi": "3.1.0",
        "info": {"title": "rnx-benchmark gate server", "version": version},
        "paths": paths,
        "components": {
            "schemas": _components(),
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
    }
