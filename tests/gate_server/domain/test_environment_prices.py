"""`rnx environment price|prices|list` and migration 8's environment_prices, on SQLite and
PostgreSQL: an environment is priced by its key or its name, never one no run carries."""

from __future__ import annotations

import pytest
from starlette.testclient import TestClient

from gate_server.asgi import create_app
from gate_server.db import Database, audit, prices
from gate_server.settings import ServerSettings
from rnx_cli.main import main
from testbed.factories import body, make_results
from testbed.gate_helpers import create_token, signed_headers


def _upload(url: str, workspace: str, environments: dict[str, str | None]) -> None:
    """A run of each environment (key: name) uploaded to `workspace`, through the API."""
    token = create_token(url, workspace=workspace, repository=f"{workspace}/kernels")
    with TestClient(create_app(ServerSettings(database_url=url))) as app:
        for i, (key, name) in enumerate(environments.items()):
            doc = make_results(repository=f"{workspace}/kernels", environment=key, seed=i)
            doc = doc.model_copy(
                update={"environment": doc.environment.model_copy(update={"name": name})}
            )
            data = body(doc)
            r = app.post("/api/v1/runs", content=data, headers=signed_headers(token.secret, data))
            assert r.status_code == 201, r.text


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
    _upload(database_url, "acme", {"env-h200": "h200", "env-cpu": None})
    capsys.readouterr()
    assert main(["environment", "price", "env-h200", "3.50", *url]) == 0
    assert capsys.readouterr().out.strip() == "acme: env-h200 costs 3.5 per hour"
    assert main(["environment", "price", "env-cpu", "0.1", *url]) == 0
    assert main(["environment", "price", "h200", "2.75", *url]) == 0  # by name; changed, not added
    assert capsys.readouterr().out.splitlines()[-1] == "acme: h200 (env-h200) costs 2.75 per hour"
    assert _prices(database_url, "acme") == {"env-cpu": 0.1, "env-h200": 2.75}
    capsys.readouterr()
    assert main(["environment", "prices", *url]) == 0
    assert capsys.readouterr().out.splitlines() == ["env-cpu  0.1", "env-h200  2.75"]
    assert main(["environment", "list", *url]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "KEY       NAME                  PRICE/HOUR",
        "env-cpu   -                     0.1",
        "env-h200  h200                  2.75",
    ]
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
        _upload(database_url, workspace, {"env-a": "a"})
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


@pytest.mark.parametrize("given", ["env a/b", "env-h100", "h100", "H200"])
def test_unknown_environments_are_refused_not_stored(database_url, capsys, given) -> None:
    url = ["--database-url", database_url]
    _upload(database_url, "acme", {"env-h200": "h200"})
    capsys.readouterr()
    assert main(["environment", "price", given, "1", *url]) == 2
    err = capsys.readouterr().err
    assert f"no run of workspace acme has an environment named or keyed {given!r}" in err
    assert "rnx environment list" in err
    assert _prices(database_url, "acme") == {}


def test_a_name_two_environments_share_takes_the_key(database_url, capsys) -> None:
    url = ["--database-url", database_url]
    _upload(database_url, "acme", {"env-1": "gpu", "env-2": "gpu"})
    capsys.readouterr()
    assert main(["environment", "price", "gpu", "1", *url]) == 2
    assert "several environments are named 'gpu' (env-1, env-2)" in capsys.readouterr().err
    assert main(["environment", "price", "env-2", "1", *url]) == 0
