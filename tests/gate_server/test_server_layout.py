"""What docs/server.md says of the server's code stays true: every SQL statement is in
gate_server/db/, no function is longer than 80 lines, no assert steers the program, and only
the command line speaks in CLI errors (UserError)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SERVER = Path(__file__).resolve().parents[2] / "gate_server"
MODULES = sorted(SERVER.rglob("*.py"))
# What server code outside gate_server/db/ may take from SQLAlchemy: the connection's type
# (query functions take one) and its exceptions (the edges answer them).
ALLOWED_OUTSIDE_DB = {"sqlalchemy.engine": {"Connection"}, "sqlalchemy.exc": None}


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def _name(path: Path) -> str:
    return str(path.relative_to(SERVER.parent))


@pytest.mark.parametrize(
    "path", [p for p in MODULES if "db" not in p.relative_to(SERVER).parts], ids=_name
)
def test_every_sql_statement_is_in_gate_server_db(path: Path) -> None:
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.Import):
            assert not any(a.name.startswith("sqlalchemy") for a in node.names), _name(path)
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("sqlalchemy"):
            allowed = ALLOWED_OUTSIDE_DB.get(node.module or "", set())
            names = {a.name for a in node.names}
            assert allowed is None or names <= allowed, f"{_name(path)}:{node.lineno} {names}"
        if isinstance(node, ast.Attribute) and node.attr in ("execute", "exec_driver_sql"):
            raise AssertionError(f"{_name(path)}:{node.lineno} runs SQL outside gate_server/db/")


@pytest.mark.parametrize("path", MODULES, ids=_name)
def test_no_function_is_longer_than_80_lines(path: Path) -> None:
    for node in ast.walk(_tree(path)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            lines = (node.end_lineno or node.lineno) - node.lineno + 1
            assert lines <= 80, f"{_name(path)}:{node.lineno} {node.name} has {lines} lines"


@pytest.mark.parametrize("path", MODULES, ids=_name)
def test_no_assert_and_no_cli_error_in_the_core(path: Path) -> None:
    """An assert vanishes under python -O; a UserError (an exit code) means nothing to HTTP."""
    for node in ast.walk(_tree(path)):
        assert not isinstance(node, ast.Assert), f"{_name(path)}:{node.lineno} asserts"
        if isinstance(node, ast.ImportFrom) and node.module == "rnx.errors":
            assert _name(path) == "gate_server/cli/main.py", f"{_name(path)} imports rnx.errors"
