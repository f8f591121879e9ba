"""Alerts from what causes them to the receivers, in-process on SQLite and PostgreSQL: the event is
written with the run (or the accept), fanned out to one delivery per matching channel, each sent
with the outbox's retries to real loopback receivers; fanning out twice sends nothing twice; a
channel that keeps failing is marked and reported to the workspace's other channels."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from gate_server.db import alerts, audit, outbox
from gate_server.domain.alerts import channels
from gate_server.domain.alerts.delivery import DELIVER, FAILING_AFTER, fan_out
from gate_server.domain.alerts.traffic import ChannelTraffic
from testbed.factories import body, make_results
from testbed.gate_helpers import create_token, insert_change_point, signed_headers
from testbed.receivers import HttpReceiver, SilentReceiver, SmtpReceiver
from tests.gate_server.domain.alerting import PUBLIC, UPLOAD, Alerting, Svc


def test_a_block_on_main_goes_to_each_matching_channel_once(
    alerting: Alerting,
) -> None:
    alerting.channel(channels.slack_channel(alerting.receivers["slack"].url + "/slack"), "slack")
    spec = channels.webhook_channel(alerting.receivers["hook"].url + "/hook")
    alerting.channel(spec, "hook", repository="acme/kernels", events=("block",))
    # A rule for changes only: a BLOCK is not its business.
    quiet = HttpReceiver().start()
    alerting.channel(channels.slack_channel(quiet.url), "quiet", events=("change_point",))

    alerting.upload(seed=1)  # the baseline
    alerting.upload(seed=2, event="pull_request", pr_number=3, slowdown=1.5)  # a PR: no
    assert alerting.jobs("event.block") == []
    data = body(make_results(seed=3, slowdown=1.5))
    blocked = alerting.app.post(
        UPLOAD, content=data, headers=signed_headers(alerting.token.secret, data)
    ).json()
    assert blocked["tier"] == "BLOCK"
    (event,) = alerting.jobs("event.block")
    assert event.payload["facts"]["run_id"] == blocked["run_id"]
    # The same document again is a retry: answered as before, no second event.
    again = alerting.app.post(
        UPLOAD, content=data, headers=signed_headers(alerting.token.secret, data)
    )
    assert again.status_code == 200
    assert len(alerting.jobs("event.block")) == 1

    alerting.drain()
    alerting.drain()
    quiet.stop()
    (slack,) = alerting.receivers["slack"].received
    (hook,) = alerting.receivers["hook"].received
    assert quiet.received == []
    text = slack.json()["text"]
    assert text.startswith("BLOCK on acme/kernels main at ") and "x slower (+" in text
    links = json.dumps(slack.json()["blocks"])
    assert f"{PUBLIC}/runs/{blocked['run_id']}" in links
    assert "https://github.com/acme/kernels/compare/" in links
    assert f"{PUBLIC}/repos/acme/kernels" in links
    sent = hook.json()
    assert hook.headers["X-Kernalin-Event"] == "block"
    assert hook.headers["X-Kernalin-Delivery"] == sent["delivery_id"]
    assert sent["delivery_id"] not in json.dumps(slack.json())  # one id per channel
    with alerting.storage.read() as conn:
        assert alerts.delivery_counts(conn) == {"deliveries": 2, "delivered": 2}
        assert [j.state for j in outbox.jobs(conn, kind=DELIVER)] == ["done", "done"]


def test_an_accepted_slowdown_says_who_why_and_how_much(
    alerting: Alerting,
) -> None:
    spec = channels.webhook_channel(alerting.receivers["hook"].url)
    alerting.channel(spec, "hook", events=("accepted_slowdown",))
    alerting.upload(seed=1)
    same = alerting.upload(seed=5, event="pull_request", pr_number=4, branch="same")
    slower = alerting.upload(seed=6, event="pull_request", pr_number=5, slowdown=1.3)
    auth = {"Authorization": f"Bearer {alerting.token.secret}"}
    for run in (same, slower):
        r = alerting.app.post(
            f"{UPLOAD}/{run['run_id']}/accept", json={"reason": "memory for speed"}, headers=auth
        )
        assert r.status_code == 200, r.text
    # Accepting a run that is not slower is no news; the slower one is.
    (event,) = alerting.jobs("event.accepted_slowdown")
    assert event.payload["facts"]["run_id"] == slower["run_id"]
    alerting.drain()
    (got,) = alerting.receivers["hook"].received
    sent = got.json()
    assert sent["event"] == "accepted_slowdown"
    assert sent["data"]["accepted_by"] == f"token:{alerting.token.id}"
    assert sent["data"]["reason"] == "memory for speed"
    assert 1.2 < sent["data"]["worst"]["ratio"] < 1.4
    assert sent["title"] == f"Slowdown accepted on acme/kernels main by token:{alerting.token.id}"
    assert sent["data"]["environment_name"] == "test runner"  # the document's name


def test_fanning_out_twice_sends_each_delivery_once(
    alerting: Alerting,
) -> None:
    alerting.channel(channels.slack_channel(alerting.receivers["slack"].url), "slack")
    alerting.upload(seed=1)
    alerting.upload(seed=3, slowdown=1.5)
    (event,) = alerting.jobs("event.block")
    # A process that fanned out and died before marking the job done: it runs again.
    fan_out(Svc(alerting.storage, alerting.settings), event)
    fan_out(Svc(alerting.storage, alerting.settings), event)
    assert len(alerting.jobs(DELIVER)) == 1
    alerting.drain()
    assert len(alerting.receivers["slack"].received) == 1


def test_a_step_in_the_history_of_main_is_alerted_as_a_change_point(
    alerting: Alerting,
) -> None:
    slack = channels.slack_channel(alerting.receivers["slack"].url)
    alerting.channel(slack, "changes", events=("change_point",))
    configs = (("pytorch_eager", "float32", 1), ("pytorch_eager", "float32", 8))
    stepped = "pytorch_eager/float32/bs8"
    for n in range(33):  # 30 runs, then 3 whose bs8 is 10% slower (WARN: they stay baselines)
        factor = 1.10 if n >= 30 else 1.0
        answer = alerting.upload(
            configs=configs, slowdown={stepped: factor}, seed=n, sha=f"{n:040x}"
        )
        assert answer["is_baseline"], answer
    alerting.drain()
    (got,) = alerting.receivers["slack"].received
    text = got.json()["text"]
    assert text.startswith(f"Change point on acme/kernels main at {f'{30:040x}'[:12]}: 1.1")
    assert f"in {stepped}" in text and "x slower (+" in text
    links = json.dumps(got.json()["blocks"])
    assert f"https://github.com/acme/kernels/compare/{29:040x}...{30:040x}" in links
    assert "test runner · key linux-x86_64-cpu-test" in json.dumps(got.json(), ensure_ascii=False)


def test_a_change_point_is_alerted_with_its_commit_range(
    alerting: Alerting,
) -> None:
    alerting.channel(channels.slack_channel(alerting.receivers["slack"].url), "slack")
    before, after = "a" * 40, "b" * 40
    with alerting.storage.write() as conn:
        # early: found in a short history, which the message says.
        change_id = insert_change_point(conn, before_sha=before, after_sha=after, early=True)
        # Another configuration, in another environment, moved at the same commit.
        insert_change_point(
            conn,
            environment_key="a100",
            configuration="pytorch_eager/float16/bs1",
            before_run_id="33333333-3333-4333-8333-333333333333",
            before_sha=before,
            after_run_id="44444444-4444-4444-8444-444444444444",
            after_sha=after,
            ratio=1.31,
            low=1.2,
            high=1.4,
            end_run_id="55555555-5555-4555-8555-555555555555",
            end_sha="c" * 40,
        )
        outbox.enqueue(
            conn,
            "event.change_point",
            {"event": "change_point.detected", "change_point": {"id": change_id}},
        )
    alerting.drain()
    (got,) = alerting.receivers["slack"].received
    sent = got.json()
    assert sent["text"].startswith(f"Change point on acme/kernels main at {after[:12]}")
    assert "1.18x slower (+18.0%, 90% interval 1.12x to 1.25x) in pytorch_eager" in sent["text"]
    links = json.dumps(sent["blocks"])
    assert f"https://github.com/acme/kernels/compare/{before}...{after}" in links
    assert f"{PUBLIC}/runs/22222222-2222-4222-8222-222222222222" in links
    # The dashboard link opens the chart that moved; the message names what moved with it.
    chart = "?branch=main&environment=h200&workload=kernels%2Fattention.py"
    assert (
        f"{PUBLIC}/repos/acme/kernels{chart}#kernels-attention-py--pytorch_eager-float16-bs8|"
        in links
    )
    fields = [f["text"] for f in sent["blocks"][2]["fields"]]
    also = (
        "*Also moved at this commit*\npytorch_eager/float16/bs1 (kernels/attention.py, a100): 1.31x"
    )
    assert also in fields
    assert any(f.startswith("*Early*") and "short history" in f for f in fields)


def test_a_channel_that_keeps_failing_is_reported_to_the_others_once(
    alerting: Alerting,
    caplog: pytest.LogCaptureFixture,
) -> None:
    down = HttpReceiver(fail=lambda n: True).start()
    secret_path = "/services/T9/B9/NeverShowThis"
    broken = alerting.channel(channels.slack_channel(down.url + secret_path), "broken")
    alerting.channel(channels.slack_channel(alerting.receivers["slack"].url), "ops")
    alerting.upload(seed=1)
    alerting.upload(seed=3, slowdown=1.5)
    caplog.set_level(logging.INFO)
    alerting.drain()
    down.stop()
    assert down.refused == 10  # every attempt the outbox allows (MAX_ATTEMPTS)
    # ops got the BLOCK, then one channel_failing about "broken" (after FAILING_AFTER fails).
    events = [r.json()["text"] for r in alerting.receivers["slack"].received]
    assert len(events) == 2 and events[0].startswith("BLOCK")
    assert events[1].startswith("Alert channel broken (slack) keeps failing")
    assert f"{FAILING_AFTER} sends in a row failed" in events[1]
    with alerting.storage.read() as conn:
        marked = alerts.channel(conn, broken)
        failed = [j for j in outbox.jobs(conn, kind=DELIVER) if j.state == "failed"]
    assert marked is not None and marked.failing_since is not None
    assert marked.failures == 10 and (marked.last_error or "").startswith("HTTP 503")
    (job,) = failed
    # The dashboard's overview lists it, with its error and never its secret.
    viewer = create_token(alerting.storage.url, viewer=True).secret
    page = alerting.app.get("/", headers={"Authorization": f"Bearer {viewer}"}).text
    assert "Failing alert channels" in page and 'data-channel="1"' in page
    assert "HTTP 503 Service Unavailable" in page and 'data-channel="2"' not in page
    for where in (caplog.text, job.last_error or "", marked.last_error or "", page):
        assert "NeverShowThis" not in where


def test_a_receiver_that_never_answers_costs_one_timeout_not_one_per_alert(
    alerting: Alerting,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(channels, "HTTP_TIMEOUT_S", 0.3)
    silent = SilentReceiver().start()
    hung = alerting.channel(channels.slack_channel(silent.url + "/hook"), "hung")
    alerting.channel(channels.slack_channel(alerting.receivers["slack"].url), "ops")
    alerting.upload(seed=1)
    for seed in (3, 4, 5):
        alerting.upload(seed=seed, slowdown=1.5)
        alerting.upload(seed=seed + 10)  # a PASS: the next BLOCK is a regression of its own
    # One worker (one process's traffic) runs every job, retries at once included.
    worker = alerting.worker()
    ran = 0
    while ran < 200 and worker.run_once():
        ran += 1
    silent.stop()
    # The first send timed out and parked the channel: its other alerts waited, never sent
    # into the same silence (on main every one of them, every attempt, waited out a timeout).
    assert silent.accepted == 1
    assert [r.json()["text"][:5] for r in alerting.receivers["slack"].received] == ["BLOCK"] * 3
    with alerting.storage.read() as conn:
        marked = alerts.channel(conn, hung)
    assert marked is not None and marked.failures == 1
    assert marked.last_error == "no answer in time (timeout)"


def test_repeated_blocks_of_one_regression_alert_once_until_a_pass(
    alerting: Alerting,
) -> None:
    alerting.channel(channels.slack_channel(alerting.receivers["slack"].url), "ops")
    alerting.upload(seed=1)  # the baseline
    for seed in (3, 4, 5):  # the same regression pushed again and again
        assert alerting.upload(seed=seed, slowdown=1.5)["tier"] == "BLOCK"
    other = alerting.upload(seed=6, slowdown=1.5, environment="a100-cuda12")
    assert other["tier"] == "WARN"  # no baseline there yet: its own key, nothing to group
    assert alerting.upload(seed=7)["tier"] == "PASS"  # fixed
    assert alerting.upload(seed=8, slowdown=1.5)["tier"] == "BLOCK"  # back again: news
    alerting.drain()
    texts = [r.json()["text"] for r in alerting.receivers["slack"].received]
    assert len(texts) == 2 and all(t.startswith("BLOCK") for t in texts)


def test_one_send_per_channel_at_a_time_and_a_timed_out_channel_is_parked() -> None:
    traffic = ChannelTraffic(park_s=3600)
    assert traffic.enter(1) is None and traffic.enter(2) is None
    assert "under way" in (traffic.enter(1) or "")
    traffic.leave(1, timed_out=True)
    assert "no answer in time" in (traffic.enter(1) or "")
    traffic.leave(2, timed_out=False)
    assert traffic.enter(2) is None
    quick = ChannelTraffic(park_s=0)
    assert quick.enter(1) is None
    quick.leave(1, timed_out=True)
    assert quick.enter(1) is None  # the park is over: tried again


def test_no_channel_secret_in_logs_outbox_audit_or_pages(
    alerting: Alerting,
    database_url: str,
    caplog: pytest.LogCaptureFixture,
    refused_port: int,
) -> None:
    """With every logger at DEBUG: channels that fail (a refusing Slack URL, an SMTP server
    that is not there) and one that works (a webhook, whose signing secret is a secret too)."""
    caplog.set_level(logging.DEBUG)
    down = HttpReceiver(fail=lambda n: True).start()
    hook = HttpReceiver().start()
    slack_url = down.url + "/services/T9/B9/SlackPathSecret"
    webhook = channels.webhook_channel(hook.url + "/HookPathSecret")
    mail = channels.email_channel(
        host="127.0.0.1",
        port=refused_port,  # nothing listens: connection refused
        user="alerts",
        password="SmtpPasswordSecret",
        sender="gate@example.com",
        to=["perf@example.com"],
    )
    alerting.channel(channels.slack_channel(slack_url), "slack")
    alerting.channel(webhook, "hook")
    alerting.channel(mail, "mail")
    alerting.upload(seed=1)
    blocked = alerting.upload(seed=3, slowdown=1.5)
    alerting.drain()
    down.stop()
    hook.stop()
    assert len(hook.received) == 3  # the BLOCK, then "slack" and "mail" keep failing
    viewer = create_token(database_url, viewer=True).secret
    seen = [
        alerting.app.get(page, headers={"Authorization": f"Bearer {viewer}"}).text
        for page in ("/", "/repos/acme/kernels", f"/runs/{blocked['run_id']}", "/audit")
    ]
    with alerting.storage.read() as conn:
        seen.append(json.dumps(audit.entries(conn), default=str))
        seen += [j.last_error or "" for j in outbox.jobs(conn)]
        seen += [json.dumps(j.payload) for j in outbox.jobs(conn)]
        seen += [c.last_error or "" for c in alerts.channels(conn)]
    seen.append("\n".join(f"{r.getMessage()} {r.exc_text or ''}" for r in caplog.records))
    secrets = ("SlackPathSecret", "HookPathSecret", webhook.secret["signing_secret"])
    for secret in (*secrets, "SmtpPasswordSecret"):
        for text in seen:
            assert secret not in text, f"{secret} appears in {text[:300]}"


def _on_h200(**kwargs: Any) -> bytes:
    """A run as the harness records one on an H200: a name, the GPU, its driver, torch."""
    doc = json.loads(body(make_results(**kwargs)))
    doc["environment"] = {
        "key": "env-5bf816ff0a1c2d3e",
        "name": "h200",
        "hardware": {
            "gpus": [{"name": "NVIDIA H200"}],
            "nvidia_smi": ["580.95.05, NVIDIA H200, 143771 MiB"],
        },
        "software": {"torch": "2.11.0+cu130"},
    }
    return json.dumps(doc).encode()


def test_every_channel_names_the_environment_as_pages_do(
    alerting: Alerting,
    tmp_path: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Slack, Teams, email and the webhook name the environment by its name and hardware, with
    the key beside (a message has no hover), as the pages do: not by the key alone."""
    smtp = SmtpReceiver(tmp_path).start()
    monkeypatch.setenv("SSL_CERT_FILE", str(smtp.ca_file))
    teams = HttpReceiver().start()
    alerting.channel(channels.slack_channel(alerting.receivers["slack"].url), "slack")
    alerting.channel(channels.webhook_channel(alerting.receivers["hook"].url), "hook")
    alerting.channel(channels.teams_channel(teams.url + "/workflows/x"), "teams")
    alerting.channel(smtp.channel(), "mail")
    try:
        for data in (_on_h200(seed=1), _on_h200(seed=3, slowdown=1.5)):
            r = alerting.app.post(
                UPLOAD, content=data, headers=signed_headers(alerting.token.secret, data)
            )
            assert r.status_code in (200, 201), r.text
        assert r.json()["tier"] == "BLOCK"
        alerting.drain()
    finally:
        smtp.stop()
        teams.stop()
    name = "h200 (NVIDIA H200 · driver 580.95.05 · torch 2.11.0+cu130)"
    shown = f"{name} · key env-5bf816ff0a1c2d3e"
    (slack,) = alerting.receivers["slack"].received
    (teams_post,) = teams.received
    (hook,) = alerting.receivers["hook"].received
    (email,) = smtp.messages
    assert shown in json.dumps(slack.json()["blocks"], ensure_ascii=False)
    assert shown in json.dumps(teams_post.json(), ensure_ascii=False)
    assert shown in email.get_payload(decode=True).decode()
    data = hook.json()["data"]
    # The webhook keeps the key where it was (what receivers filter on) and adds the name.
    assert data["environment"] == "env-5bf816ff0a1c2d3e"
    assert data["environment_name"] == name
