"""Upload the profile traces a run kept (harness.keep-traces) after the run itself.

Each trace the uploaded document names (`profile.trace`, `base_profile.trace`) and the job
kept is sent as the gzip of its JSON to PUT /api/v1/runs/{run_id}/traces/{name}, signed like
the run. Failing open: a trace that does not reach the server is a warning, never the
build's failure, and a server that cannot be reached is not asked again for the rest.
"""

from __future__ import annotations

import gzip
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import quote

import httpx

from action.upload import UPLOAD_PATH, Credential, describe_transport, error_message, sign
from rnx.schema import ResultsDocument

TIMEOUT_S = 60.0


def kept_traces(document: ResultsDocument, trace_dir: Path) -> list[Path]:
    """The trace files the document names that are in trace_dir, in the document's order."""
    names = []
    for c in document.configurations:
        for profile in (c.profile, c.base_profile):
            if profile is not None and profile.trace and profile.trace not in names:
                names.append(profile.trace)
    return [trace_dir / n for n in names if (trace_dir / n).is_file()]


def upload_traces(
    document: ResultsDocument,
    run_id: str,
    trace_dir: Path,
    *,
    url: str,
    credential: Callable[[], Credential | None],
    transport: httpx.BaseTransport | None = None,
    user_agent: str = "rnx-benchmark-action",
) -> tuple[int, list[str]]:
    """(traces kept by the server, a warning per trace that was not). `credential()` gives a
    fresh credential per request: the server spends an OIDC token on first use."""
    kept, problems = 0, []
    with httpx.Client(transport=transport, follow_redirects=False) as client:
        for path in kept_traces(document, trace_dir):
            cred = credential()
            if cred is None:
                return kept, ["no credential left to upload the traces with"]
            body = gzip.compress(path.read_bytes(), mtime=0)
            timestamp = str(int(time.time()))
            endpoint = f"{url.rstrip('/')}{UPLOAD_PATH}/{run_id}/traces/{quote(path.name)}"
            try:
                r = client.put(
                    endpoint,
                    content=body,
                    timeout=TIMEOUT_S,
                    headers={
                        "Authorization": f"Bearer {cred.secret}",
                        "Content-Type": "application/octet-stream",
                        "User-Agent": user_agent,
                        "X-Kernalin-Timestamp": timestamp,
                        "X-Kernalin-Signature": sign(cred.secret, timestamp, body),
                    },
                )
            except httpx.HTTPError as e:
                problems.append(f"trace {path.name}: {describe_transport(e, url)}")
                break
            if r.status_code in (200, 201):
                kept += 1
            else:
                problems.append(f"trace {path.name}: {r.status_code} {error_message(r)}")
    return kept, problems
