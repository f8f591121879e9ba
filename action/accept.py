"""Accept mode: the action run on `issue_comment` acts on "/kernalin accept <reason>".

It applies the same rules as the server's webhook (gate_server/http/webhook.py), asking
GitHub with the workflow's GITHUB_TOKEN; then it asks the gate server to accept the PR's
latest runs (with the OIDC token when the workflow grants id-token: write, else the CI token)
and turns the sticky comment and the commit status to PASS. The server needs no GitHub
credentials for this. Comments that are not commands end the step quietly with success.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from action.context import event_payload
from action.inputs import Connection, InputError, read_connection
from action.publish import github_client
from action.upload import oidc_token
from action.workflow import Workflow
from rnx_github.accept_rules import (
    AcceptCommand,
    Command,
    MalformedCommand,
    PullRequestComment,
    decide_accept,
    parse_comment,
    pull_request_comment,
)
from rnx_github.client import DEFAULT_API_URL, GitHubClient, GitHubError
from rnx_github.comment import (
    TIER_ICON,
    accepted_line,
    accepted_markdown,
    inert_text,
    mark_accepted,
    status_description,
    write_sticky,
)

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


def credentials_from(
    env: Mapping[str, str], connection: Connection
) -> list[Callable[[], str | None]]:
    # A fresh OIDC token per request: the server refuses a token id it has seen.
    found: list[Callable[[], str | None]] = [lambda: oidc_token(env)]
    ci = connection.kernalin_token
    if ci:
        found.append(lambda: ci)
    return found


# ---- the step


@dataclass
class Outcome:
    exit_code: int
    message: str


def _command_in(env: Mapping[str, str]) -> tuple[PullRequestComment, Command] | Outcome:
    """The comment and its command, or the quiet outcome when there is nothing to act on."""
    comment = pull_request_comment(env.get("GITHUB_EVENT_NAME", ""), event_payload(env))
    if comment is None:
        return Outcome(0, "not a new comment on a pull request: nothing to accept")
    if comment.user_type == "Bot":
        return Outcome(0, "a comment by a bot is not a command")
    command = parse_comment(comment.body)
    if command is None:
        return Outcome(0, "no /kernalin command in the comment")
    return comment, command


def run(
    env: Mapping[str, str],
    *,
    workflow: Workflow,
    github: GitHubClient | None = None,
    server: Server | None = None,
) -> Outcome:
    found = _command_in(env)
    if isinstance(found, Outcome):
        return found
    comment, command = found
    try:
        connection = read_connection(env)
    except InputError as e:
        workflow.error(str(e), title="rnx-benchmark: cannot accept")
        return Outcome(1, str(e))
    token = connection.github_token
    if not token:
        workflow.error("accept mode needs github-token (the default, ${{ github.token }}, works)")
        return Outcome(1, "no GitHub token")
    workflow.mask(token)
    workflow.mask(connection.kernalin_token or "")
    gh = github or github_client(env.get("GITHUB_API_URL", DEFAULT_API_URL), token)
    reply = _replier(gh, comment, workflow)

    if isinstance(command, MalformedCommand):
        reply(command.problem)
        return Outcome(0, f"malformed command: {command.problem}")
    if not connection.kernalin_url:
        workflow.error("accept mode needs kernalin-url: the gate server that holds the runs")
        reply("this workflow has no gate server configured (kernalin-url); nothing was accepted.")
        return Outcome(1, "no kernalin-url")
    server = server or Server(connection.kernalin_url, credentials_from(env, connection))
    try:
        done = _accept(gh, server, comment, command, reply)
    except ServerError as e:
        workflow.warning(f"nothing was accepted: {e}", title="rnx-benchmark")
        reply(f"could not reach the gate server, so nothing was accepted ({e}); try again.")
        return Outcome(0, f"outage: {e}")
    except GitHubError as e:
        workflow.warning(f"nothing was accepted: GitHub answered: {e}", title="rnx-benchmark")
        return Outcome(0, f"GitHub error: {e}")
    if isinstance(done, Outcome):
        return done
    return _report(gh, comment, command, done, workflow)


@dataclass(frozen=True)
class Accepted:
    head_sha: str
    runs: list[dict[str, Any]]  # the PR's latest runs, as the server listed them
    answer: dict[str, Any]  # the server's answer to the accept


def _accept(
    gh: GitHubClient,
    server: Server,
    comment: PullRequestComment,
    command: AcceptCommand,
    reply: Callable[[str], None],
) -> Accepted | Outcome:
    """The same rules as the server's webhook, then the server accepts the PR's latest runs."""
    pull = gh.pull_request(comment.repository, comment.pr_number)
    path = f"/api/v1/pulls/{comment.pr_number}"
    runs = server.call("GET", f"{path}/runs?head_sha={pull.head_sha}")["runs"]
    if not runs:
        reply(
            f"there is no rnx-benchmark run for this pull request's head commit "
            f"{pull.head_sha[:12]} yet; wait for its job to finish, then accept."
        )
        return Outcome(0, "no run to accept yet")
    decision = decide_accept(
        gh,
        repository=comment.repository,
        base_ref=pull.base_ref,
        user=comment.user,
        workloads=[str(r["workload"]) for r in runs],
    )
    if not decision.allowed:
        reply(f"not accepted: {decision.why}.")
        return Outcome(0, f"not accepted: {decision.why}")
    body = {"reason": command.reason, "user": comment.user, "run_ids": [r["run_id"] for r in runs]}
    return Accepted(pull.head_sha, runs, server.call("POST", f"{path}/accept", body))


def _report(
    gh: GitHubClient,
    comment: PullRequestComment,
    command: AcceptCommand,
    done: Accepted,
    workflow: Workflow,
) -> Outcome:
    line = accepted_line(comment.user, command.reason)
    _publish(gh, comment, command, done, workflow)
    workflow.append_summary(
        f"## {TIER_ICON['PASS']} rnx-benchmark: "
        f"{accepted_markdown(comment.user, command.reason)}\n\n"
        + "\n".join(
            f"- run {inert_text(str(a['run_id']))} is now the baseline for "
            f"{inert_text(str(a['baseline_branch']))} in {inert_text(str(a['environment']))}"
            for a in done.answer.get("accepted", [])
        )
    )
    workflow.set_output("tier", "PASS")
    workflow.set_output("summary", f"PASS: {line}")
    return Outcome(0, line)


def _publish(
    gh: GitHubClient,
    comment: PullRequestComment,
    command: AcceptCommand,
    done: Accepted,
    workflow: Workflow,
) -> None:
    user, reason = comment.user, command.reason
    try:
        write_sticky(
            gh,
            comment.repository,
            comment.pr_number,
            author=gh.whoami(),
            body=lambda present: mark_accepted(present, user, reason, done.head_sha),
        )
    except GitHubError as e:
        workflow.warning(f"could not update the pull request comment: {e}", title="rnx-benchmark")
    try:
        gh.set_status(
            comment.repository,
            done.head_sha,
            state="success",
            description=status_description("PASS", "enforce", [accepted_line(user, reason)]),
            target_url=next((str(r["url"]) for r in done.runs if r.get("url")), None),
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
