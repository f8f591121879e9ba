"""POST /api/v1/github/webhook: GitHub's deliveries, verified, de-duplicated and dispatched.

The signature (X-Hub-Signature-256, HMAC-SHA256 of the raw body keyed by
RNX_GITHUB_WEBHOOK_SECRET) is checked before anything is parsed. Each X-GitHub-Delivery is
acted on once: a redelivery gets the stored answer. Whatever a delivery says, a well-signed
one is never an error: what we do not act on is answered 200 with why.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from gate_server.db import Database, audit, deliveries, repositories, runs
from gate_server.domain.autosync import jobs as autosync_jobs
from gate_server.domain.bisection import jobs as bisection_jobs
from gate_server.domain.branches import current_name, rename_branch
from gate_server.errors import AmbiguousRepository, GateServerError
from gate_server.github.integration import GitHubIntegration
from gate_server.github.pulls import accept_runs, latest_runs
from gate_server.github.workload_check import run_problem
from gate_server.http.answers import Answer, ApiError
from gate_server.http.app_mode import publish_pull_request
from gate_server.http.endpoints import parse_json
from gate_server.http.openapi import NOT_BLANK, endpoint, error, header
from gate_server.numbers import whole_number
from gate_server.services import services
from rnx_github.accept_rules import (
    AcceptCommand,
    MalformedCommand,
    PullRequestComment,
    decide_accept,
    parse_comment,
    pull_request_comment,
)
from rnx_github.app_auth import GitHubApp
from rnx_github.client import GitHubClient, GitHubError
from rnx_github.comment import accepted_line

log = logging.getLogger("gate_server.github")

WEBHOOK_PATH = "/api/v1/github/webhook"
MAX_DELIVERY_BYTES = 25 * 1024 * 1024  # GitHub caps webhook payloads at 25 MB
# A claim this old without an answer belongs to a process that died: a redelivery takes over.
STALE_CLAIM = timedelta(minutes=10)


def signature_of(secret: str, body: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode("utf-8"), body, hashlib.sha256).hexdigest()


def signature_ok(secret: str, body: bytes, header: str | None) -> bool:
    """X-Hub-Signature-256 over the raw bytes, compared in constant time."""
    if not header:
        return False
    expected = signature_of(secret, body).encode("ascii")
    return hmac.compare_digest(expected, header.strip().encode("utf-8", "replace"))


@dataclass(frozen=True)
class Delivery:
    id: str
    event: str
    payload: Mapping[str, Any]

    @property
    def action(self) -> str | None:
        value = self.payload.get("action")
        return value if isinstance(value, str) else None

    @property
    def key(self) -> str:
        """What makes two deliveries the same one, for acting once.

        GitHub signs the body but not X-GitHub-Delivery: a captured "/kernalin accept" could be
        sent again under a fresh delivery id and accept whatever the PR's head is by then. A
        new comment happens once, so its deliveries are keyed by the comment's own id.
        """
        comment = self.payload.get("comment")
        if (
            self.event == "issue_comment"
            and self.action == "created"
            and isinstance(comment, Mapping)
        ):
            comment_id = comment.get("id")
            if isinstance(comment_id, int) and not isinstance(comment_id, bool):
                return f"issue_comment:{comment_id}"
        return self.id


Handler = Callable[[Database, GitHubIntegration, Delivery], Answer]


def _ignored(why: str) -> Answer:
    """A delivery we do not act on is answered 200 with why (GitHub shows it in the log)."""
    return Answer(200, {"ignored": why})


def handle(database: Database, gh: GitHubIntegration, delivery: Delivery) -> Answer:
    """Act on a delivery once; a redelivery (same `Delivery.key`) gets the first answer."""
    with database.write() as conn:
        first = deliveries.claim(conn, delivery.key, delivery.event, delivery.action)
    if not first:
        with database.read() as conn:
            stored = deliveries.answer_of(conn, delivery.key)
        if stored is not None:
            return Answer(*stored)
        with database.write() as conn:
            taken = deliveries.reclaim_stale(conn, delivery.key, STALE_CLAIM)
        if not taken:
            return Answer(202, {"delivery": delivery.id, "status": "already being handled"})
    try:
        handled = dispatch(database, gh, delivery)
    except Exception as e:
        # Forget the claim: GitHub's redelivery of a delivery we failed on must be acted on.
        with database.write() as conn:
            deliveries.forget(conn, delivery.key)
        if isinstance(e, GitHubError):
            raise ApiError(
                502,
                "github_unavailable",
                f"GitHub's API failed while handling this delivery ({e}); nothing was "
                "changed, redeliver it from the webhook's settings",
            ) from None
        raise
    answer = Answer(
        handled.status, {"delivery": delivery.id, "event": delivery.event, **handled.body}
    )
    with database.write() as conn:
        deliveries.finish(conn, delivery.key, answer.status, answer.body)
    return answer


def dispatch(database: Database, gh: GitHubIntegration, delivery: Delivery) -> Answer:
    _remember_repository(database, delivery.payload)
    handler = HANDLERS.get((delivery.event, delivery.action)) or HANDLERS.get(
        (delivery.event, None)
    )
    if handler is None:
        what = delivery.event + (f".{delivery.action}" if delivery.action else "")
        return _ignored(f"{what} is not an event this server acts on")
    return handler(database, gh, delivery)


def _remember_repository(database: Database, payload: Mapping[str, Any]) -> None:
    """A verified delivery names GitHub's id for a repository: tie it to the registered one
    of that name (once), so OIDC tokens and later renames find it by id."""
    repo = payload.get("repository")
    if isinstance(repo, Mapping) and isinstance(repo.get("id"), int) and repo.get("full_name"):
        try:
            with database.write() as conn:
                repositories.bind_github_id(conn, int(repo["id"]), str(repo["full_name"]))
        except AmbiguousRepository as e:
            log.warning("%s", e)  # the delivery is still handled; the admin binds the id


# ---- handlers, by (event, action)


def on_ping(database: Database, gh: GitHubIntegration, delivery: Delivery) -> Answer:
    payload = delivery.payload
    return Answer(200, {"pong": True, "zen": payload.get("zen"), "hook_id": payload.get("hook_id")})


def on_rename(database: Database, gh: GitHubIntegration, delivery: Delivery) -> Answer:
    repo = delivery.payload.get("repository") or {}
    try:
        github_id, new_name = int(repo["id"]), str(repo["full_name"])
    except (KeyError, TypeError, ValueError):
        return _ignored("the rename names no repository id")
    with database.write() as conn:
        old = repositories.rename_by_github_id(conn, github_id, new_name)
        if old is not None:
            audit.record(
                conn,
                actor="github",
                action="repository.rename",
                subject=f"repository:{new_name}",
                details={"from": old, "to": new_name, "github_repository_id": github_id},
            )
    if old is None:
        return _ignored(f"repository {github_id} is not registered here, or unchanged")
    return Answer(200, {"renamed": {"from": old, "to": new_name}})


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def on_pull_request_edited(database: Database, gh: GitHubIntegration, delivery: Delivery) -> Answer:
    """GitHub retargets every open pull request on a renamed base branch with this event (the
    old base in changes.base.ref.from); a person changing one PR's base sends the same one."""
    old = _mapping(_mapping(_mapping(delivery.payload.get("changes")).get("base")).get("ref"))
    new = _mapping(_mapping(delivery.payload.get("pull_request")).get("base")).get("ref")
    if not isinstance(old.get("from"), str) or not isinstance(new, str):
        return _ignored("the edit did not change the pull request's base branch")
    return _follow_branch_rename(database, gh, delivery, str(old["from"]), new)


def on_repository_edited(database: Database, gh: GitHubIntegration, delivery: Delivery) -> Answer:
    """Renaming the default branch changes the repository's default_branch too."""
    old = _mapping(_mapping(delivery.payload.get("changes")).get("default_branch")).get("from")
    new = _mapping(delivery.payload.get("repository")).get("default_branch")
    if not isinstance(old, str) or not isinstance(new, str):
        return _ignored("the edit did not change the default branch")
    return _follow_branch_rename(database, gh, delivery, old, new)


def _follow_branch_rename(
    database: Database, gh: GitHubIntegration, delivery: Delivery, old: str, new: str
) -> Answer:
    """Move the baseline history of `old` to `new` once GitHub confirms that `old` was renamed
    to `new`: GitHub answers the old name with a 301 naming the new one. The same event comes
    from a hand-made change (the old branch still exists: 200) or after a deletion (404)."""
    repo = _mapping(delivery.payload.get("repository"))
    github_id, full_name = repo.get("id"), repo.get("full_name")
    if isinstance(github_id, bool) or not isinstance(github_id, int) or not full_name:
        return _ignored("the event names no repository id")
    if old == new:
        return _ignored(f"the branch is {new!r} before and after")
    with database.read() as conn:
        registered = repositories.by_github_id(conn, github_id)
        done = registered is not None and current_name(conn, registered.id, old) == new
    if registered is None:
        return _ignored(f"repository {full_name} is not registered here")
    what = f"{registered.name}: {old!r} -> {new!r}"
    if done:
        # GitHub sends one event per retargeted pull request: the first one did the work.
        return _ignored(f"{what} was followed before; nothing changed")
    unconfirmed = _unconfirmed(gh.app, delivery, str(full_name), registered.name, old, new)
    if unconfirmed is not None:
        return _ignored(unconfirmed)
    sender = _mapping(delivery.payload.get("sender")).get("login")
    try:
        with database.write() as conn:
            result = rename_branch(
                conn,
                registered.id,
                old,
                new,
                actor=f"github:{sender}" if isinstance(sender, str) else "github",
                via=f"webhook:{delivery.event}.{delivery.action}"[:32],
            )
    except GateServerError as e:
        return _ignored(f"{what}: {e}")
    if not result.changed:
        return _ignored(f"{what} was followed before; nothing changed")
    log.info("%s: branch renamed, %d baseline runs moved", what, result.runs_moved)
    return Answer(
        200,
        {
            "branch_renamed": {
                "repository": result.repository,
                "from": old,
                "to": new,
                "baseline_runs_moved": result.runs_moved,
                "tokens_widened": result.tokens_widened,
            }
        },
    )


def _unconfirmed(
    app: GitHubApp | None, delivery: Delivery, full_name: str, name: str, old: str, new: str
) -> str | None:
    """None when GitHub confirms that `old` was renamed to `new`; else why it is not followed."""
    what = f"{name}: {old!r} -> {new!r}"
    if app is None:
        log.warning(
            "%s may be a branch rename; without GitHub App credentials it cannot be confirmed, "
            "so nothing moved (run `rnx branch rename` if it was one)",
            what,
        )
        return (
            f"{what} may be a branch rename, but this server has no GitHub App "
            "credentials (RNX_GITHUB_APP_ID) to confirm it with GitHub; if it was one, run "
            f"`rnx branch rename --repo {name} --from {old} --to {new}`"
        )
    installation = _mapping(delivery.payload.get("installation")).get("id")
    try:
        client = app.client(
            installation_id=installation if isinstance(installation, int) else None,
            repository=full_name,
        )
        found = client.branch(full_name, old)
    except GitHubError as e:
        # Not a 502: other deliveries of the same rename (one per retargeted pull request) or
        # `rnx branch rename` can still record it; this one is answered and logged.
        log.warning("%s: could not ask GitHub whether it is a rename: %s", what, e)
        return f"{what}: GitHub could not confirm a rename ({e}); nothing moved"
    if found.state == "moved" and found.to == new:
        return None
    why = {
        "exists": f"{old!r} still exists, so the base was changed by hand",
        "missing": f"{old!r} was deleted, not renamed",
    }.get(found.state, f"GitHub redirects {old!r} to {found.to!r}, not to {new!r}")
    return f"{what} is not a rename: {why}"


def on_installation(database: Database, gh: GitHubIntegration, delivery: Delivery) -> Answer:
    """The App was installed on repositories: learn their GitHub ids."""
    listed = delivery.payload.get("repositories") or delivery.payload.get("repositories_added")
    bound = []
    with database.write() as conn:
        for repo in listed if isinstance(listed, list) else []:
            if not (isinstance(repo, Mapping) and isinstance(repo.get("id"), int)):
                continue
            try:
                with conn.begin_nested():
                    ids = repositories.bind_github_id(
                        conn, int(repo["id"]), str(repo.get("full_name"))
                    )
            except AmbiguousRepository as e:
                log.warning("%s", e)
                continue
            if ids:
                bound.append(str(repo.get("full_name")))
    return Answer(200, {"bound": bound})


def on_workflow_run_completed(
    database: Database, gh: GitHubIntegration, delivery: Delivery
) -> Answer:
    """A bisection's dispatched run that failed (its build, its checkout): the step is skipped
    at once rather than after the 6-hour wait for a run that will never upload."""
    run = _mapping(delivery.payload.get("workflow_run"))
    conclusion = str(run.get("conclusion") or "")
    if conclusion in ("success", ""):
        return _ignored("a run that succeeded uploads its own results")
    full_name = str(_mapping(delivery.payload.get("repository")).get("full_name") or "")
    with database.write() as conn:
        skipped = any(
            bisection_jobs.skip_failed_run(
                conn,
                repo.id,
                str(run.get("display_title") or ""),
                conclusion,
                str(run.get("html_url") or ""),
            )
            for repo in repositories.named(conn, full_name)
        )
    if not skipped:
        return _ignored("not a run a bisection waits for")
    return Answer(200, {"skipped": True})


def on_issue_comment(database: Database, gh: GitHubIntegration, delivery: Delivery) -> Answer:
    comment = pull_request_comment(delivery.event, delivery.payload)
    if comment is None:
        return _ignored("not a new comment on a pull request")
    if comment.user_type == "Bot":
        return _ignored("comments by bots are not commands")
    command = parse_comment(comment.body)
    if command is None:
        return _ignored("no /kernalin command in the comment")
    if gh.app is None:
        return _ignored(
            "the server has no GitHub App credentials (RNX_GITHUB_APP_ID) to check "
            "permissions and answer; use the kernalin-accept workflow instead (docs/accept.md)"
        )
    client = gh.app.client(installation_id=comment.installation_id, repository=comment.repository)
    with database.read() as conn:
        registered = repositories.by_github_id(conn, comment.repository_id)
    if registered is None:
        return _reply(
            client,
            comment,
            f"{comment.repository} is not registered with this gate server; create its CI "
            "token first (`rnx token create`).",
        )
    if isinstance(command, MalformedCommand):
        return _reply(client, comment, command.problem)
    return _accept(database, gh.app, client, registered.id, comment, command)


def _accept(
    database: Database,
    app: GitHubApp,
    client: GitHubClient,
    repository_id: int,
    comment: PullRequestComment,
    command: AcceptCommand,
) -> Answer:
    pr = client.pull_request(comment.repository, comment.pr_number)
    with database.read() as conn:
        records = runs.pull_request_runs(conn, repository_id, comment.pr_number)
    head_runs = latest_runs(records, pr.head_sha)
    if not head_runs:
        return _reply(
            client,
            comment,
            f"there is no rnx-benchmark run for this pull request's head commit "
            f"{pr.head_sha[:12]} yet; wait for its job to finish, then accept.",
        )
    decision = decide_accept(
        client,
        repository=comment.repository,
        base_ref=pr.base_ref,
        user=comment.user,
        workloads=[r.workload for r in head_runs],
    )
    if not decision.allowed:
        return _reply(client, comment, f"not accepted: {decision.why}.", denied=True)
    # The paths judged above come from the uploaded documents: GitHub says whether they are
    # the files measured, at the commit measured.
    with database.read() as conn:
        documents = runs.documents(conn, [r.record.run_id for r in head_runs])
    problems = [
        p
        for r in head_runs
        if (p := run_problem(client, r.record, documents.get(r.record.run_id, b"")))
    ]
    if problems:
        return _reply(client, comment, f"not accepted: {'; '.join(problems)}.", denied=True)
    accepted = accept_runs(
        database, head_runs, user=comment.user, reason=command.reason, via="github-webhook"
    )
    warnings = publish_pull_request(
        database,
        client,
        app,
        repository=comment.repository,
        repository_id=repository_id,
        pr_number=comment.pr_number,
        head_sha=pr.head_sha,
    )
    try:
        client.react(comment.repository, comment.comment_id, "+1")
    except GitHubError as e:
        warnings.append(f"could not react to the comment: {e}")
    for w in warnings:
        log.warning("accept on %s#%s: %s", comment.repository, comment.pr_number, w)
    return Answer(
        200,
        {
            "accepted": [a["run_id"] for a in accepted],
            "status": accepted_line(comment.user, command.reason),
            "why": decision.why,
            "warnings": warnings,
        },
    )


def _reply(
    client: GitHubClient, comment: PullRequestComment, text: str, *, denied: bool = False
) -> Answer:
    body = f"@{comment.user} rnx-benchmark: {text}"
    key = "denied" if denied else "replied"
    try:
        client.create_comment(comment.repository, comment.pr_number, body)
    except GitHubError as e:
        log.warning("could not reply on %s#%s: %s", comment.repository, comment.pr_number, e)
        return Answer(200, {key: text, "warnings": [f"could not reply: {e}"]})
    return Answer(200, {key: text})


def on_push(database: Database, gh: GitHubIntegration, delivery: Delivery) -> Answer:
    """Auto-sync (gate_server/domain/autosync/): the push's commits are looked at in the outbox, so
    the answer does not wait for GitHub's API and a redelivery queues nothing new."""
    if gh.app is None:
        return _ignored("auto-sync needs GitHub App mode (RNX_GITHUB_APP_ID)")
    repo_id = _mapping(delivery.payload.get("repository")).get("id")
    if isinstance(repo_id, bool) or not isinstance(repo_id, int):
        return _ignored("the push names no repository id")
    with database.read() as conn:
        registered = repositories.by_github_id(conn, repo_id)
    if registered is None:
        return _ignored("the repository is not registered here")
    job = autosync_jobs.push_job(dict(delivery.payload), registered.id)
    if job is None:
        return _ignored("the push adds no commits to a branch")
    with database.write() as conn:
        autosync_jobs.enqueue_push(conn, job)
    return Answer(200, {"autosync": {"branch": job["branch"], "after": job["after"]}})


HANDLERS: dict[tuple[str, str | None], Handler] = {
    ("ping", None): on_ping,
    ("push", None): on_push,
    ("issue_comment", "created"): on_issue_comment,
    ("repository", "renamed"): on_rename,
    ("repository", "edited"): on_repository_edited,
    ("pull_request", "edited"): on_pull_request_edited,
    ("installation", "created"): on_installation,
    ("installation_repositories", "added"): on_installation,
    ("workflow_run", "completed"): on_workflow_run_completed,
}


# ---- the route

_BAD_SIGNATURE = (
    "X-Hub-Signature-256 is missing or does not match the body; the webhook's secret must "
    "equal RNX_GITHUB_WEBHOOK_SECRET"
)
# A delivery may be 25 MB and anyone can send one: at most this many are read at once before
# their signature is checked (the others wait), so memory stays bounded however many arrive
# together (benchmarks/server/webhook_memory.py measures it). GitHub sends one at a time per hook.
MAX_UNVERIFIED_READS = 2


async def _read_signed(request: Request, secret: str, signature: str) -> bytearray:
    """The body, its HMAC computed as it streams in (one copy in memory, never two); 413 past
    MAX_DELIVERY_BYTES, 401 when the signature does not match."""
    declared = whole_number(request.headers.get("content-length", ""), digits=30)
    if declared is not None and declared > MAX_DELIVERY_BYTES:
        raise ApiError(413, "body_too_large", f"a delivery has at most {MAX_DELIVERY_BYTES} bytes")
    mac = hmac.new(secret.encode("utf-8"), digestmod=hashlib.sha256)
    body = bytearray()
    async for chunk in request.stream():
        if len(body) + len(chunk) > MAX_DELIVERY_BYTES:
            raise ApiError(
                413, "body_too_large", f"a delivery has at most {MAX_DELIVERY_BYTES} bytes"
            )
        mac.update(chunk)
        body += chunk
    expected = ("sha256=" + mac.hexdigest()).encode("ascii")
    if not hmac.compare_digest(expected, signature.strip().encode("utf-8", "replace")):
        raise ApiError(401, "bad_signature", _BAD_SIGNATURE)
    return body


def _unverified_reads(request: Request) -> asyncio.Semaphore:
    """The app's bound on deliveries being read, made in its own event loop on first use."""
    state = request.app.state
    semaphore = getattr(state, "webhook_reads", None)
    if semaphore is None:
        semaphore = state.webhook_reads = asyncio.Semaphore(MAX_UNVERIFIED_READS)
    return semaphore


MAX_DELIVERY_ID = 100  # characters; GitHub's are GUIDs (36)

# GitHub's event and action names: lower-case words joined by "_", as stored (64 characters).
_EVENT_NAME = re.compile(r"^[a-z_]{1,64}$")


def _unstorable(event: str, payload: Mapping[str, Any], body: bytes | bytearray) -> str | None:
    """Why a signed delivery cannot be recorded, or None. GitHub sends none of these; they are
    answered 200 like any delivery we do not act on, never stored."""
    action = payload.get("action")
    if not _EVENT_NAME.match(event):
        return f"X-GitHub-Event {event[:70]!r} is not a GitHub event name"
    if action is not None and not (isinstance(action, str) and _EVENT_NAME.match(action)):
        return f"action {str(action)[:70]!r} is not a GitHub action name"
    # JSON can only carry NUL escaped; PostgreSQL text cannot hold it.
    if b"\\u0000" in body:
        return "the payload holds a NUL character (\\u0000), which GitHub never sends"
    return None


@endpoint(
    "post",
    "GitHub webhooks: ping, '/kernalin accept <reason>' PR comments, repository and branch "
    "renames, pushes (auto-sync)",
    parameters=[
        header("X-Hub-Signature-256"),
        header("X-GitHub-Event", pattern=NOT_BLANK),
        header("X-GitHub-Delivery", pattern=NOT_BLANK, maxLength=MAX_DELIVERY_ID),
    ],
    body={"type": "object"},
    responses={
        "200": {"description": "acted on, or ignored with the reason (also for redeliveries)"},
        "202": {"description": "a redelivery of a delivery still being handled"},
        "400": error("missing GitHub headers, or a body that is not a JSON object"),
        "401": error("X-Hub-Signature-256 does not match the body"),
        "413": error("the body is too large"),
        "502": error("GitHub's API failed; nothing was done, the delivery can be redelivered"),
        "503": error("the server has no webhook secret (RNX_GITHUB_WEBHOOK_SECRET)"),
    },
)
async def github_webhook(request: Request) -> Response:
    svc = services(request)
    secret = svc.github.webhook_secret
    if not secret:
        raise ApiError(
            503,
            "webhook_not_configured",
            "this server has no webhook secret: set RNX_GITHUB_WEBHOOK_SECRET to the secret "
            "configured on the GitHub webhook (or App)",
        )
    signature = request.headers.get("x-hub-signature-256")
    if not signature:
        raise ApiError(401, "bad_signature", _BAD_SIGNATURE)  # refused before reading a byte
    async with _unverified_reads(request):
        body = await _read_signed(request, secret, signature)
    event = request.headers.get("x-github-event", "").strip()
    raw_delivery_id = request.headers.get("x-github-delivery", "")
    delivery_id = raw_delivery_id.strip()
    if not event or not delivery_id or len(raw_delivery_id) > MAX_DELIVERY_ID:
        raise ApiError(
            400,
            "missing_github_headers",
            "send X-GitHub-Event and X-GitHub-Delivery as GitHub does",
        )
    payload = parse_json(body)
    if not isinstance(payload, dict):
        raise ApiError(400, "invalid_payload", "a webhook body must be a JSON object")
    unstorable = _unstorable(event, payload, body)
    if unstorable is not None:
        return JSONResponse({"delivery": delivery_id, "ignored": unstorable})
    delivery = Delivery(delivery_id, event, payload)
    answer = await run_in_threadpool(handle, svc.database, svc.github, delivery)
    return JSONResponse(answer.body, status_code=answer.status)


routes = [Route(WEBHOOK_PATH, github_webhook, methods=["POST"])]
