"""`rnx environment price|prices` and migration 8's environment_prices, on SQLite and PostgreSQL."""

from __future__ import annotations

from gate_server.db import Database, audit, prices
from rnx_cli.main import main


def _prices(url: str, workspace: str) -> dict[str, float]:
    db = Database(url)
    try:
        with db.read() as conn:
            workspace_id = prices.workspace_ids(conn)[workspace]
            return dict(prices.of_workspace(conn, workspace_id))
    finally:
        db.close()


def test_set_change_and_list_prices(database_url, capsys) -> None:
    url = ["--database-url", database_url]
    assert main(["token", "create", "--workspace", "acme", "--viewer", *url]) == 0
    capsys.readouterr()
    assert main(["environment", "price", "env-h200", "3.50", *url]) == 0
    assert capsys.readouterr().out.strip() == "acme: env-h200 costs 3.5 per hour"
    assert main(["environment", "price", "env-cpu", "0.1", *url]) == 0
    assert main(["environment", "price", "env-h200", "2.75", *url]) == 0  # changed, not added
    assert _prices(database_url, "acme") == {"env-cpu": 0.1, "env-h200": 2.75}
    capsys.readouterr()
    assert main(["environment", "prices", *url]) == 0
    assert capsys.readouterr().out.splitlines() == ["env-cpu  0.1", "env-h200  2.75"]
    db = Database(database_url)
    try:
        with db.read() as conn:
            entries = [e for e in audit.entries(conn) if e["action"] == "environment.price"]
    finally:
        db.close()
    assert [e["subject"] for e in entries] == ["acme/env-h200", "acme/env-cpu", "acme/env-h200"]


def test_several_workspaces_need_workspace(database_url, capsys) -> None:
    url = ["--database-url", database_url]
    assert main(["environment", "price", "env-a", "1", *url]) == 2
    assert "no workspace yet" in capsys.readouterr().err
    for workspace in ("acme", "globex"):
        assert main(["token", "create", "--workspace", workspace, "--viewer", *url]) == 0
    capsys.readouterr()
    assert main(["environment", "price", "env-a", "1", *url]) == 2
    assert "say which workspace with --workspace (acme, globex)" in capsys.readouterr().err
    assert main(["environment", "price", "env-a", "1", "--workspace", "initech", *url]) == 2
    assert "no workspace 'initech'" in capsys.readouterr().err
    assert main(["environment", "price", "env-a", "1.5", "--workspace", "globex", *url]) == 0
    assert _prices(database_url, "globex") == {"env-a": 1.5}
    assert _prices(database_url, "acme") == {}


def test_bad_prices_and_keys_are_refused(database_url, capsys) -> None:
    url = ["--database-url", database_url]
    for price in ("-1", "nan", "inf", "cheap"):
        try:
            code = main(["environment", "price", "env-a", price, *url])
        except SystemExit as e:  # argparse's own exit for a bad argument
            code = int(e.code or 0)
        assert code == 2
        assert "is not an hourly price" in capsys.readouterr().err
    assert main(["environment", "price", "env a/b", "1", *url]) == 2
    assert "is not an environment key" in capsys.readouterr().err
