"""Every outage mode the action can meet ends in a warning and success, within the retry budget.

The whole `rnx gate` runs (inputs, upload, report, outputs, exit code) on a results document
measured elsewhere (--from-results), against a loopback server that fails on purpose. Retry
sleeps are virtual so the suite stays fast; modes that hold a connection open are run against
the upload client with a short deadline here, and with the real minute in
benchmarks/reliability/action_faults.py.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from action.gate import main
from action.upload import Credential, Outage, upload
from testbed.action_io import VirtualClock, read_outputs
from testbed.factories import make_results
from testbed.misbehaving import OUTAGE_MODES, STATUS_MODES, outage

REPO = "acme/kernels"
# Modes that hold the connection open: real seconds, so they get their own test below.
HOLDING = ("never-answers", "stall-mid-body", "trickle")
# Answers no retry changes: the client must give up at once, not hammer the server.
GIVE_UP_AT_ONCE = {"http-401", "http-403", "http-404", "http-413", "http-422"}
# The server answered, and said no (or said something unreadable): it was reached, and the
# warning must not say otherwise.
REFUSED = GIVE_UP_AT_ONCE | {"deep-json-422", "non-json-201", "wrong-json-201", "deep-json-201"}


@pytest.mark.parametrize("mode", [m for m in OUTAGE_MODES if m not in HOLDING])
def test_rnx_gate_warns_and_succeeds_on_every_outage(
    mode: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    results = tmp_path / "results.json"
    results.write_text(make_results(repository=REPO, branch="feature", pr_number=3).to_json())
    clock = VirtualClock(seed=8)
    with outage(mode) as server:
        env = {
            "GITHUB_ACTIONS": "true",
            "KERNALIN_URL": server.url,
            "KERNALIN_TOKEN": "rnx_ci_not-a-real-token",
            "GITHUB_REPOSITORY": REPO,
            "GITHUB_EVENT_NAME": "pull_request",
            "GITHUB_OUTPUT": str(tmp_path / "output"),
            "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md"),
        }
        argv = ["--from-results", str(results), "--pr", "3", "--sha", "a" * 40]
        argv += ["--branch", "feature", "--base-branch", "main"]
        started = time.monotonic()
        code = main(argv, env=env, clock=clock)
        real_s = time.monotonic() - started
    log = capsys.readouterr().out
    assert code == 0, log
    warnings = [line for line in log.splitlines() if line.startswith("::warning")]
    lead = "the gate server refused the upload" if mode in REFUSED else "did not reach the gate"
    assert any(lead in w for w in warnings), log
    assert read_outputs(tmp_path / "output")["tier"] == "WARN"
    assert lead in (tmp_path / "summary.md").read_text()
    assert real_s + sum(clock.slept) <= 60.0, (real_s, clock.slept)
    if mode in GIVE_UP_AT_ONCE:
        assert server.requests == 1, f"{mode} is final, yet it was sent {server.requests} times"
    if mode == "http-503-retry-after":
        # Retry-After: 2 is honoured instead of the 1 s first backoff.
        assert clock.slept and clock.slept[0] == 2.0, clock.slept
    if mode in STATUS_MODES and mode not in GIVE_UP_AT_ONCE:
        assert 1 <= server.requests <= 5


@pytest.mark.parametrize("mode", HOLDING)
def test_a_connection_held_open_is_given_up_at_the_deadline(mode: str) -> None:
    doc = make_results(repository=REPO)
    with outage(mode) as server:
        started = time.monotonic()
        answer = upload(
            doc, url=server.url, credentials=[Credential("token", "rnx_ci_x")], deadline_s=2.0
        )
        took = time.monotonic() - started
    assert isinstance(answer, Outage) and "did not answer in time" in answer.cause, answer
    # The deadline holds even for an answer that trickles in (httpx bounds each read only): the
    # server holds the connection for 120 s; the margin over 2 s is for a loaded machine.
    assert took < 10.0, took
