"""Environments' hourly prices, per workspace: set by an admin, read by the /hardware page."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import func, insert, select, update
from sqlalchemy.engine import Connection

from gate_server.clock import utcnow
from gate_server.db.schema import environment_prices, runs, workspaces


def workspace_ids(conn: Connection) -> dict[str, int]:
    """Every workspace's id by name (an admin command picks one)."""
    rows = conn.execute(select(workspaces.c.name, workspaces.c.id).order_by(workspaces.c.name))
    return {str(r.name): int(r.id) for r in rows}


def set_price(conn: Connection, workspace_id: int, environment: str, price_per_hour: float) -> bool:
    """Set (or change) an environment's hourly price; True when it had none before."""
    now = utcnow()
    changed = conn.execute(
        update(environment_prices)
        .where(environment_prices.c.workspace_id == workspace_id)
        .where(environment_prices.c.environment_key == environment)
        .values(price_per_hour=price_per_hour, updated_at=now)
    ).rowcount
    if changed:
        return False
    conn.execute(
        insert(environment_prices).values(
            workspace_id=workspace_id,
            environment_key=environment,
            price_per_hour=price_per_hour,
            updated_at=now,
        )
    )
    return True


def of_environments(
    conn: Connection, workspace_id: int, environments: Sequence[str]
) -> dict[str, float]:
    """The hourly prices set for these environments, by environment key (unpriced ones absent)."""
    if not environments:
        return {}
    rows = conn.execute(
        select(environment_prices.c.environment_key, environment_prices.c.price_per_hour)
        .where(environment_prices.c.workspace_id == workspace_id)
        .where(environment_prices.c.environment_key.in_(list(environments)))
    )
    return {str(r.environment_key): float(r.price_per_hour) for r in rows}


def of_workspace(conn: Connection, workspace_id: int) -> list[tuple[str, float]]:
    """Every price set in the workspace, by environment key."""
    rows = conn.execute(
        select(environment_prices.c.environment_key, environment_prices.c.price_per_hour)
        .where(environment_prices.c.workspace_id == workspace_id)
        .order_by(environment_prices.c.environment_key)
    )
    return [(str(r.environment_key), float(r.price_per_hour)) for r in rows]


def newest_run_per_environment(conn: Connection, workspace_id: int) -> dict[str, str]:
    """Every environment key the workspace's runs carry, with its newest run's id (whose stored
    document names the environment)."""
    newest = (
        select(func.max(runs.c.id))
        .where(runs.c.workspace_id == workspace_id)
        .group_by(runs.c.environment_key)
    )
    rows = conn.execute(select(runs.c.environment_key, runs.c.run_id).where(runs.c.id.in_(newest)))
    return {str(r.environment_key): str(r.run_id) for r in rows}
