"""A scheduled run's report, in-process on SQLite and PostgreSQL: every scheduled upload on a
baseline branch (event `schedule`), whatever its tier, sends a report to the channels whose
rules name scheduled-report (Slack, Teams, email, webhook: real loopback receivers), with what
moved against the previous scheduled run and the baseline of a month ago, and the open change
points; rules that name no events get the alarms only."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import update

from gate_server.clock import utcnow
from gate_server.db import Database, bisections
from gate_server.db.schema import runs
from gate_server.domain.alerts import channels
from testbed.gate_helpers import insert_change_point
from testbed.receivers import HttpReceiver, SmtpReceiver
from tests.gate_server.domain.alerting import (
    PUBLIC,
    Alerting,
    check_slack_blocks,
    check_teams_card,
)

CONFIGS = (("pytorch_eager", "float32", 1), ("pytorch_eager", "float32", 8))
BS8 = "pytorch_eager/float32/bs8"
REPORT = ("scheduled_report",)


def _sha(c: str) -> str:
    return c * 40


def _history(alerting: Alerting) -> list[dict[str, Any]]:
    """A month-old baseline (a), a push (b), then three scheduled runs: unchanged (c), bs8 10%
    slower (d), everything 1.5x slower (e, a BLOCK)."""
    month_old = alerting.upload(configs=CONFIGS, seed=1, sha=_sha("a"))
    with alerting.storage.write() as conn:  # stored 31 days ago
        conn.execute(
            update(runs)
            .where(runs.c.run_id == month_old["run_id"])
            .values(baseline_at=utcnow() - timedelta(days=31))
        )
    alerting.upload(configs=CONFIGS, seed=2, sha=_sha("b"))
    scheduled = [
        alerting.upload(configs=CONFIGS, seed=3, sha=_sha("c"), event="schedule"),
        alerting.upload(
            configs=CONFIGS,
            seed=4,
            sha=_sha("d"),
            event="schedule",
            slowdown={BS8: 1.10},
        ),
        alerting.upload(configs=CONFIGS, seed=5, sha=_sha("e"), event="schedule", slowdown=1.5),
    ]
    assert [s["tier"] for s in scheduled][2] == "BLOCK"
    return scheduled


def _open_change_point(storage: Database) -> int:
    with storage.write() as conn:
        found = insert_change_point(
            conn,
            environment_key="linux-x86_64-cpu-test",
            configuration=BS8,
            before_sha=_sha("1"),
            after_sha=_sha("2"),
        )
        # Its bisection found the culprit (gate_server/domain/bisection/): the report says so.
        bisection = bisections.create(conn, found, 1, [{"sha": _sha("2")}])
        bisections.finish(
            conn, bisection, bisections.FOUND, culprit_sha=_sha("2"), culprit_author="octocat"
        )
    return found


def test_every_scheduled_run_sends_its_report_to_the_channels_that_name_it(
    alerting: Alerting,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    smtp = SmtpReceiver(tmp_path).start()
    monkeypatch.setenv("SSL_CERT_FILE", str(smtp.ca_file))
    teams = HttpReceiver(status=202).start()
    alarms = HttpReceiver().start()
    alerting.channel(smtp.channel(), "mail", events=REPORT)
    alerting.channel(
        channels.slack_channel(alerting.receivers["slack"].url), "slack", events=REPORT
    )
    alerting.channel(channels.teams_channel(teams.url + "/workflows/x"), "teams", events=REPORT)
    alerting.channel(
        channels.webhook_channel(alerting.receivers["hook"].url), "hook", events=REPORT
    )
    alerting.channel(channels.slack_channel(alarms.url), "alarms")  # no events named
    change_id = _open_change_point(alerting.storage)
    try:
        scheduled = _history(alerting)
        # A pull request's scheduled-looking run is no scheduled run of main.
        alerting.upload(configs=CONFIGS, seed=6, event="pull_request", pr_number=4)
        alerting.drain()
        alerting.drain()
    finally:
        smtp.stop()
        teams.stop()
        alarms.stop()

    # The rule that names no events: the BLOCK alarm, no report.
    (alarm,) = alarms.received
    assert alarm.json()["text"].startswith("BLOCK on acme/kernels main")

    hooks = {h.json()["data"]["run_id"]: h.json() for h in alerting.receivers["hook"].received}
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

    assert len(alerting.receivers["slack"].received) == 3 and len(teams.received) == 3
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
    for message in alerting.receivers["slack"].received:
        check_slack_blocks(message.json())
    for message in teams.received:
        (attachment,) = message.json()["attachments"]
        check_teams_card(attachment["content"])
