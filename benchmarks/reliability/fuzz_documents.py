"""Valid results documents with one field at a boundary value, signed and uploaded to the real
server on SQLite and PostgreSQL, at length (testbed/document_fuzz.py has the cases; the
suite runs a few hundred of them).

    .venv/bin/python -m benchmarks.reliability.fuzz_documents [--cases 2500] [--db
    sqlite,postgresql] [--seed 0]

Per database: one `rnx serve` on loopback, a baseline on main, then --cases fuzzed uploads, each
followed by a normal pull-request upload that must still get its verdict. Prints the counts;
exits 1 on any 5xx, reset connection or lost verdict.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from hypothesis import HealthCheck, given, seed, settings

from testbed.document_fuzz import Case, Tally, Uploader, cases, known_cases, seed_baseline
from testbed.gate_helpers import (
    create_token,
    fresh_postgres_schema,
    postgres_base_url,
    start_server,
)


def fuzz_one(database_url: str, workdir: Path, count: int, random_seed: int) -> Tally:
    token = create_token(database_url, branches=("main",))
    server = start_server(database_url, workdir)
    uploader = Uploader(server.url, token.secret)
    tally = Tally()
    try:
        seed_baseline(uploader)
        for known in known_cases():
            uploader.check(known, tally)

        @seed(random_seed)
        @settings(
            max_examples=count,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        @given(cases())
        def one(case: Case) -> None:
            uploader.check(case, tally)

        one()
    finally:
        uploader.close()
        server.stop()
    tracebacks = server.log.read_text().count("Traceback")
    if tracebacks:
        tally.server_errors.append(f"{tracebacks} tracebacks in the server log ({server.log})")
    return tally


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cases", type=int, default=2500, help="fuzzed uploads per database")
    p.add_argument("--db", default="sqlite,postgresql")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    failed = False
    with tempfile.TemporaryDirectory(prefix="rnx-fuzz-docs-") as tmp:
        for name in [d.strip() for d in args.db.split(",") if d.strip()]:
            drop = None
            if name == "sqlite":
                url = f"sqlite:///{Path(tmp) / 'fuzz.db'}"
            else:
                url, drop = fresh_postgres_schema(postgres_base_url())
            start = time.monotonic()
            try:
                tally = fuzz_one(url, Path(tmp), args.cases, args.seed)
            finally:
                if drop is not None:
                    drop()
            print(f"{name:<11} {tally.line()}; {time.monotonic() - start:.0f} s", flush=True)
            for problem in [*tally.server_errors, *tally.lost_verdicts][:20]:
                print(f"{name:<11} FAIL {problem[:300]}")
            failed |= bool(tally.server_errors or tally.lost_verdicts)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
