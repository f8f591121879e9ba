"""docs/quickstart.md runs: every `sh` block, in order, in bash, as a reader would.

The reader's surroundings are made here: their values (the page's first block, replaced by the
test's own), a checkout of their repository with a bare `origin`, an `$EDITOR`, and `rnx` on
PATH. `pip install` resolves the page's requirement for real (`--dry-run --no-deps`) against a
local clone of this tree tagged as `$ACTION_REF`: the suite has no network. What GitHub does
between the blocks (the workflow run on the push and on the pull request, the sticky comment)
is `rnx gate` as the action runs it, with GitHub's environment and the recorded GitHub fake,
against the server the page started.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from action.gate import main as gate
from testbed.factories import make_results
from testbed.fakes.fake_github import State, Token, serve
from testbed.receivers import HttpReceiver

# The whole page, about ten `rnx` processes and a server: tens of seconds on two cores.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "quickstart.md"
KERNEL = ROOT / "tests" / "data" / "action-kernel.py"
VALUES = ("GATE_URL", "GATE_PORT", "REPO", "ACTION_REPO", "ACTION_REF", "SLACK_WEBHOOK_URL")
ACTIONS_BOT = "github-actions[bot]"


def shell_blocks(text: str) -> list[str]:
    return re.findall(r"^```sh\n(.*?)^```$", text, flags=re.MULTILINE | re.DOTALL)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _session_alive(sid: int) -> bool:
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError):
            # pid (comm) state ppid pgrp session ...: comm may hold spaces, so split after it.
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[3]) == sid:
                return True
    return False


def _git(cwd: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com"}
    env |= {"GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"}
    done = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


class Reader:
    """One bash per block, carrying the exported variables and the directory between them;
    each in a session of its own, so what a block leaves running (the server) is stopped."""

    def __init__(self, work: Path, values: dict[str, str], tools: Path, clone: Path) -> None:
        self.work, self.state, self.sessions = work, work / ".state.sh", list[int]()
        exports = "".join(f"export {k}={shlex.quote(v)}\n" for k, v in values.items())
        self.state.write_text(exports + f"export QS_PWD={shlex.quote(str(work))}\n")
        # pip resolves the page's requirement against the local clone, installs nothing.
        self.prelude = (
            "set -euo pipefail\n"
            f'. "{self.state}"\n'
            'cd "$QS_PWD"\n'
            "pip() {\n"
            "  local args=() a\n"
            '  for a in "$@"; do\n'
            f'    args+=("${{a//https:\\/\\/github.com\\/$ACTION_REPO/file://{clone}}}")\n'
            "  done\n"
            f'  "{sys.executable}" -m pip "${{args[@]}}" --dry-run --no-deps --no-build-isolation'
            ' --no-input --report "$QS_PIP_REPORT" -q\n'
            "}\n"
        )
        self.env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("GITHUB_", "RNX_", "KERNALIN_", "INPUT_"))
        }
        self.env |= {
            "PATH": f"{tools}:{os.environ['PATH']}",
            "EDITOR": str(tools / "edit"),
            "QS_PIP_REPORT": str(work / "pip-report.json"),
        }

    def run(self, block: str) -> None:
        script = self.prelude + block + '\nexport QS_PWD="$PWD"\nexport -p > "$QS_STATE"\n'
        proc = subprocess.Popen(
            ["bash", "-c", script],
            env={**self.env, "QS_STATE": str(self.state)},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        self.sessions.append(proc.pid)
        out, _ = proc.communicate(timeout=120)
        assert proc.returncode == 0, f"this block failed:\n{block}\n--- output:\n{out}"

    def value(self, name: str) -> str:
        script = f'. "{self.state}"; printf %s "${{{name}}}"'
        return subprocess.run(["bash", "-c", script], capture_output=True, text=True).stdout

    def stop(self) -> None:
        # Only sessions that still hold a process (the server the page started in the
        # background): an id is not reused while a process of its session is alive.
        for pid in self.sessions:
            if _session_alive(pid):
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(pid, signal.SIGTERM)


@pytest.fixture
def reader(tmp_path: Path) -> Iterator[tuple[Reader, dict[str, str], HttpReceiver]]:
    clone = tmp_path / "rnx-benchmark"
    _git(tmp_path, "clone", "-q", str(ROOT), str(clone))
    _git(clone, "tag", "v0.1.0")
    tools = tmp_path / "tools"
    tools.mkdir()
    (tools / "rnx").write_text(
        f'#!/bin/sh\nPYTHONPATH={shlex.quote(str(ROOT))} exec {sys.executable} -m rnx_cli "$@"\n'
    )
    (tools / "edit").write_text('#!/bin/sh\nprintf "\\n# tuned\\n" >> "$1"\n')
    for tool in tools.iterdir():
        tool.chmod(0o755)
    work = tmp_path / "work"
    origin, checkout = tmp_path / "origin.git", work / "kernels"
    (checkout / "kernels").mkdir(parents=True)
    _git(tmp_path, "init", "-q", "--bare", "-b", "main", str(origin))
    _git(checkout, "init", "-q", "-b", "main")
    (checkout / "kernels" / "attention.py").write_text(KERNEL.read_text())
    _git(checkout, "add", "-A")
    _git(checkout, "commit", "-q", "-m", "kernels")
    _git(checkout, "remote", "add", "origin", str(origin))
    receiver = HttpReceiver().start()
    port = _free_port()
    values = {
        "GATE_URL": f"http://127.0.0.1:{port}",  # TLS in front is the reader's proxy
        "GATE_PORT": str(port),
        "REPO": "acme/kernels",
        "ACTION_REPO": "acme/rnx-benchmark",
        "ACTION_REF": "v0.1.0",
        "SLACK_WEBHOOK_URL": receiver.url,
    }
    shell = Reader(work, values, tools, clone)
    try:
        yield shell, values, receiver
    finally:
        shell.stop()
        receiver.stop()


def _ci_gate(
    values: dict[str, str], work: Path, token: str, github: str, argv: list[str], event: str
) -> int:
    """What the workflow `rnx init` wrote runs on GitHub: the action's gate, on its runner."""
    env = {
        "GITHUB_ACTIONS": "true",
        "KERNALIN_URL": values["GATE_URL"],
        "KERNALIN_TOKEN": token,
        "GITHUB_TOKEN": "ghs_job",
        "GITHUB_API_URL": github,
        "GITHUB_REPOSITORY": values["REPO"],
        "GITHUB_EVENT_NAME": event,
        "GITHUB_OUTPUT": str(work / f"{event}.output"),
        "GITHUB_STEP_SUMMARY": str(work / f"{event}.summary.md"),
    }
    return gate(argv, env=env)


def test_the_quickstart_runs_from_zero_to_a_gated_pull_request(
    reader: tuple[Reader, dict[str, str], HttpReceiver],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    shell, values, receiver = reader
    blocks = shell_blocks(PAGE.read_text())
    names = re.findall(r"^export (\w+)=", blocks[0], flags=re.MULTILINE)
    assert tuple(names) == VALUES, "the first block is the reader's values: keep the test's in step"
    by_step = dict(enumerate(blocks[1:], start=1))
    assert len(by_step) == 7

    shell.run(by_step[1])  # install, start the server
    report = (shell.work / "pip-report.json").read_text()
    assert '"name": "rnx-benchmark"' in report and '"server"' in report
    assert shell.value("RNX_PUBLIC_URL") == values["GATE_URL"]
    shell.run(by_step[2])  # the CI token
    token = (shell.work / "ci-token.txt").read_text().strip()
    assert token.startswith("rnx_ci_")
    shell.run(by_step[3])  # rnx init
    checkout = shell.work / "kernels"
    workflow = yaml.safe_load((checkout / ".github" / "workflows" / "kernalin.yml").read_text())
    step = workflow["jobs"]["gate"]["steps"][-1]
    assert step["uses"] == f"{values['ACTION_REPO']}@{values['ACTION_REF']}"
    assert step["with"]["kernalin-token"] == "${{ secrets.KERNALIN_TOKEN }}"
    assert step["with"]["kernalin-url"] == "${{ vars.KERNALIN_URL }}"
    shell.run(by_step[4])  # the seed push

    origin = tmp_path / "origin.git"
    state = State()
    state.tokens["ghs_job"] = Token(ACTIONS_BOT, is_app=True)
    monkeypatch.chdir(checkout)
    with serve(state) as (github, _):
        seed = _git(origin, "rev-parse", "main")
        push = make_results(repository=values["REPO"], branch="main", sha=seed, seed=1)
        (tmp_path / "push.json").write_text(push.to_json())
        argv = ["--from-results", str(tmp_path / "push.json"), "--branch", "main", "--sha", seed]
        assert _ci_gate(values, tmp_path, token, github, argv, "push") == 0
        assert "tier<<" in (tmp_path / "push.output").read_text()
        assert "WARN" in (tmp_path / "push.output").read_text()

        shell.run(by_step[5])  # the first pull request
        head = _git(origin, "rev-parse", "tune-attention")
        assert head != seed
        pr = make_results(
            repository=values["REPO"], branch="tune-attention", sha=head, pr_number=1, seed=2
        )
        (tmp_path / "pr.json").write_text(pr.to_json())
        argv = ["--from-results", str(tmp_path / "pr.json"), "--branch", "tune-attention"]
        argv += ["--sha", head, "--pr", "1", "--base-branch", "main", "--base-sha", seed]
        assert _ci_gate(values, tmp_path, token, github, argv, "pull_request") == 0
    (comment,) = state.comment_bodies(values["REPO"], 1, login=ACTIONS_BOT)
    assert "rnx-benchmark: PASS" in comment
    assert f"{values['GATE_URL']}/runs/" in comment  # RNX_PUBLIC_URL, as step 1 set it
    assert state.statuses[(values["REPO"], head)][-1]["state"] == "success"
    capsys.readouterr()

    shell.run(by_step[6])  # the viewer token opens the dashboard
    shell.run(by_step[7])  # alerts
    (message,) = receiver.received  # rnx notify test, to the loopback "Slack"
    assert message.json()["text"].startswith("Test alert for channel slack of workspace acme")
    assert f"<{values['GATE_URL']}/|Dashboard>" in message.body.decode()
