"""Alerts from what causes them to the receivers, in-process on SQLite and PostgreSQL: the event is
written with the run (or the accept), fanned out to one delivery per matching channel, each sent
with the outbox's retries to real loopback receivers; fanning out twice sends nothing twice; a
channel that keeps failing is marked and reported to the workspace's other channels."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from starlette.testclient import TestClient

from gate_server.asgi import create_app
from gate_server.db import Database, alerts, audit, change_points, outbox
from gate_server.db.change_points import NewChangePoint
from gate_server.domain.alerts import channels, manage
from gate_server.domain.alerts.delivery import DELIVER, FAILING_AFTER, fan_out
from gate_server.domain.alerts.traffic import ChannelTraffic
from gate_server.jobs.handlers import HANDLERS
from gate_server.jobs.worker import OutboxWorker
from gate_server.settings import ServerSettings
from testbed.factories import body, make_results
from testbed.gate_helpers import Token, create_token, signed_headers
from testbed.receivers import HttpReceiver, SilentReceiver, SmtpReceiver

PUBLIC = "https://gate.example.com"
UPLOAD = "/api/v1/runs"


@dataclass(frozen=True)
class Svc:
    """What handlers use of the server's services."""

    database: Database
    settings: ServerSettings
    traffic: ChannelTraffic = field(default_factory=ChannelTraffic)


@pytest.fixture
def settings(database_url: str) -> ServerSettings:
    # The app's own worker waits a minute between looks: the tests run the jobs themselves.
    return ServerSettings(database_url=database_url, public_url=PUBLIC, outbox_poll_ms=60_000)


@pytest.fixture
def app(settings: ServerSettings) -> Iterator[TestClient]:
    with TestClient(create_app(settings)) as c:
        # The tests run the jobs themselves: the app's own worker is stopped, not merely slow to
        # look again (a test that a loaded machine stretched past its minute would race it).
        c.portal.call(c.app.state.outbox_worker.stop)
        yield c


@pytest.fixture
def token(database_url: str) -> Token:
    return create_token(database_url, branches=("main",))


@pytest.fixture
def receivers() -> Iterator[dict[str, HttpReceiver]]:
    made = {"slack": HttpReceiver().start(), "hook": HttpReceiver().start()}
    yield made
    for r in made.values():
        r.stop()


def _channel(
    storage: Database,
    spec: channels.ChannelSpec,
    name: str,
    *,
    repository: str | None = None,
    events: tuple[str, ...] = (),
) -> int:
    added = manage.add_channel(
        storage,
        workspace="acme",
        name=name,
        spec=spec,
        repository=repository,
        events=events,
        actor="test",
    )
    return added.channel_id


def _upload(app: TestClient, token: Token, **kwargs: Any) -> dict[str, Any]:
    data = body(make_results(**kwargs))
    r = app.post(UPLOAD, content=data, headers=signed_headers(token.secret, data))
    assert r.status_code in (200, 201), r.text
    answer: dict[str, Any] = r.json()
    return answer


def drain(storage: Database, settings: ServerSettings, *, limit: int = 200) -> int:
    """Run due outbox jobs until none is left; how many ran."""
    worker = OutboxWorker(Svc(storage, settings), HANDLERS, poll_s=0, lease_s=60, first_retry_s=0.0)
    ran = 0
    while ran < limit and worker.run_once():
        ran += 1
    return ran


def _jobs(storage: Database, kind: str) -> list[outbox.OutboxJob]:
    with storage.read() as conn:
        return list(outbox.jobs(conn, kind=kind))


def test_a_block_on_main_goes_to_each_matching_channel_once(
    app: TestClient,
    token: Token,
    storage: Database,
    settings: ServerSettings,
    receivers: dict[str, HttpReceiver],
) -> None:
    _channel(storage, channels.slack_channel(receivers["slack"].url + "/slack"), "slack")
    spec = channels.webhook_channel(receivers["hook"].url + "/hook")
    _channel(storage, spec, "hook", repository="acme/kernels", events=("block",))
    # A rule for changes only: a BLOCK is not its business.
    quiet = HttpReceiver().start()
    _channel(storage, channels.slack_channel(quiet.url), "quiet", events=("change_point",))

    _upload(app, token, seed=1)  # the baseline
    _upload(app, token, seed=2, event="pull_request", pr_number=3, slowdown=1.5)  # a PR: no
    assert _jobs(storage, "event.block") == []
    data = body(make_results(seed=3, slowdown=1.5))
    blocked = app.post(UPLOAD, content=data, headers=signed_headers(token.secret, data)).json()
    assert blocked["tier"] == "BLOCK"
    (event,) = _jobs(storage, "event.block")
    assert event.payload["facts"]["run_id"] == blocked["run_id"]
    # The same document again is a retry: answered as before, no second event.
    again = app.post(UPLOAD, content=data, headers=signed_headers(token.secret, data))
    assert again.status_code == 200
    assert len(_jobs(storage, "event.block")) == 1

    drain(storage, settings)
    drain(storage, settings)
    quiet.stop()
    (slack,) = receivers["slack"].received
    (hook,) = receivers["hook"].received
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
    with storage.read() as conn:
        assert alerts.delivery_counts(conn) == {"deliveries": 2, "delivered": 2}
        assert [j.state for j in outbox.jobs(conn, kind=DELIVER)] == ["done", "done"]


def test_an_accepted_slowdown_says_who_why_and_how_much(
    app: TestClient,
    token: Token,
    storage: Database,
    settings: ServerSettings,
    receivers: dict[str, HttpReceiver],
) -> None:
    spec = channels.webhook_channel(receivers["hook"].url)
    _channel(storage, spec, "hook", events=("accepted_slowdown",))
    _upload(app, token, seed=1)
    same = _upload(app, token, seed=5, event="pull_request", pr_number=4, branch="same")
    slower = _upload(app, token, seed=6, event="pull_request", pr_number=5, slowdown=1.3)
    auth = {"Authorization": f"Bearer {token.secret}"}
    for run in (same, slower):
        r = app.post(
            f"{UPLOAD}/{run['run_id']}/accept", json={"reason": "memory for speed"}, headers=auth
        )
        assert r.status_code == 200, r.text
    # Accepting a run that is not slower is no news; the slower one is.
    (event,) = _jobs(storage, "event.accepted_slowdown")
    assert event.payload["facts"]["run_id"] == slower["run_id"]
    drain(storage, settings)
    (got,) = receivers["hook"].received
    sent = got.json()
    assert sent["event"] == "accepted_slowdown"
    assert sent["data"]["accepted_by"] == f"token:{token.id}"
    assert sent["data"]["reason"] == "memory for speed"
    assert 1.2 < sent["data"]["worst"]["ratio"] < 1.4
    assert sent["title"] == f"Slowdown accepted on acme/kernels main by token:{token.id}"
    assert sent["data"]["environment_name"] == "test runner"  # the document's name


def test_fanning_out_twice_sends_each_delivery_once(
    app: TestClient,
    token: Token,
    storage: Database,
    settings: ServerSettings,
    receivers: dict[str, HttpReceiver],
) -> None:
    _channel(storage, channels.slack_channel(receivers["slack"].url), "slack")
    _upload(app, token, seed=1)
    _upload(app, token, seed=3, slowdown=1.5)
    (event,) = _jobs(storage, "event.block")
    # A process that fanned out and died before marking the job done: it runs again.
    fan_out(Svc(storage, settings), event)
    fan_out(Svc(storage, settings), event)
    assert len(_jobs(storage, DELIVER)) == 1
    drain(storage, settings)
    assert len(receivers["slack"].received) == 1


def test_a_step_in_the_history_of_main_is_alerted_as_a_change_point(
    app: TestClient,
    token: Token,
    storage: Database,
    settings: ServerSettings,
    receivers: dict[str, HttpReceiver],
) -> None:
    _channel(
        storage, channels.slack_channel(receivers["slack"].url), "changes", events=("change_point",)
    )
    configs = (("pytorch_eager", "float32", 1), ("pytorch_eager", "float32", 8))
    stepped = "pytorch_eager/float32/bs8"
    for n in range(33):  # 30 runs, then 3 whose bs8 is 10% slower (WARN: they stay baselines)
        factor = 1.10 if n >= 30 else 1.0
        answer = _upload(
            app, token, configs=configs, slowdown={stepped: factor}, seed=n, sha=f"{n:040x}"
        )
        assert answer["is_baseline"], answer
    drain(storage, settings)
    (got,) = receivers["slack"].received
    text = got.json()["text"]
    assert text.startswith(f"Change point on acme/kernels main at {f'{30:040x}'[:12]}: 1.1")
    assert f"in {stepped}" in text and "x slower (+" in text
    links = json.dumps(got.json()["blocks"])
    assert f"https://github.com/acme/kernels/compare/{29:040x}...{30:040x}" in links
    assert "test runner · key linux-x86_64-cpu-test" in json.dumps(got.json(), ensure_ascii=False)


def test_a_change_point_is_alerted_with_its_commit_range(
    storage: Database, settings: ServerSettings, receivers: dict[str, HttpReceiver]
) -> None:
    create_token(storage.url, branches=("main",))
    _channel(storage, channels.slack_channel(receivers["slack"].url), "slack")
    before, after = "a" * 40, "b" * 40
    with storage.write() as conn:
        change_id = change_points.insert_new(
            conn,
            NewChangePoint(
                repository_id=1,
                branch="main",
                environment_key="h200",
                workload="kernels/attention.py",
                configuration="pytorch_eager/float16/bs8",
                before_run_id="11111111-1111-4111-8111-111111111111",
                before_sha=before,
                after_run_id="22222222-2222-4222-8222-222222222222",
                after_sha=after,
                ratio=1.18,
                low=1.12,
                high=1.25,
                p_value=0.001,
                early=True,  # found in a short history: the message says so
                end_run_id=None,
                end_sha=None,
            ),
            undoes_id=None,
        )
        assert change_id is not None
        # Another configuration, in another environment, moved at the same commit.
        other = change_points.insert_new(
            conn,
            NewChangePoint(
                repository_id=1,
                branch="main",
                environment_key="a100",
                workload="kernels/attention.py",
                configuration="pytorch_eager/float16/bs1",
                before_run_id="33333333-3333-4333-8333-333333333333",
                before_sha=before,
                after_run_id="44444444-4444-4444-8444-444444444444",
                after_sha=after,
                ratio=1.31,
                low=1.2,
                high=1.4,
                p_value=0.001,
                early=False,
                end_run_id="55555555-5555-4555-8555-555555555555",
                end_sha="c" * 40,
            ),
            undoes_id=None,
        )
        assert other is not None
        outbox.enqueue(
            conn,
            "event.change_point",
            {"event": "change_point.detected", "change_point": {"id": change_id}},
        )
    drain(storage, settings)
    (got,) = receivers["slack"].received
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
    app: TestClient,
    token: Token,
    storage: Database,
    settings: ServerSettings,
    receivers: dict[str, HttpReceiver],
    caplog: pytest.LogCaptureFixture,
) -> None:
    down = HttpReceiver(fail=lambda n: True).start()
    secret_path = "/services/T9/B9/NeverShowThis"
    broken = _channel(storage, channels.slack_channel(down.url + secret_path), "broken")
    _channel(storage, channels.slack_channel(receivers["slack"].url), "ops")
    _upload(app, token, seed=1)
    _upload(app, token, seed=3, slowdown=1.5)
    caplog.set_level(logging.INFO)
    drain(storage, settings)
    down.stop()
    assert down.refused == 10  # every attempt the outbox allows (MAX_ATTEMPTS)
    # ops got the BLOCK, then one channel_failing about "broken" (after FAILING_AFTER fails).
    events = [r.json()["text"] for r in receivers["slack"].received]
    assert len(events) == 2 and events[0].startswith("BLOCK")
    assert events[1].startswith("Alert channel broken (slack) keeps failing")
    assert f"{FAILING_AFTER} sends in a row failed" in events[1]
    with storage.read() as conn:
        marked = alerts.channel(conn, broken)
        failed = [j for j in outbox.jobs(conn, kind=DELIVER) if j.state == "failed"]
    assert marked is not None and marked.failing_since is not None
    assert marked.failures == 10 and (marked.last_error or "").startswith("HTTP 503")
    (job,) = failed
    # The dashboard's overview lists it, with its error and never its secret.
    viewer = create_token(storage.url, viewer=True).secret
    page = app.get("/", headers={"Authorization": f"Bearer {viewer}"}).text
    assert "Failing alert channels" in page and 'data-channel="1"' in page
    assert "HTTP 503 Service Unavailable" in page and 'data-channel="2"' not in page
    for where in (caplog.text, job.last_error or "", marked.last_error or "", page):
        assert "NeverShowThis" not in where


def test_a_receiver_that_never_answers_costs_one_timeout_not_one_per_alert(
    app: TestClient,
    token: Token,
    storage: Database,
    settings: ServerSettings,
    receivers: dict[str, HttpReceiver],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(channels, "HTTP_TIMEOUT_S", 0.3)
    silent = SilentReceiver().start()
    hung = _channel(storage, channels.slack_channel(silent.url + "/hook"), "hung")
    _channel(storage, channels.slack_channel(receivers["slack"].url), "ops")
    _upload(app, token, seed=1)
    for seed in (3, 4, 5):
        _upload(app, token, seed=seed, slowdown=1.5)
        _upload(app, token, seed=seed + 10)  # a PASS: the next BLOCK is a regression of its own
    # One worker (one process's traffic) runs every job, retries at once included.
    worker = OutboxWorker(Svc(storage, settings), HANDLERS, poll_s=0, lease_s=60, first_retry_s=0)
    ran = 0
    while ran < 200 and worker.run_once():
        ran += 1
    silent.stop()
    # The first send timed out and parked the channel: its other alerts waited, never sent
    # into the same silence (on main every one of them, every attempt, waited out a timeout).
    assert silent.accepted == 1
    assert [r.json()["text"][:5] for r in receivers["slack"].received] == ["BLOCK"] * 3
    with storage.read() as conn:
        marked = alerts.channel(conn, hung)
    assert marked is not None and marked.failures == 1
    assert marked.last_error == "no answer in time (timeout)"


def test_repeated_blocks_of_one_regression_alert_once_until_a_pass(
    app: TestClient,
    token: Token,
    storage: Database,
    settings: ServerSettings,
    receivers: dict[str, HttpReceiver],
) -> None:
    _channel(storage, channels.slack_channel(receivers["slack"].url), "ops")
    _upload(app, token, seed=1)  # the baseline
    for seed in (3, 4, 5):  # the same regression pushed again and again
        assert _upload(app, token, seed=seed, slowdown=1.5)["tier"] == "BLOCK"
    other = _upload(app, token, seed=6, slowdown=1.5, environment="a100-cuda12")
    assert other["tier"] == "WARN"  # no baseline there yet: its own key, nothing to group
    assert _upload(app, token, seed=7)["tier"] == "PASS"  # fixed
    assert _upload(app, token, seed=8, slowdown=1.5)["tier"] == "BLOCK"  # back again: news
    drain(storage, settings)
    texts = [r.json()["text"] for r in receivers["slack"].received]
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
    app: TestClient,
    token: Token,
    storage: Database,
    settings: ServerSettings,
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
    _channel(storage, channels.slack_channel(slack_url), "slack")
    _channel(storage, webhook, "hook")
    _channel(storage, mail, "mail")
    _upload(app, token, seed=1)
    blocked = _upload(app, token, seed=3, slowdown=1.5)
    drain(storage, settings)
    down.stop()
    hook.stop()
    assert len(hook.received) == 3  # the BLOCK, then "slack" and "mail" keep failing
    viewer = create_token(database_url, viewer=True).secret
    seen = [
        app.get(page, headers={"Authorization": f"Bearer {viewer}"}).text
        for page in ("/", "/repos/acme/kernels", f"/runs/{blocked['run_id']}", "/audit")
    ]
    with storage.read() as conn:
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
    app: TestClient,
    token: Token,
    storage: Database,
    settings: ServerSettings,
    receivers: dict[str, HttpReceiver],
    tmp_path: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Slack, Teams, email and the webhook name the environment by its name and hardware, with
    the key beside (a message has no hover), as the pages do: not by the key alone."""
    smtp = SmtpReceiver(tmp_path).start()
    monkeypatch.setenv("SSL_CERT_FILE", str(smtp.ca_file))
    teams = HttpReceiver().start()
    _channel(storage, channels.slack_channel(receivers["slack"].url), "slack")
    _channel(storage, channels.webhook_channel(receivers["hook"].url), "hook")
    _channel(storage, channels.teams_channel(teams.url + "/workflows/x"), "teams")
    mail = channels.email_channel(
        host="127.0.0.1",
        port=smtp.port,
        user=smtp.user,
        password=smtp.password,
        sender="gate@example.com",
        to=["perf@example.com"],
    )
    _channel(storage, mail, "mail")
    try:
        for data in (_on_h200(seed=1), _on_h200(seed=3, slowdown=1.5)):
            r = app.post(UPLOAD, content=data, headers=signed_headers(token.secret, data))
            assert r.status_code in (200, 201), r.text
        assert r.json()["tier"] == "BLOCK"
        drain(storage, settings)
    finally:
        smtp.stop()
        teams.stop()
    name = "h200 (NVIDIA H200 · driver 580.95.05 · torch 2.11.0+cu130)"
    shown = f"{name} · key env-5bf816ff0a1c2d3e"
    (slack,) = receivers["slack"].received
    (teams_post,) = teams.received
    (hook,) = receivers["hook"].received
    (email,) = smtp.messages
    assert shown in json.dumps(slack.json()["blocks"], ensure_ascii=False)
    assert shown in json.dumps(teams_post.json(), ensure_ascii=False)
    assert shown in email.get_payload(decode=True).decode()
    data = hook.json()["data"]
    # The webhook keeps the key where it was (what receivers filter on) and adds the name.
    assert data["environment"] == "env-5bf816ff0a1c2d3e"
    assert data["environment_name"] == name
