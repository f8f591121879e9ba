"""The database layout that schema version 4 wrote (the server before baselines were kept per
workload), frozen here so a test can build such a database and open it with today's code.

Version 4 is version 3 (schema_v3.py) with server_keys.private_key_pem renamed `secret`; its
runs table has no workload. Never edit these definitions: they are what databases in the field
hold.
"""

from __future__ import annotations

from datetime import datetime, timezone

from sqlalchemy import create_engine, insert

from testbed import schema_v3 as v3

# Version 4 changed no table the tests write rows to: its runs are version 3's.
runs = v3.runs

VERSION_4 = "server_keys.private_key_pem renamed secret (it also holds an HMAC key)"


def build_v4_database(url: str) -> None:
    """An empty database at schema version 4, as `rnx serve` of that time left it."""
    v3.build_v3_database(url)
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            conn.exec_driver_sql("ALTER TABLE server_keys RENAME COLUMN private_key_pem TO secret")
            conn.execute(
                insert(v3.migrations).values(
                    version=4, name=VERSION_4, applied_at=datetime(2026, 2, 1, tzinfo=timezone.utc)
                )
            )
    finally:
        engine.dispose()
