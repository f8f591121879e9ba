"""How long migration 5 (runs.workload, read from every stored document) takes to open a
version-4 database, on SQLite and PostgreSQL.

    .venv/bin/python -m benchmarks.server.migration_workloads [--runs 20000] [--db
    sqlite|postgresql|both]

A version-4 database (testbed/schema_v4.py) is filled with `--runs` runs whose
documents are real results documents of 8 configurations x 30 samples (about 6.4 KB each),
spread over four workloads (one spelled with a leading ./), every hundredth one unreadable
bytes; then the time of open_database(), which applies migration 5 in one transaction, is
measured, and the workloads it wrote are counted. Every process that starts waits for the
migration (PostgreSQL: on its advisory lock), so this is how long an upgrade keeps a server
from answering.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import tempfile
import time
from collections import Counter
from datetime import datetime, timedelta, timezone
from pathlib import Path

from sqlalchemy import create_engine, insert, select

from gate_server.db import open_database
from gate_server.db.schema import runs as runs_table
from testbed import schema_v3 as v3
from testbed import schema_v4 as v4
from testbed.factories import body, make_results
from testbed.gate_helpers import fresh_postgres_schema, postgres_base_url

WORKLOADS = ("kernels/attention.py", "./kernels/other.py", "kernels/norm.py", "models/m.onnx")
WHEN = datetime(2026, 1, 1, tzinfo=timezone.utc)


def fill(url: str, count: int) -> None:
    v4.build_v4_database(url)
    documents = [body(make_results(workload=w, seed=i)) for i, w in enumerate(WORKLOADS)]
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            v3.add_repository(conn, WHEN)
            for start in range(0, count, 1000):
                rows = [_row(i, documents) for i in range(start, min(start + 1000, count))]
                conn.execute(insert(v4.runs), rows)
    finally:
        engine.dispose()


def _row(i: int, documents: list[bytes]) -> dict[str, object]:
    data = b"not a document" if i % 100 == 99 else documents[i % len(documents)]
    when = WHEN + timedelta(seconds=i)
    return {
        "run_id": f"{i:08x}-0000-4000-8000-{i:012x}",
        "workspace_id": 1,
        "repository_id": 1,
        "sha": f"{i:040x}",
        "branch": "main",
        "event": "push",
        "environment_key": "bench-env",
        "tier": "PASS",
        "answer": json.dumps({"tier": "PASS"}),
        "document": data,
        "body_sha256": hashlib.sha256(data).hexdigest(),
        "signature": "sha256=bench",
        "created_at": when,
        "received_at": when,
        "baseline_branch": "main",
        "baseline_at": when,
    }


def measure(engine: str, count: int) -> None:
    with tempfile.TemporaryDirectory(prefix="rnx-migration-") as tmp:
        drop = None
        if engine == "sqlite":
            url = f"sqlite:///{Path(tmp) / 'v4.db'}"
        else:
            url, drop = fresh_postgres_schema(postgres_base_url())
        try:
            t0 = time.perf_counter()
            fill(url, count)
            filled = time.perf_counter() - t0
            t0 = time.perf_counter()
            database = open_database(url)
            migrated = time.perf_counter() - t0
            try:
                with database.read() as conn:
                    found = Counter(conn.execute(select(runs_table.c.workload)).scalars())
            finally:
                database.close()
        finally:
            if drop is not None:
                drop()
    print(
        f"{engine:<11} {count:>8,} runs: filled in {filled:.1f} s; migration 5 took "
        f"{migrated:.2f} s ({count / migrated:,.0f} runs/s)"
    )
    print(f"{'':<11} workloads written: {dict(sorted(found.items()))}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20_000)
    parser.add_argument("--db", choices=("sqlite", "postgresql", "both"), default="both")
    args = parser.parse_args()
    engines = ("sqlite", "postgresql") if args.db == "both" else (args.db,)
    print(f"migration 5 on a version-4 database of {args.runs:,} runs (~6.4 KB documents)")
    for engine in engines:
        measure(engine, args.runs)


if __name__ == "__main__":
    main()
