"""Hostile input against the real gate server, at length: schemathesis over every operation in
/openapi.json with no token, a CI token and a viewer token, valid and invalid data, and signed
uploads of generated valid documents (testbed/fuzz.py has how).

    .venv/bin/python -m benchmarks.reliability.fuzz_api [--examples 40] [--database
    sqlite|postgresql|both]

schemathesis runs with all its checks (`--checks all`, positive_data_acceptance included). Prints
one line per (operation, token, mode) and the failures, then a total per database (both by
default: SQLite, then PostgreSQL), with its count of 5xx answers.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from testbed.fuzz import run
from testbed.gate_helpers import fresh_postgres_schema, postgres_base_url


def fuzz_database(kind: str, work: Path, examples: int, seed: int) -> bool:
    """One fuzz run against a fresh database of `kind`; True when nothing failed."""
    drop = None
    if kind == "sqlite":
        db = f"sqlite:///{work / 'fuzz.db'}"
    else:
        db, drop = fresh_postgres_schema(postgres_base_url())
    try:
        total = run(db, work, examples=examples, random_seed=seed)
    finally:
        if drop is not None:
            drop()
    print()
    for failure in dict.fromkeys(total.failures):
        print("FAIL", failure[:400])
    print(
        f"total ({kind}): {total.cases} cases sent ({total.unsendable} generated cases not "
        f"sendable as HTTP), {len(total.failures)} failed, "
        f"{sum(v for k, v in total.statuses.items() if k >= 500)} answers 5xx, "
        f"{total.tracebacks} tracebacks in the server log, {total.seconds:.0f} s; statuses: "
        + " ".join(f"{k}x{v}" for k, v in sorted(total.statuses.items())),
        flush=True,
    )
    return not (total.failures or total.tracebacks)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--examples", type=int, default=40, help="cases per operation, token, mode")
    p.add_argument("--database", choices=["sqlite", "postgresql", "both"], default="both")
    p.add_argument("--seed", type=int, default=0, help="hypothesis seed (cases differ per seed)")
    args = p.parse_args(argv)
    kinds = ["sqlite", "postgresql"] if args.database == "both" else [args.database]
    clean = True
    for kind in kinds:
        work = Path(tempfile.mkdtemp(prefix=f"rnx-fuzz-{kind}-"))
        clean = fuzz_database(kind, work, args.examples, args.seed) and clean
    return 0 if clean else 1


if __name__ == "__main__":
    raise SystemExit(main())
