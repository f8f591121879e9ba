"""Each channel's message against a real receiver on loopback: Slack's `text` and `blocks`, the
Teams workflow envelope with its Adaptive Card, the signed webhook (verified here as
docs/alerts.md tells a receiver to), and email over SMTP with STARTTLS and a login (aiosmtpd).
Failed sends raise DeliveryFailed, whose text never holds the channel's secret."""

from __future__ import annotations

import hashlib
import hmac
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gate_server.domain.alerts import channels
from gate_server.domain.alerts.channels import DeliveryFailed
from gate_server.domain.alerts.events import (
    accepted_slowdown_event,
    block_event,
    channel_failing_event,
)
from gate_server.domain.alerts.message import compose
from testbed.receivers import HttpReceiver, SmtpReceiver
from tests.gate_server.domain.alerting import PUBLIC, check_slack_blocks, check_teams_card

HEAD, BASE = "c" * 40, "b" * 40
RUN_ID = "3f1c2a9e-8d47-4b6a-9e0f-5a7d2c1b0e93"
CHART = (
    "/repos/acme/kernels?branch=main&environment=h200-cuda13&workload=bench%2Fmatmul.yml"
    "#bench-matmul-yml--matmul-fp16"
)


def _answer(ratio: float = 1.32) -> dict[str, Any]:
    return {
        "tier": "BLOCK",
        "reasons": ["matmul-fp16: 1.32x slower"],
        "comparisons": [
            {"id": "matmul-fp16", "verdict": "slower", "ratio": ratio, "low": 1.25, "high": 1.4},
            {"id": "matmul-fp32", "verdict": "equivalent", "ratio": 1.001},
        ],
        "baseline": {"shas": [BASE], "run_ids": ["x"]},
    }


def _run() -> dict[str, Any]:
    return {
        "run_id": RUN_ID,
        "sha": HEAD,
        "branch": "main",
        "workload": "bench/matmul.yml",
        "environment": "h200-cuda13",
        "environment_name": "h200 (NVIDIA H200 · driver 580.95.05 · torch 2.11.0)",
    }


def block() -> dict[str, Any]:
    return block_event(repository="acme/kernels", answer=_answer(), run=_run())


def _send(spec: channels.ChannelSpec, facts: dict[str, Any], delivery_id: str) -> None:
    channels.send(spec.kind, spec.config, spec.secret, facts, delivery_id, public_url=PUBLIC)


@pytest.fixture
def http() -> Iterator[HttpReceiver]:
    receiver = HttpReceiver().start()
    yield receiver
    receiver.stop()


@pytest.fixture
def smtp(tmp_path: Path) -> Iterator[SmtpReceiver]:
    receiver = SmtpReceiver(tmp_path).start()
    yield receiver
    receiver.stop()


@pytest.fixture
def trusted_smtp(smtp: SmtpReceiver, monkeypatch: pytest.MonkeyPatch) -> SmtpReceiver:
    """The SMTP receiver, whose certificate the client verifies: the test's own, trusted."""
    monkeypatch.setenv("SSL_CERT_FILE", str(smtp.ca_file))
    return smtp


def test_block_facts_link_the_run_the_commit_range_and_the_dashboard() -> None:
    facts = block()
    assert facts["event_id"] == f"block:{RUN_ID}"
    # Stored as paths: a message makes them absolute with RNX_PUBLIC_URL, never a Host header.
    assert facts["links"] == {
        "run": f"/runs/{RUN_ID}",
        "commits": f"https://github.com/acme/kernels/compare/{BASE}...{HEAD}",
        # The chart that moved: its branch, environment and workload, its configuration's card.
        "dashboard": CHART,
    }
    assert facts["worst"]["ratio"] == 1.32 and facts["worst"]["configuration"] == "matmul-fp16"
    message = compose(facts, PUBLIC)
    assert message.links == [
        ("Run page", f"{PUBLIC}/runs/{RUN_ID}"),
        ("Commit range", f"https://github.com/acme/kernels/compare/{BASE}...{HEAD}"),
        ("Dashboard", f"{PUBLIC}{CHART}"),
    ]
    assert compose(facts, None).links[0] == ("Run page", f"/runs/{RUN_ID}")


def test_slack_gets_text_and_blocks(http: HttpReceiver) -> None:
    spec = channels.slack_channel(f"{http.url}/services/T000/B000/XXXXSECRET")
    delivery = str(uuid.uuid4())
    _send(spec, block(), delivery)
    (got,) = http.received
    assert got.path == "/services/T000/B000/XXXXSECRET"
    assert got.headers["Content-Type"] == "application/json"
    sent = got.json()
    assert set(sent) == {"text", "blocks"}
    assert "BLOCK on acme/kernels main" in sent["text"] and "1.32x slower" in sent["text"]
    kinds = [b["type"] for b in sent["blocks"]]
    assert kinds == ["header", "section", "section", "section", "context"]
    header = sent["blocks"][0]["text"]
    assert header["type"] == "plain_text" and len(header["text"]) <= 150
    fields = sent["blocks"][2]["fields"]
    assert len(fields) <= 10 and all(f["type"] == "mrkdwn" for f in fields)
    assert "*Workload*\nbench/matmul.yml" in [f["text"] for f in fields]
    links = sent["blocks"][3]["text"]["text"]
    assert f"<{PUBLIC}/runs/{RUN_ID}|Run page>" in links
    assert f"<https://github.com/acme/kernels/compare/{BASE}...{HEAD}|Commit range>" in links
    assert f"<{PUBLIC}{CHART}|Dashboard>" in links
    assert delivery in sent["blocks"][4]["elements"][0]["text"]


def test_slack_escapes_mrkdwn_in_what_users_wrote(http: HttpReceiver) -> None:
    facts = accepted_slowdown_event(
        repository="acme/kernels",
        answer=_answer(),
        run=_run(),
        accepted_by="octo <cat>",
        reason="<!channel> & expected",
        via="api",
    )
    assert facts is not None
    spec = channels.slack_channel(f"{http.url}/hook")
    _send(spec, facts, "d1")
    text = json.dumps(http.received[0].json()["blocks"][2])
    assert "&lt;!channel&gt; &amp; expected" in text and "<!channel>" not in text


def test_teams_gets_an_adaptive_card_in_the_workflow_envelope() -> None:
    receiver = HttpReceiver(status=202).start()  # Teams workflows answer 202 Accepted
    try:
        spec = channels.teams_channel(f"{receiver.url}/workflows/abc/triggers/manual?sig=SECRET")
        _send(spec, block(), "delivery-1")
    finally:
        receiver.stop()
    sent = receiver.received[0].json()
    assert sent["type"] == "message"
    (attachment,) = sent["attachments"]
    assert attachment["contentType"] == "application/vnd.microsoft.card.adaptive"
    assert attachment["contentUrl"] is None
    card = attachment["content"]
    assert card["type"] == "AdaptiveCard" and card["version"] == "1.4"
    assert card["$schema"] == "http://adaptivecards.io/schemas/adaptive-card.json"
    assert card["body"][0]["type"] == "TextBlock" and "BLOCK" in card["body"][0]["text"]
    facts = {f["title"]: f["value"] for f in card["body"][2]["facts"]}
    assert facts["Repository"] == "acme/kernels" and facts["Commit"] == HEAD[:12]
    assert [(a["type"], a["title"]) for a in card["actions"]] == [
        ("Action.OpenUrl", "Run page"),
        ("Action.OpenUrl", "Commit range"),
        ("Action.OpenUrl", "Dashboard"),
    ]
    assert "delivery-1" in card["body"][-1]["text"]


def test_the_webhook_body_is_signed_like_uploads(http: HttpReceiver) -> None:
    spec = channels.webhook_channel(f"{http.url}/kernalin")
    signing = spec.secret["signing_secret"]
    _send(spec, block(), "0b8e1c7a-delivery")
    (got,) = http.received
    # What docs/alerts.md tells a receiver to do:
    timestamp = got.headers["X-Kernalin-Timestamp"]
    expected = hmac.new(
        signing.encode(), timestamp.encode() + b"." + got.body, hashlib.sha256
    ).hexdigest()
    assert hmac.compare_digest(got.headers["X-Kernalin-Signature"], "sha256=" + expected)
    assert got.headers["X-Kernalin-Event"] == "block"
    assert got.headers["X-Kernalin-Delivery"] == "0b8e1c7a-delivery"
    sent = got.json()
    assert sent["version"] == 1 and sent["event"] == "block"
    assert sent["delivery_id"] == "0b8e1c7a-delivery" and sent["event_id"] == f"block:{RUN_ID}"
    assert sent["data"]["worst"]["ratio"] == 1.32
    assert sent["data"]["links"]["run"] == f"{PUBLIC}/runs/{RUN_ID}"
    # Another key does not verify: the signature depends on the secret.
    forged = hmac.new(b"other", timestamp.encode() + b"." + got.body, hashlib.sha256)
    assert got.headers["X-Kernalin-Signature"] != "sha256=" + forged.hexdigest()


def test_email_goes_over_starttls_with_a_login(trusted_smtp: SmtpReceiver) -> None:
    smtp = trusted_smtp
    _send(smtp.channel(to=("perf@example.com", "oncall@example.com")), block(), "mail-delivery-1")
    assert smtp.logins == [(smtp.user, smtp.password)]
    assert smtp.envelopes == [("gate@example.com", ["perf@example.com", "oncall@example.com"])]
    (mail,) = smtp.messages
    assert mail["Subject"].startswith("[kernalin] BLOCK on acme/kernels main")
    assert mail["Message-ID"] == "<mail-delivery-1@kernalin>"
    assert mail["X-Kernalin-Delivery"] == "mail-delivery-1"
    assert mail["X-Kernalin-Event"] == "block"
    text = mail.get_payload(decode=True).decode()
    assert "1.32x slower (+32.0%" in text
    assert f"Run page: {PUBLIC}/runs/{RUN_ID}" in text
    assert f"Commit range: https://github.com/acme/kernels/compare/{BASE}...{HEAD}" in text


def test_email_with_a_wrong_password_fails_without_showing_it(
    trusted_smtp: SmtpReceiver,
) -> None:
    with pytest.raises(DeliveryFailed) as failed:
        _send(trusted_smtp.channel(password="wrong-Pa55word"), block(), "d")
    assert str(failed.value) == "SMTP: login refused (code 535)"
    assert "wrong-Pa55word" not in str(failed.value)
    assert trusted_smtp.messages == []


def test_email_refuses_a_server_whose_certificate_it_cannot_verify(smtp: SmtpReceiver) -> None:
    with pytest.raises(DeliveryFailed, match="certificate is not trusted"):
        _send(smtp.channel(), block(), "d")
    assert smtp.logins == [] and smtp.messages == []


def test_a_failed_send_never_shows_the_webhook_url() -> None:
    receiver = HttpReceiver(fail=lambda n: True).start()
    try:
        spec = channels.slack_channel(f"{receiver.url}/services/T1/B1/TOPSECRET")
        with pytest.raises(DeliveryFailed) as failed:
            _send(spec, block(), "d")
        assert str(failed.value) == "HTTP 503 Service Unavailable"
    finally:
        receiver.stop()
    # Nothing listens here any more: a connection error, still without the URL.
    with pytest.raises(DeliveryFailed) as refused:
        _send(spec, block(), "d")
    for error in (str(failed.value), str(refused.value)):
        assert "TOPSECRET" not in error


@pytest.mark.parametrize(
    "path",
    [
        "/workflows/run?api-version=1&sig=SECRETSIG123",  # a Teams workflow URL
        "/services/T1/B1/SECRET%2FPATH%3D",  # percent-encoded
        "/hook#SECRETFRAGMENT",
    ],
)
def test_a_receiver_repeating_the_url_never_puts_it_in_the_error(path: str) -> None:
    # The reply echoes the request line (as error pages do), with a NUL byte PostgreSQL
    # text cannot hold: the error is ours, a fixed text by the kind of failure.
    receiver = HttpReceiver(
        fail=lambda n: True, failure_body=lambda p: f"bad request for {p}\x00".encode()
    ).start()
    try:
        spec = channels.teams_channel(f"{receiver.url}{path}")
        with pytest.raises(DeliveryFailed) as failed:
            _send(spec, block(), "d")
    finally:
        receiver.stop()
    assert str(failed.value) == "HTTP 503 Service Unavailable"


def test_a_known_slack_error_word_is_named() -> None:
    receiver = HttpReceiver(
        fail=lambda n: True, failure_body=lambda p: b"channel_not_found"
    ).start()
    try:
        spec = channels.slack_channel(f"{receiver.url}/services/T1/B1/X")
        with pytest.raises(DeliveryFailed) as failed:
            _send(spec, block(), "d")
    finally:
        receiver.stop()
    assert str(failed.value) == "HTTP 503 Service Unavailable (channel_not_found)"


def test_channel_failing_names_the_channel_and_its_error(http: HttpReceiver) -> None:
    facts = channel_failing_event(
        channel_id=3,
        channel="perf-slack",
        kind="slack",
        failures=5,
        last_error="HTTP 503 Service Unavailable",
        since="2026-12-01T11:00:00+00:00",
    )
    spec = channels.slack_channel(f"{http.url}/hook")
    _send(spec, facts, "d")
    sent = http.received[0].json()
    assert "Alert channel perf-slack (slack) keeps failing" in sent["text"]
    assert "HTTP 503 Service Unavailable" in json.dumps(sent["blocks"])


@pytest.mark.parametrize(
    "url",
    ["http://hooks.example.com/x", "ftp://127.0.0.1/x", "not a url", "https:///nohost"],
)
def test_urls_must_be_https_except_to_this_machine(url: str) -> None:
    from gate_server.errors import InvalidInput

    with pytest.raises(InvalidInput, match="URL"):
        channels.slack_channel(url)


def test_names_and_reasons_cannot_forge_links_or_mentions(http: HttpReceiver) -> None:
    """What someone chose (a workload path, an environment's name, an accept reason) reaches
    Slack and Teams as the characters it is: no Slack link or mention, no Teams Markdown link."""
    from testbed.factories import HOSTILE_WORKLOAD

    run = {**_run(), "workload": HOSTILE_WORKLOAD, "environment_name": "<!here> [x](https://e.x)"}
    facts = accepted_slowdown_event(
        repository="acme/kernels",
        answer=_answer(),
        run=run,
        accepted_by="octo",
        reason="see [the fix](https://evil.example) <https://evil.example|here> <!here>",
        via="api",
    )
    assert facts is not None
    for spec in (channels.slack_channel(http.url), channels.teams_channel(http.url)):
        _send(spec, facts, "d")
    slack, teams = (json.dumps(r.json()) for r in http.received)
    assert "<https://evil.example|" not in slack and "<!here>" not in slack
    assert "&lt;!here&gt;" in slack and "&lt;img src=x" in slack
    assert "](https://e.x)" not in teams
    assert "](https://evil.example)" not in teams and "](" not in teams.replace("]\\u200b(", "")
    assert "[the fix]\\u200b(https://evil.example)" in teams


def test_slack_notification_text_mentions_and_links_nothing(http: HttpReceiver) -> None:
    # `text` is what Slack's notifications show, and Slack parses it too.
    run = {**_run(), "branch": "release/<!channel>"}
    answer = {**_answer(), "reasons": ["<https://evil.example/login|Click to re-run> failed"]}
    answer["comparisons"] = [
        {**answer["comparisons"][0], "id": "<https://evil.example/login|Click to re-run>"}
    ]
    facts = block_event(repository="acme/kernels", answer=answer, run=run)
    _send(channels.slack_channel(f"{http.url}/hook"), facts, "d")
    sent = http.received[0].json()
    # What Slack parses: `text` and every mrkdwn text (a header's plain_text is shown as is).
    parsed = [sent["text"]]
    for block in sent["blocks"]:
        for part in [block.get("text"), *block.get("fields", []), *block.get("elements", [])]:
            if part and part.get("type") == "mrkdwn":
                parsed.append(part["text"])
    for text in parsed:
        assert "<!channel>" not in text and "<https://evil.example" not in text, text
    assert "release/&lt;!channel&gt;" in sent["text"]


def _long_block() -> dict[str, Any]:
    """A BLOCK whose every user-controlled value is at or past what Slack allows."""
    run = {**_run(), "branch": "release/" + "<!channel>" * 40, "workload": "w" * 3000}
    answer = {**_answer(), "reasons": ["<https://evil.example|Click> & " * 300]}
    return block_event(repository="acme/" + "k" * 90, answer=answer, run=run)


def _every_event(kind: str, *, reason: str, run: dict[str, Any], via: str) -> list[Any]:
    """One event of every kind for a channel of `kind`, an acceptance's `reason` written by a
    user (a parameter list for the validators' tests below)."""
    return [
        block(),
        _long_block(),
        accepted_slowdown_event(
            repository="acme/kernels",
            answer=_answer(),
            run=run,
            accepted_by="octo",
            reason=reason,
            via=via,
        ),
        channel_failing_event(
            channel_id=1,
            channel="perf",
            kind=kind,
            failures=5,
            last_error="HTTP 404 Not Found",
            since="2026-12-03T07:00:00+00:00",
        ),
    ]


EVERY_EVENT = ["block", "long-block", "accepted-slowdown", "channel-failing"]


@pytest.mark.parametrize(
    "facts",
    _every_event("slack", reason="<https://evil.example|ok> " * 200, run=_run(), via="api"),
    ids=EVERY_EVENT,
)
def test_slack_payloads_pass_slacks_own_block_kit_checks(
    facts: dict[str, Any], http: HttpReceiver
) -> None:
    _send(channels.slack_channel(f"{http.url}/hook"), facts, "d")
    sent = http.received[0].json()
    assert len(sent["blocks"]) <= 50  # a message's limit
    check_slack_blocks(sent)


def test_alerts_speak_without_the_statistics_jargon() -> None:
    answer = _answer()
    answer["reasons"] = [
        "matmul-fp16 is 32.0% slower (90% interval 1.250-1.400), credibly slower over the run's "
        "2 configurations (adjusted P = 0.0010) and beyond the 25% block threshold "
        "(P(ratio <= 1.25) = 0.0100)",
        "matmul-fp32 is 3.0% slower (90% interval 1.010-1.050), possibly beyond the 25% block "
        "threshold (P = 0.40, not the 0.95 a BLOCK needs)",
    ]
    text = compose(block_event(repository="acme/kernels", answer=answer, run=_run()), PUBLIC)
    reasons = dict(text.facts)["Reasons"]
    assert "adjusted P" not in reasons and "P(ratio" not in reasons and "P = " not in reasons
    assert reasons.startswith("matmul-fp16 is 32.0% slower (90% interval 1.250-1.400), credibly")
    assert "beyond the 25% block threshold; matmul-fp32 is 3.0% slower" in reasons


def test_an_accepted_slowdown_names_its_pull_request_and_links_it() -> None:
    facts = accepted_slowdown_event(
        repository="acme/kernels",
        answer=_answer(),
        run={**_run(), "pr_number": 42},
        accepted_by="octo",
        reason="expected: bigger tiles",
        via="comment",
    )
    assert facts is not None
    message = compose(facts, PUBLIC)
    assert ("Pull request", "#42") in message.facts
    assert ("Pull request", "https://github.com/acme/kernels/pull/42") in message.links


@pytest.mark.parametrize(
    "facts",
    _every_event(
        "teams",
        reason="[the fix](https://evil.example) & <b>",
        run={**_run(), "pr_number": 7},
        via="comment",
    ),
    ids=EVERY_EVENT,
)
def test_teams_cards_validate_against_the_official_adaptive_card_1_4_schema(
    facts: dict[str, Any],
) -> None:
    receiver = HttpReceiver(status=202).start()
    try:
        _send(channels.teams_channel(f"{receiver.url}/workflows/1?sig=S"), facts, "d")
    finally:
        receiver.stop()
    (attachment,) = receiver.received[0].json()["attachments"]
    card = attachment["content"]
    assert card["version"] == "1.4"
    check_teams_card(card)
