"""/audit shows an admin's command-line changes to the viewer's own workspace (prices, alert
channels and rules), and none of another workspace's, on SQLite and PostgreSQL."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from gate_server.asgi import create_app
from gate_server.settings import ServerSettings
from rnx_cli.main import main
from testbed.gate_helpers import create_token
from tests.gate_server.domain.test_environment_prices import _upload


def _actions(app: TestClient, secret: str) -> list[tuple[str, str]]:
    page = app.get("/audit", headers={"Authorization": f"Bearer {secret}"})
    assert page.status_code == 200
    rows = re.findall(
        r"<code>([a-z_.]+)</code></td>\s*<td class=\"nowrap\">([^<]*)</td>", page.text
    )
    return [(action, subject.strip()) for action, subject in rows]


def test_the_audit_page_shows_the_workspaces_admin_changes(
    database_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = ["--database-url", database_url]
    for workspace in ("acme", "acme.eu"):
        _upload(database_url, workspace, {"env-h200": "h200"})
        assert main(["environment", "price", "h200", "3.5", "--workspace", workspace, *url]) == 0
    secret = tmp_path / "hook"
    secret.write_text("https://hooks.slack.com/services/T0/B0/XYZ")
    add = ["notify", "add", "slack", "--secret-file", str(secret), *url]
    assert main([*add, "--workspace", "acme", "--name", "ops"]) == 0
    assert main([*add, "--workspace", "acme.eu", "--name", "eu-ops"]) == 0
    capsys.readouterr()
    acme = create_token(database_url, viewer=True)
    with TestClient(create_app(ServerSettings(database_url=database_url))) as app:
        shown = _actions(app, acme.secret)
    admin = [a for a in shown if a[0].startswith(("environment.", "notify."))]
    assert [a for a, _ in admin] == ["notify.rule.add", "notify.channel.add", "environment.price"]
    assert ("environment.price", "acme/env-h200") in admin
    assert "XYZ" not in str(shown)
    assert len([a for a in shown if a[0] == "notify.channel.add"]) == 1  # not acme.eu's
