"""`rnx notify add|list|remove` on both engines: secrets are read from standard input or a file,
never printed by `list`, never written to the audit log; mistakes are one line naming the fix."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest

from gate_server.cli.main import main
from gate_server.db import alerts, audit, open_database
from testbed.gate_helpers import create_token
from testbed.receivers import SmtpReceiver

SLACK_URL = "https://hooks.slack.com/services/T0001/B0002/SlackSecretPart"
TEAMS_URL = "https://prod.westus.logic.azure.com/workflows/1/triggers/manual?sig=TeamsSecretSig"
SMTP_PASSWORD = "smtp-Secret-Pa55"


def _notify(monkeypatch: pytest.MonkeyPatch, url: str, *argv: str, stdin: str = "") -> int:
    monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    return main(["notify", *argv, "--database-url", url])


def test_add_list_remove_without_showing_secrets(
    database_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    create_token(database_url)  # workspace acme, repository acme/kernels
    add = ("add", "--workspace", "acme")
    assert _notify(monkeypatch, database_url, *add, "slack", "--name", "perf", stdin=SLACK_URL) == 0
    out = capsys.readouterr().out
    assert "channel 1 (slack perf), rule 1" in out and "SlackSecretPart" not in out
    assert (
        _notify(
            monkeypatch,
            database_url,
            *add,
            "teams",
            "--repo",
            "acme/kernels",
            "--events",
            "block,change-point",
            stdin=TEAMS_URL + "\n",
        )
        == 0
    )
    capsys.readouterr()
    assert (
        _notify(monkeypatch, database_url, *add, "webhook", stdin="https://ci.example.com/k") == 0
    )
    captured = capsys.readouterr()
    signing = captured.out.strip()  # the one line on standard output
    assert signing.startswith("rnx_whsec_") and "\n" not in signing
    assert "shown only this once" in captured.err and "channel 3 (webhook" in captured.err
    assert (
        _notify(
            monkeypatch,
            database_url,
            *add,
            "email",
            "--smtp-host",
            "smtp.example.com",
            "--smtp-user",
            "alerts",
            "--from",
            "gate@example.com",
            "--to",
            "perf@example.com,oncall@example.com",
            "--no-check",  # no such server: the check is tested below
            stdin=SMTP_PASSWORD,
        )
        == 0
    )
    # One more rule for an existing channel.
    assert (
        _notify(
            monkeypatch, database_url, *add, "--channel", "perf", "--events", "accepted-slowdown"
        )
        == 0
    )
    capsys.readouterr()

    assert _notify(monkeypatch, database_url, "list") == 0
    listed = capsys.readouterr().out
    assert _notify(monkeypatch, database_url, "list", "--json", "--workspace", "acme") == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["name"], r["kind"]) for r in rows] == [
        ("perf", "slack"),
        ("teams", "teams"),
        ("webhook", "webhook"),
        ("email", "email"),
    ]
    assert rows[0]["target"] == "https://hooks.slack.com/… (the rest is secret)"
    assert [r["events"] for r in rows[0]["rules"]] == [
        ["accepted_slowdown", "block", "change_point", "channel_failing"],
        ["accepted_slowdown"],
    ]
    assert rows[1]["rules"][0] == {
        "id": 2,
        "repository": "acme/kernels",
        "events": ["block", "change_point"],
    }
    assert rows[3]["target"] == (
        "smtp://alerts@smtp.example.com:587 -> perf@example.com, oncall@example.com"
    )

    database = open_database(database_url)
    try:
        with database.read() as conn:
            log = json.dumps(audit.entries(conn), default=str)
            assert alerts.channel_secret(conn, 4, database.sealer) == {"password": SMTP_PASSWORD}
    finally:
        database.close()
    for secret in ("SlackSecretPart", "TeamsSecretSig", signing, SMTP_PASSWORD, "ci.example.com/k"):
        assert secret not in listed and secret not in json.dumps(rows) and secret not in log

    assert _notify(monkeypatch, database_url, "remove", "1") == 0
    assert _notify(monkeypatch, database_url, "remove", "--rule", "2") == 0
    assert _notify(monkeypatch, database_url, "list", "--json") == 0
    out = capsys.readouterr().out
    rows = json.loads(out[out.index("[") :])
    assert [r["name"] for r in rows] == ["teams", "webhook", "email"]
    assert rows[0]["rules"] == []
    database = open_database(database_url)
    try:
        with database.read() as conn:
            assert (
                alerts.channel_secret(conn, 1, database.sealer) == {}
            )  # a removed channel's secret is wiped
    finally:
        database.close()


def test_the_secret_can_come_from_a_file(
    database_url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    create_token(database_url)
    secret = tmp_path / "slack-url"
    secret.write_text(SLACK_URL + "\n")
    argv = ("add", "slack", "--workspace", "acme", "--secret-file", str(secret))
    assert _notify(monkeypatch, database_url, *argv) == 0
    database = open_database(database_url)
    try:
        with database.read() as conn:
            assert alerts.channel_secret(conn, 1, database.sealer) == {"url": SLACK_URL}
    finally:
        database.close()


@pytest.mark.parametrize(
    ("argv", "stdin", "says"),
    [
        (("add", "slack", "--workspace", "nope"), SLACK_URL, "no workspace 'nope'"),
        (("add", "slack", "--workspace", "acme"), "", "give the Slack incoming-webhook URL"),
        (("add", "slack", "--workspace", "acme"), "http://hooks.slack.com/x", "https://"),
        (("add", "slack", "--workspace", "acme", "--events", "blok"), SLACK_URL, "'blok'"),
        (("add", "slack", "--workspace", "acme", "--repo", "acme/other"), SLACK_URL, "no repo"),
        (("add", "slack", "--workspace", "acme", "--name", "a b"), SLACK_URL, "channel name"),
        (("add", "--workspace", "acme"), "", "say which kind of channel"),
        (("add", "--workspace", "acme", "--channel", "none"), "", "no channel 'none'"),
        (("add", "email", "--workspace", "acme"), "", "needs --smtp-host, --from and --to"),
        (
            ("add", "email", "--workspace", "acme", "--smtp-host", "h", "--from", "x@y.z"),
            "",
            "--to needs at least one address",
        ),
        (
            ("add", "email", "--workspace", "acme", "--smtp-host", "h", "--from", "x@y.z")
            + ("--to", "a@b.c", "--smtp-user", "u"),
            "",
            "give the SMTP password",
        ),
        (("remove", "9"), "", "no channel 9"),
        (("remove", "9", "--rule"), "", "no rule 9"),
    ],
)
def test_mistakes_are_one_line(
    database_url: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    argv: tuple[str, ...],
    stdin: str,
    says: str,
) -> None:
    create_token(database_url)
    assert _notify(monkeypatch, database_url, *argv, stdin=stdin) == 2
    err = capsys.readouterr().err
    assert says in err and len(err.strip().splitlines()) == 1, err
    assert "SlackSecretPart" not in err


def test_a_channel_name_is_taken_once_per_workspace(
    database_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    create_token(database_url)
    argv = ("add", "slack", "--workspace", "acme")
    assert _notify(monkeypatch, database_url, *argv, stdin=SLACK_URL) == 0
    assert _notify(monkeypatch, database_url, *argv, stdin=SLACK_URL) == 2
    assert "has a channel named 'slack' already" in capsys.readouterr().err


def test_notify_test_sends_one_message_now(
    database_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from testbed.receivers import HttpReceiver

    create_token(database_url)
    up = HttpReceiver().start()
    down = HttpReceiver(fail=lambda n: True).start()
    try:
        add = ("add", "slack", "--workspace", "acme")
        assert _notify(monkeypatch, database_url, *add, stdin=up.url + "/T/B/UpSecret") == 0
        argv = (*add, "--name", "down")
        assert _notify(monkeypatch, database_url, *argv, stdin=down.url + "/T/B/DownSecret") == 0
        capsys.readouterr()
        assert _notify(monkeypatch, database_url, "test", "1") == 0
        assert "channel 1 (slack slack): test message delivered" in capsys.readouterr().out
        assert _notify(monkeypatch, database_url, "test", "2") == 2
        err = capsys.readouterr().err
    finally:
        up.stop()
        down.stop()
    (got,) = up.received
    assert got.json()["text"].startswith("Test alert for channel slack of workspace acme")
    assert "the test message was not delivered: HTTP 503" in err
    assert "DownSecret" not in err and len(err.strip().splitlines()) == 1


def test_adding_an_email_channel_checks_starttls_the_certificate_and_the_login(
    database_url: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    create_token(database_url)
    (tmp_path / "tls").mkdir()
    (tmp_path / "plain").mkdir()
    secure = SmtpReceiver(tmp_path / "tls").start()
    clear = SmtpReceiver(tmp_path / "plain", starttls=False).start()
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)

    def add(port: int, password: str, *extra: str) -> tuple[int, str]:
        argv = ("add", "email", "--workspace", "acme", "--smtp-host", "127.0.0.1")
        argv += ("--smtp-port", str(port), "--smtp-user", "alerts", "--from", "gate@example.com")
        argv += ("--to", "perf@example.com", "--name", f"mail-{port}-{len(extra)}", *extra)
        code = _notify(monkeypatch, database_url, *argv, stdin=password)
        return code, capsys.readouterr().err

    try:
        code, err = add(clear.port, clear.password)
        assert code == 2 and "does not offer STARTTLS" in err and "never sent in clear" in err
        code, err = add(secure.port, secure.password)  # a CA this machine does not trust
        assert code == 2 and "certificate is not trusted" in err and "SSL_CERT_FILE" in err
        monkeypatch.setenv("SSL_CERT_FILE", str(secure.ca_file))  # an internal CA, trusted
        code, err = add(secure.port, "wrong-password")
        assert code == 2 and "login refused (code 535)" in err and "wrong-password" not in err
        assert add(secure.port, secure.password) == (0, "")
        assert add(clear.port, clear.password, "--no-check")[0] == 0  # the admin's call
    finally:
        secure.stop()
        clear.stop()
    assert secure.messages == [] and clear.messages == []  # a check sends nothing
