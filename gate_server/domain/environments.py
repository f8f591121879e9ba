"""A workspace's environments as an admin names them: the key runs carry, and the name their
newest run's document gives it (`rnx environment list`, `rnx environment price NAME|KEY`)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from sqlalchemy.engine import Connection

from gate_server.db import prices, runs
from gate_server.errors import InvalidInput
from rnx.environments import EnvironmentLabel, stored_environment_label


@dataclass(frozen=True)
class KnownEnvironment:
    key: str
    name: str | None  # environment.name of its newest run; None when that run names none
    price_per_hour: float | None


def _name_in(document: bytes) -> str | None:
    # Only the name is needed: a stored document that no longer parses still lists its key.
    try:
        data: Any = json.loads(document)
    except ValueError:
        return None
    env = data.get("environment") if isinstance(data, dict) else None
    name = env.get("name") if isinstance(env, dict) else None
    return name if isinstance(name, str) and name.strip() else None


def document_label(document: bytes | None, key: str) -> EnvironmentLabel:
    """What to call the environment of a stored run, from its document (alerts, which have
    no page to hover on, show it with the key); the key alone when the document is missing
    or no longer parses."""
    try:
        data: Any = json.loads(document) if document else None
    except ValueError:
        data = None
    raw = data.get("environment") if isinstance(data, dict) else None
    return stored_environment_label(raw, key=key)


def known_environments(conn: Connection, workspace_id: int) -> list[KnownEnvironment]:
    """Every environment the workspace's runs carry, by key; also keys priced before any run."""
    newest = prices.newest_run_per_environment(conn, workspace_id)
    documents = runs.documents(conn, list(newest.values()))
    priced = dict(prices.of_workspace(conn, workspace_id))
    return [
        KnownEnvironment(key, _name_in(documents.get(newest.get(key, ""), b"")), priced.get(key))
        for key in sorted(set(newest) | set(priced))
    ]


def environment_key(known: list[KnownEnvironment], given: str, workspace: str) -> str:
    """The key `given` names: a key, or a name that exactly one environment has."""
    if any(e.key == given for e in known):
        return given
    named = [e.key for e in known if e.name is not None and e.name == given]
    if len(named) == 1:
        return named[0]
    if named:
        raise InvalidInput(
            f"several environments are named {given!r} ({', '.join(named)}); give the key"
        )
    raise InvalidInput(
        f"no run of workspace {workspace} has an environment named or keyed {given!r}; "
        "`rnx environment list` shows their keys and names"
    )
