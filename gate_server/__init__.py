"""The gate server: stores signed benchmark runs, chooses baselines and re-gates them."""

from __future__ import annotations

__all__ = ["create_app"]


def __getattr__(name: str) -> object:
    # Importing the package must stay cheap (the CLI imports gate_server.cli.main only).
    if name == "create_app":
        from gate_server.asgi import create_app

        return create_app
    raise AttributeError(name)
