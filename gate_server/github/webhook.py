"""POST /api/v1/github/webhook: GitHub's deliveries, verified, de-duplicated and dispatched.

The signature (X-Hub-Signature-256, HMAC-SHA256 of the raw body keyed by
RNX_GITHUB_WEBHOOK_SECRET) is checked before anything is parsed. Each X-GitHub-Delivery is
acted on once: a redelivery gets the stored answer. Whatever a delivery says, a well-signed
one is never an error: what we do not act on is answered 200 with why.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from gate_server.api import read_body
from gate_server.errors import ApiError
from gate_server.github import store
from gate_server.github.integration import GitHubIntegration, integration_for
from gate_server.github.pulls import accept_runs, latest_runs, publish
from gate_server.openapi import error, operation
from gate_server.services import services
from gate_server.storage import Storage
from rnx.errors import UserError
from rnx_github.accept_rules import (
    AcceptCommand,
    MalformedCommand,
    PullRequestComment,
    decide_accept,
    parse_comment,
    pull_request_comment,
)
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


Answer = tuple[int, dict[str, Any]]
Handler = Callable[[Storage, GitHubIntegration, Delivery], Answer]


def handle(storage: Storage, gh: GitHubIntegration, delivery: Delivery) -> Answer:
    """Act on a delivery once; a redelivery (same `Delivery.key`) gets the first answer."""
    with storage.write() as conn:
        first = store.claim_delivery(conn, delivery.key, delivery.event, delivery.action)
    if not first:
        with storage.read() as conn:
            stored = store.delivery_answer(conn, delivery.key)
        if stored is not None:
            return stored
        with storage.write() as conn:
            taken = store.reclaim_stale_delivery(conn, delivery.key, STALE_CLAIM)
        if not taken:
            return 202, {"delivery": delivery.id, "status": "already being handled"}
    try:
        status, answer = dispatch(storage, gh, delivery)
    except Exception as e:
        # Forget the claim: GitHub's redelivery of a delivery we failed on must be acted on.
        with storage.write() as conn:
            store.forget_delivery(conn, delivery.key)
        if isinstance(e, GitHubError):
            raise ApiError(
                502,
                "github_unavailable",
                f"GitHub's API failed while handling this delivery ({e}); nothing was "
                "changed, redeliver it from the webhook's settings",
            ) from None
        raise
    answer = {"delivery": delivery.id, "event": delivery.event, **answer}
    with storage.write() as conn:
        store.finish_delivery(conn, delivery.key, status, answer)
    return status, answer


def dispatch(storage: Storage, gh: GitHubIntegration, delivery: Delivery) -> Answer:
    _remember_repository(storage, delivery.payload)
    handler = HANDLERS.get((delivery.event, delivery.action)) or HANDLERS.get(
        (delivery.event, None)
    )
    if handler is None:
        what = delivery.event + (f".{delivery.action}" if delivery.action else "")
        return 200, {"ignored": f"{what} is not an event this server acts on"}
    return handler(storage, gh, delivery)


def _remember_repository(storage: Storage, payload: Mapping[str, Any]) -> None:
    """A verified delivery names GitHub's id for a repository: tie it to the registered one
    of that name (once), so OIDC tokens and later renames find it by id."""
    repo = payload.get("repository")
    if isinstance(repo, Mapping) and isinstance(repo.get("id"), int) and repo.get("full_name"):
        with storage.write() as conn:
            store.bind_github_id(conn, int(repo["id"]), str(repo["full_name"]))


# ---- handlers, by (event, action)


def on_ping(storage: Storage, gh: GitHubIntegration, delivery: Delivery) -> Answer:
    return 200, {
        "pong": True,
        "zen": delivery.payload.get("zen"),
        "hook_id": delivery.payload.get("hook_id"),
    }


def on_rename(storage: Storage, gh: GitHubIntegration, delivery: Delivery) -> Answer:
    repo = delivery.payload.get("repository") or {}
    try:
        github_id, new_name = int(repo["id"]), str(repo["full_name"])
    except (KeyError, TypeError, ValueError):
        return 200, {"ignored": "the rename names no repository id"}
    with storage.write() as conn:
        old = store.rename_repository(conn, github_id, new_name)
        if old is not None:
            storage.audit(
                conn,
                actor="github",
                action="repository.rename",
                subject=f"repository:{new_name}",
                details={"from": old, "to": new_name, "github_repository_id": github_id},
            )
    if old is None:
        return 200, {"ignored": f"repository {github_id} is not registered here, or unchanged"}
    return 200, {"renamed": {"from": old, "to": new_name}}


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def on_pull_request_edited(storage: Storage, gh: GitHubIntegration, delivery: Delivery) -> Answer:
    """GitHub retargets every open pull request on a renamed base branch with this event (the
    old base in changes.base.ref.from); a person changing one PR's base sends the same one."""
    old = _mapping(_mapping(_mapping(delivery.payload.get("changes")).get("base")).get("ref"))
    new = _mapping(_mapping(delivery.payload.get("pull_request")).get("base")).get("ref")
    if not isinstance(old.get("from"), str) or not isinstance(new, str):
        return 200, {"ignored": "the edit did not change the pull request's base branch"}
    return _follow_branch_rename(storage, gh, delivery, str(old["from"]), new)


def on_repository_edited(storage: Storage, gh: GitHubIntegration, delivery: Delivery) -> Answer:
    """Renaming the default branch changes the repository's default_branch too."""
    old = _mapping(_mapping(delivery.payload.get("changes")).get("default_branch")).get("from")
    new = _mapping(delivery.payload.get("repository")).get("default_branch")
    if not isinstance(old, str) or not isinstance(new, str):
        return 200, {"ignored": "the edit did not change the default branch"}
    return _follow_branch_rename(storage, gh, delivery, old, new)


def _follow_branch_rename(
    storage: Storage, gh: GitHubIntegration, delivery: Delivery, old: str, new: str
) -> Answer:
    """Move the baseline history of `old` to `new` once GitHub confirms that `old` was renamed
    to `new`: GitHub answers the old name with a 301 naming the new one. The same event comes
    from a hand-made change (the old branch still exists: 200) or after a deletion (404)."""
    repo = _mapping(delivery.payload.get("repository"))
    github_id, full_name = repo.get("id"), repo.get("full_name")
    if isinstance(github_id, bool) or not isinstance(github_id, int) or not full_name:
        return 200, {"ignored": "the event names no repository id"}
    if old == new:
        return 200, {"ignored": f"the branch is {new!r} before and after"}
    with storage.read() as conn:
        registered = store.repository_by_github_id(conn, github_id)
        done = registered is not None and storage.current_branch(conn, registered.id, old) == new
    if registered is None:
        return 200, {"ignored": f"repository {full_name} is not registered here"}
    what = f"{registered.name}: {old!r} -> {new!r}"
    if done:
        # GitHub sends one event per retargeted pull request: the first one did the work.
        return 200, {"ignored": f"{what} was followed before; nothing changed"}
    if gh.app is None:
        log.warning(
            "%s may be a branch rename; without GitHub App credentials it cannot be confirmed, "
            "so nothing moved (run `rnx branch rename` if it was one)",
            what,
        )
        return 200, {
            "ignored": f"{what} may be a branch rename, but this server has no GitHub App "
            "credentials (RNX_GITHUB_APP_ID) to confirm it with GitHub; if it was one, run "
            f"`rnx branch rename --repo {registered.name} --from {old} --to {new}`"
        }
    installation = _mapping(delivery.payload.get("installation")).get("id")
    try:
        client = gh.app.client(
            installation_id=installation if isinstance(installation, int) else None,
            repository=str(full_name),
        )
        found = client.branch(str(full_name), old)
    except GitHubError as e:
        # Not a 502: other deliveries of the same rename (one per retargeted pull request) or
        # `rnx branch rename` can still record it; this one is answered and logged.
        log.warning("%s: could not ask GitHub whether it is a rename: %s", what, e)
        return 200, {"ignored": f"{what}: GitHub could not confirm a rename ({e}); nothing moved"}
    if found.state != "moved" or found.to != new:
        why = {
            "exists": f"{old!r} still exists, so the base was changed by hand",
            "missing": f"{old!r} was deleted, not renamed",
        }.get(found.state, f"GitHub redirects {old!r} to {found.to!r}, not to {new!r}")
        return 200, {"ignored": f"{what} is not a rename: {why}"}
    sender = _mapping(delivery.payload.get("sender")).get("login")
    try:
        with storage.write() as conn:
            result = storage.rename_branch(
                conn,
                registered.id,
                old,
                new,
                actor=f"github:{sender}" if isinstance(sender, str) else "github",
                via=f"webhook:{delivery.event}.{delivery.action}"[:32],
            )
    except UserError as e:
        return 200, {"ignored": f"{what}: {e}"}
    if not result.changed:
        return 200, {"ignored": f"{what} was followed before; nothing changed"}
    log.info("%s: branch renamed, %d baseline runs moved", what, result.runs_moved)
    return 200, {
        "branch_renamed": {
            "repository": result.repository,
            "from": old,
            "to": new,
            "baseline_runs_moved": result.runs_moved,
            "tokens_widened": result.tokens_widened,
        }
    }


def on_installation(storage: Storage, gh: GitHubIntegration, delivery: Delivery) -> Answer:
    """The App was installed on repositories: learn their GitHub ids."""
    listed = delivery.payload.get("repositories") or delivery.payload.get("repositories_added")
    bound = []
    with storage.write() as conn:
        for repo in listed if isinstance(listed, list) else []:
            if not (isinstance(repo, Mapping) and isinstance(repo.get("id"), int)):
                continue
            if store.bind_github_id(conn, int(repo["id"]), str(repo.get("full_name"))):
                bound.append(str(repo.get("full_name")))
    return 200, {"bound": bound}


def on_issue_comment(storage: Storage, gh: GitHubIntegration, delivery: Delivery) -> Answer:
    comment = pull_request_comment(delivery.event, delivery.payload)
    if comment is None:
        return 200, {"ignored": "not a new comment on a pull request"}
    if comment.user_type == "Bot":
        return 200, {"ignored": "comments by bots are not commands"}
    command = parse_comment(comment.body)
    if command is None:
        return 200, {"ignored": "no /kernalin command in the comment"}
    if gh.app is None:
        return 200, {
            "ignored": "the server has no GitHub App credentials (RNX_GITHUB_APP_ID) to check "
            "permissions and answer; use the kernalin-accept workflow instead (docs/accept.md)"
        }
    client = gh.app.client(installation_id=comment.installation_id, repository=comment.repository)
    with storage.read() as conn:
        registered = store.repository_by_github_id(conn, comment.repository_id)
    if registered is None:
        return _reply(
            client,
            comment,
            f"{comment.repository} is not registered with this gate server; create its CI "
            "token first (`rnx token create`).",
        )
    if isinstance(command, MalformedCommand):
        return _reply(client, comment, command.problem)
    return _accept(storage, gh, client, registered.id, comment, command)


def _accept(
    storage: Storage,
    gh: GitHubIntegration,
    client: GitHubClient,
    repository_id: int,
    comment: PullRequestComment,
    command: AcceptCommand,
) -> Answer:
    pr = client.pull_request(comment.repository, comment.pr_number)
    with storage.read() as conn:
        records = store.pull_request_runs(storage, conn, repository_id, comment.pr_number)
    runs = latest_runs(records, pr.head_sha)
    if not runs:
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
        workloads=[r.workload for r in runs],
    )
    if not decision.allowed:
        return _reply(client, comment, f"not accepted: {decision.why}.", denied=True)
    accepted = accept_runs(
        storage, runs, user=comment.user, reason=command.reason, via="github-webhook"
    )
    with storage.read() as conn:
        records = store.pull_request_runs(storage, conn, repository_id, comment.pr_number)
    assert gh.app is not None
    warnings = publish(
        client,
        author=gh.app.bot_login(),
        repository=comment.repository,
        pr_number=comment.pr_number,
        head_sha=pr.head_sha,
        runs=latest_runs(records, pr.head_sha),
    )
    try:
        client.react(comment.repository, comment.comment_id, "+1")
    except GitHubError as e:
        warnings.append(f"could not react to the comment: {e}")
    for w in warnings:
        log.warning("accept on %s#%s: %s", comment.repository, comment.pr_number, w)
    return 200, {
        "accepted": [a["run_id"] for a in accepted],
        "status": accepted_line(comment.user, command.reason),
        "why": decision.why,
        "warnings": warnings,
    }


def _reply(
    client: GitHubClient, comment: PullRequestComment, text: str, *, denied: bool = False
) -> Answer:
    body = f"@{comment.user} rnx-benchmark: {text}"
    key = "denied" if denied else "replied"
    try:
        client.create_comment(comment.repository, comment.pr_number, body)
    except GitHubError as e:
        log.warning("could not reply on %s#%s: %s", comment.repository, comment.pr_number, e)
        return 200, {key: text, "warnings": [f"could not reply: {e}"]}
    return 200, {key: text}


HANDLERS: dict[tuple[str, str | None], Handler] = {
    ("ping", None): on_ping,
    ("issue_comment", "created"): on_issue_comment,
    ("repository", "renamed"): on_rename,
    ("repository", "edited"): on_repository_edited,
    ("pull_request", "edited"): on_pull_request_edited,
    ("installation", "created"): on_installation,
    ("installation_repositories", "added"): on_installation,
}


# ---- the route


@operation(
    "post",
    {
        "summary": "GitHub webhooks: ping, '/kernalin accept <reason>' PR comments, "
        "repository and branch renames",
        "parameters": [
            {"name": name, "in": "header", "required": True, "schema": {"type": "string"}}
            for name in ("X-Hub-Signature-256", "X-GitHub-Event", "X-GitHub-Delivery")
        ],
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": {"type": "object"}}},
        },
        "responses": {
            "200": {"description": "acted on, or ignored with the reason (also for redeliveries)"},
            "202": {"description": "a redelivery of a delivery still being handled"},
            "400": error("missing GitHub headers, or a body that is not a JSON object"),
            "401": error("X-Hub-Signature-256 does not match the body"),
            "413": error("the body is too large"),
            "502": error("GitHub's API failed; nothing was done, the delivery can be redelivered"),
            "503": error("the server has no webhook secret (RNX_GITHUB_WEBHOOK_SECRET)"),
        },
    },
)
async def github_webhook(request: Request) -> Response:
    svc = services(request)
    gh = integration_for(request.app.state, svc.settings.github)
    secret = gh.settings.webhook_secret
    if not secret:
        raise ApiError(
            503,
            "webhook_not_configured",
            "this server has no webhook secret: set RNX_GITHUB_WEBHOOK_SECRET to the secret "
            "configured on the GitHub webhook (or App)",
        )
    body = await read_body(request, MAX_DELIVERY_BYTES)
    if not signature_ok(secret, body, request.headers.get("x-hub-signature-256")):
        raise ApiError(
            401,
            "bad_signature",
            "X-Hub-Signature-256 is missing or does not match the body; the webhook's secret "
            "must equal RNX_GITHUB_WEBHOOK_SECRET",
        )
    event = request.headers.get("x-github-event", "").strip()
    delivery_id = request.headers.get("x-github-delivery", "").strip()
    if not event or not delivery_id or len(delivery_id) > 100:
        raise ApiError(
            400,
            "missing_github_headers",
            "send X-GitHub-Event and X-GitHub-Delivery as GitHub does",
        )
    try:
        payload = json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError) as e:
        raise ApiError(400, "invalid_json", f"the body is not JSON: {e}") from None
    if not isinstance(payload, dict):
        raise ApiError(400, "invalid_payload", "a webhook body must be a JSON object")
    delivery = Delivery(delivery_id, event, payload)
    status, answer = await run_in_threadpool(handle, svc.storage, gh, delivery)
    return JSONResponse(answer, status_code=status)


routes = [Route(WEBHOOK_PATH, github_webhook, methods=["POST"])]
