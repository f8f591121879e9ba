"""Accept mode: the action run on `issue_comment` acts on "/kernalin accept <reason>".

It applies the same rules as the server's webhook (gate_server/github/commands.py), asking
GitHub with the workflow's GITHUB_TOKEN; then it asks the gate server to accept the PR's
latest runs (with the OIDC token when the workflow grants id-token: write, else the CI token)
and turns the sticky comment and the commit status to PASS. The server needs no GitHub
credentials for this. Comments that are not commands end the step quietly with success.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from action.context import event_payload
from action.publish import github_client
from action.upload import oidc_token
from action.workflow import Workflow
from rnx_github.accept_rules import (
    MalformedCommand,
    PullRequestComment,
    decide_accept,
    parse_comment,
    pull_request_comment,
)
from rnx_github.client import DEFAULT_API_URL, GitHubClient, GitHubError
from rnx_github.comment import COMMENT_MARKER, TIER_ICON, write_sticky

_HEADER = re.compile(r"^## .* rnx-benchmark: (PASS|WARN|BLOCK)\b.*$", re.MULTILINE)
_ACCEPTED = re.compile(r"^> ✅ \*\*Accepted\*\* by .*\n?", re.MULTILINE)


# ---- the gate server


class ServerError(Exception):
    pass


@dataclass
class Server:
    url: str
    credentials: Sequence[Callable[[], str | None]]  # asked in order: OIDC, then the CI token
    transport: httpx.BaseTransport | None = None

    def call(self, method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        last = "no credentials: set kernalin-token, or grant the workflow id-token: write"
        for credential in self.credentials:
            secret = credential()
            if not secret:
                continue
            try:
                with httpx.Client(transport=self.transport, timeout=20.0) as client:
                    r = client.request(
                        method,
                        self.url.rstrip("/") + path,
                        json=body,
                        headers={"Authorization": f"Bearer {secret}"},
                    )
            except httpx.HTTPError as e:
                raise ServerError(f"the gate server at {self.url} is unreachable: {e}") from None
            if r.status_code in (401, 403):
                last = f"the gate server refused the credentials ({r.status_code}): {_message(r)}"
                continue  # an OIDC token the server does not trust: try the CI token
            if r.status_code >= 400:
                raise ServerError(f"the gate server answered {r.status_code}: {_message(r)}")
            try:
                data: dict[str, Any] = r.json()
            except ValueError:
                raise ServerError(f"malformed answer from the gate server at {self.url}") from None
            return data
        raise ServerError(last)


def _message(r: httpx.Response) -> str:
    try:
        return str(r.json()["error"]["message"])[:300]
    except (ValueError, KeyError, TypeError):
        return r.text[:200]


def credentials_from(env: Mapping[str, str]) -> list[Callable[[], str | None]]:
    # A fresh OIDC token per request: the server refuses a token id it has seen.
    found: list[Callable[[], str | None]] = [lambda: oidc_token(env)]
    ci = env.get("KERNALIN_TOKEN", "").strip()
    if ci:
        found.append(lambda: ci)
    return found


# ---- the sticky comment and the status


def accepted_line(user: str, reason: str) -> str:
    return f"accepted by @{user}: {reason}"


def mark_accepted(body: str | None, user: str, reason: str, head_sha: str) -> str:
    """The sticky comment with its verdict turned to PASS and who accepted it and why."""
    note = f"> ✅ **Accepted** by @{user}: {reason}\n"
    header = f"## {TIER_ICON['PASS']} rnx-benchmark: PASS"
    if not body or not _HEADER.search(body):
        return f"{COMMENT_MARKER}\n{header}\ncommit {head_sha[:12]}\n\n{note}"
    body = _ACCEPTED.sub("", body)
    return _HEADER.sub(lambda _: f"{header}\n\n{note.rstrip()}", body, count=1)


# ---- the step


@dataclass
class Outcome:
    exit_code: int
    message: str


def run(
    env: Mapping[str, str],
    *,
    workflow: Workflow,
    github: GitHubClient | None = None,
    server: Server | None = None,
) -> Outcome:
    event_name = env.get("GITHUB_EVENT_NAME", "")
    payload = event_payload(env)
    comment = pull_request_comment(event_name, payload)
    if comment is None:
        return Outcome(0, "not a new comment on a pull request: nothing to accept")
    if comment.user_type == "Bot":
        return Outcome(0, "a comment by a bot is not a command")
    command = parse_comment(comment.body)
    if command is None:
        return Outcome(0, "no /kernalin command in the comment")

    token = env.get("GITHUB_TOKEN", "").strip()
    if not token:
        workflow.error("accept mode needs github-token (the default, ${{ github.token }}, works)")
        return Outcome(1, "no GitHub token")
    workflow.mask(token)
    gh = github or github_client(env.get("GITHUB_API_URL", DEFAULT_API_URL), token)
    reply = _replier(gh, comment, workflow)

    if isinstance(command, MalformedCommand):
        reply(command.problem)
        return Outcome(0, f"malformed command: {command.problem}")
    url = env.get("KERNALIN_URL", "").strip()
    if not url:
        workflow.error("accept mode needs kernalin-url: the gate server that holds the runs")
        reply("this workflow has no gate server configured (kernalin-url); nothing was accepted.")
        return Outcome(1, "no kernalin-url")
    server = server or Server(url, credentials_from(env))

    try:
        pull = gh.pull_request(comment.repository, comment.pr_number)
        base_ref, head_sha = pull.base_ref, pull.head_sha
        runs = server.call("GET", f"/api/v1/pulls/{comment.pr_number}/runs?head_sha={head_sha}")[
            "runs"
        ]
        if not runs:
            reply(
                f"there is no rnx-benchmark run for this pull request's head commit "
                f"{head_sha[:12]} yet; wait for its job to finish, then accept."
            )
            return Outcome(0, "no run to accept yet")
        decision = decide_accept(
            gh,
            repository=comment.repository,
            base_ref=base_ref,
            user=comment.user,
            workloads=[str(r["workload"]) for r in runs],
        )
        if not decision.allowed:
            reply(f"not accepted: {decision.why}.")
            return Outcome(0, f"not accepted: {decision.why}")
        answer = server.call(
            "POST",
            f"/api/v1/pulls/{comment.pr_number}/accept",
            {
                "reason": command.reason,
                "user": comment.user,
                "run_ids": [r["run_id"] for r in runs],
            },
        )
    except ServerError as e:
        workflow.warning(f"nothing was accepted: {e}", title="rnx-benchmark")
        reply(f"could not reach the gate server, so nothing was accepted ({e}); try again.")
        return Outcome(0, f"outage: {e}")
    except GitHubError as e:
        workflow.warning(f"nothing was accepted: GitHub answered: {e}", title="rnx-benchmark")
        return Outcome(0, f"GitHub error: {e}")

    line = accepted_line(comment.user, command.reason)
    _publish(gh, comment, head_sha, line, runs, workflow)
    accepted = answer.get("accepted", [])
    workflow.append_summary(
        f"## {TIER_ICON['PASS']} rnx-benchmark: {line}\n\n"
        + "\n".join(
            f"- run `{a['run_id']}` is now the baseline for `{a['baseline_branch']}` "
            f"in `{a['environment']}`"
            for a in accepted
        )
    )
    workflow.set_output("tier", "PASS")
    workflow.set_output("summary", f"PASS: {line}")
    return Outcome(0, line)


def _publish(
    gh: GitHubClient,
    comment: PullRequestComment,
    head_sha: str,
    line: str,
    runs: list[dict[str, Any]],
    workflow: Workflow,
) -> None:
    user, reason = comment.user, line.split(": ", 1)[1]
    try:
        write_sticky(
            gh,
            comment.repository,
            comment.pr_number,
            author=gh.whoami(),
            body=lambda present: mark_accepted(present, user, reason, head_sha),
        )
    except GitHubError as e:
        workflow.warning(f"could not update the pull request comment: {e}", title="rnx-benchmark")
    description = f"PASS: {line}"
    try:
        gh.set_status(
            comment.repository,
            head_sha,
            state="success",
            description=description if len(description) <= 140 else description[:137] + "...",
            target_url=next((str(r["url"]) for r in runs if r.get("url")), None),
        )
    except GitHubError as e:
        workflow.warning(f"could not set the commit status: {e}", title="rnx-benchmark")


def _replier(
    gh: GitHubClient, comment: PullRequestComment, workflow: Workflow
) -> Callable[[str], None]:
    def reply(text: str) -> None:
        try:
            gh.create_comment(
                comment.repository, comment.pr_number, f"@{comment.user} rnx-benchmark: {text}"
            )
        except GitHubError as e:
            workflow.warning(f"could not reply on the pull request: {e}", title="rnx-benchmark")
        workflow.notice(text, title="rnx-benchmark accept")

    return reply


def main(argv: Sequence[str] | None = None) -> int:
    workflow = Workflow()
    outcome = run(workflow.env, workflow=workflow)
    workflow.log(f"rnx-benchmark accept: {outcome.message}")
    return outcome.exit_code


if __name__ == "__main__":
    sys.exit(main())
