"""Where the CPU time of one upload goes inside the gate server, stage by stage, on SQLite.

    .venv/bin/python -m benchmarks.server.upload_stages [--uploads 300]

The server's own ingest_run (gate_server/domain/uploads.py) in this process, without HTTP: six
baseline pushes, then pull-request uploads of 8 configurations x 30 samples re-gated against
them, with the stages that ingest_run calls timed by process_time (CPU, so the neighbours on a
shared machine only add waiting); the token lookup that every request makes is timed apart.
benchmarks/server/server_load.py gives the whole server process's CPU per upload over HTTP beside
it.
"""

from __future__ import annotations

import argparse
import functools
import os
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.server.server_load import ENV, REPO, pr_bodies, prepare
from gate_server.db import open_database, runs, tokens
from gate_server.domain import uploads
from gate_server.domain.auth import authenticate, hash_token
from gate_server.domain.receipts import load_signer
from gate_server.domain.stored_documents import StoredDocuments
from gate_server.settings import load_settings
from testbed.factories import body, make_results

STAGES = {
    uploads: ("parse_upload", "candidates", "_regate", "_store", "_receipt"),
    runs: ("is_stored",),
}


def timed(spent: Counter[str], name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        start = time.process_time()
        try:
            return fn(*args, **kwargs)
        finally:
            spent[name] += time.process_time() - start

    return run


def measure(workdir: Path, count: int) -> tuple[float, float, Counter[str]]:
    url = f"sqlite:///{workdir / 'stages.db'}"
    secret = prepare(url)[0]
    settings = load_settings({"RNX_DATABASE_URL": url})
    database = open_database(url)
    spent: Counter[str] = Counter()
    for module, names in STAGES.items():
        for name in names:
            setattr(module, name, timed(spent, name, getattr(module, name)))
    try:
        signer = load_signer(database, settings.receipt_key_pem)
        with database.read() as conn:
            token = tokens.by_hash(conn, hash_token(secret))
        assert token is not None
        documents = StoredDocuments()

        def ingest(data: bytes) -> None:
            answer = uploads.ingest_run(
                database, settings, signer, token, data, "sha256=x", "http://x", documents=documents
            )
            assert answer.stored, answer.body

        for i in range(6):
            ingest(body(make_results(repository=REPO, environment=ENV, seed=10_000 + i)))
        bodies = pr_bodies(count + 3, 20_000)
        for data in bodies[:3]:  # warm: imports, caches
            ingest(data)
        spent.clear()
        start = time.process_time()
        for data in bodies[3:]:
            ingest(data)
        total = time.process_time() - start
        start = time.process_time()
        for _ in range(count):
            authenticate(database, f"Bearer {secret}")
        auth = time.process_time() - start
    finally:
        for module, names in STAGES.items():
            for name in names:
                setattr(module, name, getattr(module, name).__wrapped__)
        database.close()
    return total / count, auth / count, spent


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--uploads", type=int, default=300, help="timed uploads (300)")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        per_upload, auth, spent = measure(Path(tmp), args.uploads)
    print(
        f"ingest_run, SQLite, 8 configurations x 30 samples against 6 baseline runs; CPU ms per "
        f"upload, {args.uploads} uploads; load average {os.getloadavg()[0]:.1f} on "
        f"{os.cpu_count()} cores"
    )
    print(f"  ingest_run            {1000 * per_upload:6.2f}")
    for name, seconds in spent.most_common():
        print(f"    {name:<19} {1000 * seconds / args.uploads:6.2f}")
    rest = per_upload - sum(spent.values()) / args.uploads
    print(f"    {'(the rest)':<19} {1000 * rest:6.2f}")
    print(f"  token lookup          {1000 * auth:6.2f}  (every request, before ingest_run)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
