"""A scheduled run's report, in-process on SQLite and PostgreSQL: every scheduled upload on a
baseline branch (event `schedule`), whatever its tier, sends a report to the channels whose
rules name scheduled-report (Slack, Teams, email, webhook: real loopback receivers), with what
moved against the previous scheduled run and the baseline of a month ago, and the open change
points; rules that name no events get the alarms only."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import update
from starlette.testclient import TestClient

from gate_server.clock import utcnow
from gate_server.db import Database, bisections, change_points
from gate_server.db.change_points import NewChangePoint
from gate_server.db.schema import runs
from gate_server.domain.alerts import channels
from gate_server.settings import ServerSettings
from testbed.gate_helpers import Token
from testbed.receivers import HttpReceiver, SmtpReceiver
from tests.gate_server.domain import test_alerts_delivery as delivery

CONFIGS = (("pytorch_eager", "float32", 1), ("pytorch_eager", "float32", 8))
BS8 = "pytorch_eager/float32/bs8"
REPORT = ("scheduled_report",)
# The alert tests' server, token and receivers (fixtures), and their helpers.
app, settings, token, receivers = (
    delivery.app,
    delivery.settings,
    delivery.token,
    delivery.receivers,
)
PUBLIC, drain, _channel, _upload = (
    delivery.PUBLIC,
    delivery.drain,
    delivery._channel,
    delivery._upload,
)


def _sha(c: str) -> str:
    return c * 40


def _history(app: TestClient, token: Token, storage: Database) -> list[dict[str, Any]]:
    """A month-old baseline (a), a push (b), then three scheduled runs: unchanged (c), bs8 10%
    slower (d), everything 1.5x slower (e, a BLOCK)."""
    month_old = _upload(app, token, configs=CONFIGS, seed=1, sha=_sha("a"))
    with storage.write() as conn:  # stored 31 days ago
        conn.execute(
            update(runs)
            .where(runs.c.run_id == month_old["run_id"])
            .values(baseline_at=utcnow() - timedelta(days=31))
        )
    _upload(app, token, configs=CONFIGS, seed=2, sha=_sha("b"))
    scheduled = [
        _upload(app, token, configs=CONFIGS, seed=3, sha=_sha("c"), event="schedule"),
        _upload(
            app,
            token,
            configs=CONFIGS,
            seed=4,
            sha=_sha("d"),
            event="schedule",
            slowdown={BS8: 1.10},
        ),
        _upload(app, token, configs=CONFIGS, seed=5, sha=_sha("e"), event="schedule", slowdown=1.5),
    ]
    assert [s["tier"] for s in scheduled][2] == "BLOCK"
    return scheduled


def _open_change_point(storage: Database) -> int:
    with storage.write() as conn:
        found = change_points.insert_new(
            conn,
            NewChangePoint(
                repository_id=1,
                branch="main",
                environment_key="linux-x86_64-cpu-test",
                workload="kernels/attention.py",
                configuration=BS8,
                before_run_id="11111111-1111-4111-8111-111111111111",
                before_sha=_sha("1"),
                after_run_id="22222222-2222-4222-8222-222222222222",
                after_sha=_sha("2"),
                ratio=1.18,
                low=1.12,
                high=1.25,
                p_value=0.001,
                early=False,
                end_run_id=None,
                end_sha=None,
            ),
            undoes_id=None,
        )
        assert found is not None
        # Its bisection found the culprit (gate_server/domain/bisection/): the report says so.
        bisection = bisections.create(conn, found, 1, [{"sha": _sha("2")}])
        bisections.finish(
            conn, bisection, bisections.FOUND, culprit_sha=_sha("2"), culprit_author="octocat"
        )
    return found


def test_every_scheduled_run_sends_its_report_to_the_channels_that_name_it(
    app: TestClient,
    token: Token,
    storage: Database,
    settings: ServerSettings,
    receivers: dict[str, HttpReceiver],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    smtp = SmtpReceiver(tmp_path).start()
    monkeypatch.setenv("SSL_CERT_FILE", str(smtp.ca_file))
    teams = HttpReceiver(status=202).start()
    alarms = HttpReceiver().start()
    mail = channels.email_channel(
        host="127.0.0.1",
        port=smtp.port,
        user=smtp.user,
        password=smtp.password,
        sender="gate@example.com",
        to=["perf@example.com"],
    )
    _channel(storage, mail, "mail", events=REPORT)
    _channel(storage, channels.slack_channel(receivers["slack"].url), "slack", events=REPORT)
    _channel(storage, channels.teams_channel(teams.url + "/workflows/x"), "teams", events=REPORT)
    _channel(storage, channels.webhook_channel(receivers["hook"].url), "hook", events=REPORT)
    _channel(storage, channels.slack_channel(alarms.url), "alarms")  # no events named
    change_id = _open_change_point(storage)
    try:
        scheduled = _history(app, token, storage)
        # A pull request's scheduled-looking run is no scheduled run of main.
        _upload(app, token, configs=CONFIGS, seed=6, event="pull_request", pr_number=4)
        drain(storage, settings)
        drain(storage, settings)
    finally:
        smtp.stop()
        teams.stop()
        alarms.stop()

    # The rule that names no events: the BLOCK alarm, no report.
    (alarm,) = alarms.received
    assert alarm.json()["text"].startswith("BLOCK on acme/kernels main")

    hooks = {h.json()["data"]["run_id"]: h.json() for h in receivers["hook"].received}
    assert sorted(hooks) == sorted(s["run_id"] for s in scheduled)
    first, slower, blocked = (hooks[s["run_id"]]["data"] for s in scheduled)
    assert hooks[scheduled[0]["run_id"]]["event"] == "scheduled_report"
    assert first["against_previous"] is None  # the first scheduled run
    assert first["against_month_ago"]["sha"] == _sha("a")
    assert first["against_month_ago"]["moved"] == []
    assert slower["tier"] in ("PASS", "WARN") and slower["configurations"] == 2
    assert slower["against_previous"]["sha"] == _sha("c")
    (moved,) = slower["against_previous"]["moved"]
    assert moved["configuration"] == BS8 and moved["verdict"] == "slower"
    assert 1.05 < moved["ratio"] < 1.15 and moved["low"] > 1
    assert [m["configuration"] for m in slower["against_month_ago"]["moved"]] == [BS8]
    assert blocked["tier"] == "BLOCK" and blocked["against_previous"]["sha"] == _sha("d")
    assert len(blocked["against_month_ago"]["moved"]) == 2
    assert [c["id"] for c in slower["open_change_points"]] == [change_id]
    bisected = slower["open_change_points"][0]["bisection"]
    assert bisected["state"] == "found" and bisected["culprit_author"] == "octocat"
    links = slower["links"]
    assert links["run"] == f"{PUBLIC}/runs/{scheduled[1]['run_id']}"
    assert links["commits"] == f"https://github.com/acme/kernels/compare/{_sha('c')}...{_sha('d')}"
    assert links["dashboard"].startswith(f"{PUBLIC}/repos/acme/kernels?branch=main")
    assert links["dashboard"].endswith("--pytorch_eager-float32-bs8")  # the chart that moved

    assert len(receivers["slack"].received) == 3 and len(teams.received) == 3
    assert len(smtp.messages) == 3
    text = {m["X-Kernalin-Delivery"]: m.get_payload(decode=True).decode() for m in smtp.messages}
    body = next(t for t in text.values() if f"at {_sha('d')[:12]}" in t)
    assert f"Against the previous scheduled run ({_sha('c')[:12]}): {BS8}: 1.1" in body
    assert (
        f"#{change_id} {BS8} 1.18x at {_sha('2')[:12]} (bisected: {_sha('2')[:12]} by octocat)"
        in body
    )
    subjects = sorted(str(m["Subject"]) for m in smtp.messages)
    assert subjects[0].startswith("[kernalin] Scheduled run on acme/kernels main at ")
    _valid_slack([r.json() for r in receivers["slack"].received])
    _valid_teams([r.json() for r in teams.received])


def _valid_slack(sent: list[dict[str, Any]]) -> None:
    from slack_sdk.models.blocks import Block

    for message in sent:
        for block_json in message["blocks"]:
            parsed = Block.parse(block_json)
            assert parsed is not None
            parsed.validate_json()
            assert parsed.to_dict() == block_json


def _valid_teams(sent: list[dict[str, Any]]) -> None:
    import jsonschema

    vendor = Path(__file__).parents[2] / "data" / "vendor" / "adaptive-card-1.4.json"
    schema = json.loads(vendor.read_text(encoding="utf-8"))
    checker = jsonschema.Draft6Validator.FORMAT_CHECKER
    for message in sent:
        (attachment,) = message["attachments"]
        jsonschema.Draft6Validator(schema, format_checker=checker).validate(attachment["content"])
