"""The server's own secret keys: made by the first process that needs one, then shared by all."""

from __future__ import annotations

from collections.abc import Callable

from gate_server.db import Database, audit, keys


def stored_key(database: Database, name: str, generate: Callable[[], str]) -> str:
    """The key called `name` in the database; the first process to ask stores `generate()`,
    and every other uses that one (a process losing the race takes the winner's)."""
    with database.read() as conn:
        found = keys.get(conn, name, database.sealer)
    if found is not None:
        return found
    with database.write() as conn:
        if keys.add(conn, name, generate(), database.sealer):
            audit.record(conn, actor="server", action="server_key.create", subject=name)
        stored = keys.get(conn, name, database.sealer)
    if stored is None:  # only a concurrent delete could do this, and nothing deletes keys
        raise RuntimeError(f"the server key {name!r} vanished while it was being stored")
    return stored
