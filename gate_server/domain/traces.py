"""Profile traces kept with their runs (harness.keep-traces, docs/profiles.md).

`rnx gate` uploads each Chrome trace its run's document names after the run itself, as the
gzip of the trace's JSON: PUT /api/v1/runs/{run_id}/traces/{name}. Only a name the stored
document gives a profile (`profile.trace` or `base_profile.trace`) is taken, by a CI token of
the run's repository, so a token stores no file the run did not produce; the body must inflate,
within MAX_TRACE_JSON_BYTES, to a JSON trace (torch.profiler's object with `traceEvents`, or
ONNX Runtime's list of events). A trace is stored once: the same bytes again change nothing,
other bytes are refused. Readers get the gzip bytes back, served as the JSON they hold.
"""

from __future__ import annotations

import hashlib
import json
import zlib
from collections.abc import Callable
from typing import Any

from gate_server.clock import utcnow
from gate_server.db import Database, runs, traces
from gate_server.db.runs import RunRecord
from gate_server.db.tokens import CI, TokenRecord
from gate_server.domain.runs import check_run_id, may_see
from gate_server.errors import Conflict, Forbidden, InvalidInput, NotFound, TooLarge

# What one trace may inflate to: a few profiled calls of a configuration are well under it
# (tens of MB would be thousands of kernels per call), and a gzip bomb stops here.
MAX_TRACE_JSON_BYTES = 256 * 1024 * 1024


def named_traces(document: bytes) -> set[str]:
    """The trace file names a stored results document gives its profiles."""
    doc = json.loads(document)
    out = set()
    for c in doc.get("configurations") or []:
        for key in ("profile", "base_profile"):
            name = (c.get(key) or {}).get("trace")
            if isinstance(name, str):
                out.add(name)
    return out


def check_trace(body: bytes) -> None:
    """Refuse a body that is not the gzip of a JSON trace."""
    inflater = zlib.decompressobj(wbits=31)  # gzip framing
    try:
        text = inflater.decompress(body, MAX_TRACE_JSON_BYTES)
    except zlib.error:
        raise InvalidInput(
            "the trace must be gzip-compressed JSON (gzip the .json file rnx bench kept)",
            code="invalid_trace",
        ) from None
    if inflater.unconsumed_tail:
        raise TooLarge(
            f"the trace inflates past {MAX_TRACE_JSON_BYTES} bytes, more than a trace of a few "
            "calls can be; profile fewer calls or leave harness.keep-traces off",
            code="trace_too_large",
        )
    try:
        data = json.loads(text)
    except (UnicodeDecodeError, ValueError):
        raise InvalidInput("the trace is not JSON", code="invalid_trace") from None
    if not (isinstance(data, list) or (isinstance(data, dict) and "traceEvents" in data)):
        raise InvalidInput(
            "the trace is JSON but not a Chrome trace (an object with traceEvents, or a list "
            "of events)",
            code="invalid_trace",
        )


def store_trace(
    database: Database, token: TokenRecord, run_id: str, name: str, body: bytes
) -> dict[str, Any]:
    """Keep a run's trace; {"run_id", "name", "bytes", "stored"} (stored False: it was)."""
    run_id = check_run_id(run_id)
    if token.kind != CI:
        raise Forbidden("only the CI token that uploads runs uploads their traces", code="ci_only")
    with database.read() as conn:
        run = runs.by_run_id(conn, run_id)
        if run is None or not may_see(token, run):
            raise NotFound(f"no run {run_id} that this token may see", code="run_not_found")
        document = runs.document(conn, run_id)
    if document is None or name not in named_traces(document):
        raise NotFound(
            f"run {run_id} names no trace {name[:200]!r}: upload the traces the run's results "
            "document names (profile.trace), under those names",
            code="trace_not_named",
        )
    check_trace(body)
    digest = hashlib.sha256(body).hexdigest()
    with database.write() as conn:
        stored = traces.stored_sha256(conn, run_id, name)
        if stored is None:
            traces.add(conn, run_id, name, body, digest, utcnow())
    if stored is not None and stored != digest:
        raise Conflict(f"run {run_id} already has another trace {name!r}", code="trace_exists")
    return {"run_id": run_id, "name": name, "bytes": len(body), "stored": stored is None}


def read_trace(
    database: Database, run_id: str, name: str, *, visible: Callable[[RunRecord], bool]
) -> bytes:
    """The gzip bytes of a kept trace of a run the reader may see (`visible`: a token's
    scope, or a dashboard viewer's workspace)."""
    run_id = check_run_id(run_id)
    with database.read() as conn:
        run = runs.by_run_id(conn, run_id)
        found = traces.body(conn, run_id, name) if run is not None and visible(run) else None
    if found is None:
        raise NotFound(
            f"no kept trace {name[:200]!r} of a run {run_id} you may see", code="trace_not_found"
        )
    return found
