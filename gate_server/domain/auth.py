"""Tokens (issued, hashed, looked up, scoped) and the HMAC signature on uploads."""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import time
from collections.abc import Callable, Sequence
from datetime import timedelta

from gate_server.clock import utcnow
from gate_server.db import Database, audit, repositories, tokens
from gate_server.db.tokens import AGENT, CI, VIEWER, TokenRecord
from gate_server.errors import Forbidden, InvalidInput, NotFound, Unauthenticated
from rnx.branches import BRANCH_PATTERN

_PREFIX = {CI: "rnx_ci_", VIEWER: "rnx_view_", AGENT: "rnx_agent_"}
# Recording each use as a write would make every read a write; a minute is precise enough.
_TOUCH_EVERY = timedelta(minutes=1)


def looks_like_jwt(token: str) -> bool:
    """A JWT (three base64url parts, JSON header) rather than one of our opaque CI tokens."""
    return token.startswith("eyJ") and token.count(".") == 2


def hash_token(secret: str) -> str:
    # The secret has 256 random bits, so one fast hash is enough: nothing to brute-force.
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def sign_upload(secret: str, timestamp: str, body: bytes) -> str:
    """X-Kernalin-Signature for an upload: sha256=HMAC-SHA256(token, "timestamp.body")."""
    mac = hmac.new(secret.encode("utf-8"), timestamp.encode("ascii") + b"." + body, hashlib.sha256)
    return "sha256=" + mac.hexdigest()


def check_branch_patterns(patterns: Sequence[str]) -> list[str]:
    cleaned = [p.strip() for p in patterns if p.strip()]
    for p in cleaned:
        if not BRANCH_PATTERN.match(p):
            raise InvalidInput(
                f"{p!r} is not a branch pattern; use names like main or release/* "
                "(letters, digits, . _ - / and * only)"
            )
    return cleaned


# A token's name is shown inside an actor ("token:8 (alice)"): no parentheses, no controls.
_TOKEN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9 _.@+-]{0,63}")


def check_token_name(name: str | None) -> str | None:
    if name is None:
        return None
    name = name.strip()
    if not _TOKEN_NAME.fullmatch(name):
        raise InvalidInput(
            f"--name {name[:80]!r}: use 1 to 64 letters, digits, spaces and . _ @ + - "
            "(the person or system that holds the token, e.g. alice or release-bot)"
        )
    return name


def _check_acting(viewer: bool, can_act: bool, branches: Sequence[str]) -> None:
    if can_act and not viewer:
        raise InvalidInput("--can-act is for viewer tokens (--viewer); a CI token acts already")
    if viewer and branches and not can_act:
        raise InvalidInput("--branches on a viewer token limits what it may act on; add --can-act")
    if can_act and not branches:
        raise InvalidInput(
            "a viewer token that may act needs --branches: the baseline branches whose change "
            "points it may acknowledge and whose runs it may accept, e.g. --branches main"
        )


def issue_token(
    database: Database,
    *,
    workspace: str,
    repository: str | None,
    branches: Sequence[str],
    viewer: bool,
    actor: str,
    name: str | None = None,
    can_act: bool = False,
) -> tuple[int, str]:
    """Create a token; returns (id, secret). The secret is never stored, only its hash."""
    kind = VIEWER if viewer else CI
    name = check_token_name(name)
    _check_acting(viewer, can_act, [b for b in branches if b.strip()])
    if not viewer and not repository:
        raise InvalidInput("a CI token needs --repo OWNER/NAME (viewer tokens take --viewer)")
    if not viewer and not branches:
        raise InvalidInput("a CI token needs --branches, e.g. --branches main,release/*")
    if not re.match(r"^[A-Za-z0-9_.-]{1,100}$", workspace):
        raise InvalidInput(f"workspace {workspace!r}: use letters, digits, '.', '_' and '-' only")
    if repository is not None and not re.match(
        r"^[A-Za-z0-9_.-]{1,100}/[A-Za-z0-9_.-]{1,100}$", repository
    ):
        raise InvalidInput(f"--repo {repository!r} must look like OWNER/NAME")
    patterns = check_branch_patterns(branches)
    secret = _PREFIX[kind] + secrets.token_urlsafe(32)
    with database.write() as conn:
        workspace_id = repositories.ensure_workspace(conn, workspace)
        repository_id = repositories.ensure(conn, workspace_id, repository) if repository else None
        token_id = tokens.insert_token(
            conn,
            kind=kind,
            workspace_id=workspace_id,
            repository_id=repository_id,
            branches=patterns,
            token_hash=hash_token(secret),
            prefix=secret[: len(_PREFIX[kind]) + 4],
            name=name,
            can_act=can_act,
        )
        audit.record(
            conn,
            actor=actor,
            action="token.create",
            subject=f"token:{token_id}",
            details={
                "kind": kind,
                "workspace": workspace,
                "repository": repository,
                "branches": patterns,
                "name": name,
                "can_act": can_act,
            },
        )
    return token_id, secret


def actor_of(token: TokenRecord) -> str:
    """Who did it, for the audit log and the pages: the GitHub user whose workflow an OIDC
    token speaks for (GitHub signed the claim) or who signed in with GitHub, else the stored
    token, by its name when it has one ("token:8 (alice)")."""
    if token.github_actor or token.github_login:
        return f"github:{token.github_actor or token.github_login}"
    return f"token:{token.id} ({token.name})" if token.name else f"token:{token.id}"


def may_act_on(token: TokenRecord, *, repository_id: int, workspace_id: int) -> bool:
    """Whether a token may act (accept a run, acknowledge a change point) on a repository: a CI
    token on its own, a viewer token made with --can-act on any of its workspace's. Its branch
    patterns are checked apart, against the branch acted on."""
    if token.kind in (CI, AGENT):  # an agent's accept scope is checked at /mcp
        return token.repository_id == repository_id
    return token.kind == VIEWER and token.can_act and token.workspace_id == workspace_id


def refuse_read_only(token: TokenRecord, what: str) -> None:
    """403 for a viewer token that may only read."""
    if token.kind == VIEWER and not token.can_act:
        raise Forbidden(
            f"this viewer token only reads; to {what}, use a viewer token made with "
            "`rnx token create --viewer --can-act --branches ...` or the repository's CI token",
            code="viewer_token",
        )


def revoke_token(database: Database, token_id: int, *, actor: str) -> bool:
    """False when the token was revoked before."""
    with database.write() as conn:
        if tokens.by_id(conn, token_id) is None:
            raise NotFound(f"no token with id {token_id}; `rnx token list` shows the ids")
        done = tokens.revoke(conn, token_id, utcnow())
        if done:
            audit.record(conn, actor=actor, action="token.revoke", subject=f"token:{token_id}")
    return done


def bearer_secret(authorization: str | None) -> str:
    if not authorization:
        raise Unauthenticated(
            "send the token as 'Authorization: Bearer <token>' (rnx token create makes one)",
            code="missing_token",
        )
    scheme, _, secret = authorization.partition(" ")
    if scheme.lower() != "bearer" or not secret.strip():
        raise Unauthenticated(
            "the Authorization header must be 'Bearer <token>'", code="bad_authorization"
        )
    return secret.strip()


def authenticate(
    database: Database,
    authorization: str | None,
    *,
    oidc: Callable[[Database, str], TokenRecord] | None = None,
    agent: bool = False,
) -> tuple[TokenRecord, str]:
    """The token behind an Authorization header, and its secret (it keys the signature).
    An agent token only where `agent` (the MCP endpoint, gate_server/domain/agents.py): its scopes
    are checked there, so the rest of the API refuses it."""
    secret = bearer_secret(authorization)
    if oidc is not None and looks_like_jwt(secret):
        # A JWT is a GitHub Actions OIDC token (gate_server/github/oidc_login.py): it acts
        # with its repository's CI scope and keys the upload signature like a CI token.
        return oidc(database, secret), secret
    digest = hash_token(secret)
    with database.lookup() as conn:
        token = tokens.by_hash(conn, digest)
    # The lookup is by hash of a 256-bit secret; compare_digest keeps the final check
    # constant-time anyway, so no timing difference tells a near-miss from a miss.
    if token is None or not hmac.compare_digest(token.token_hash, digest):
        raise Unauthenticated(
            "the token is not known to this server; create one with `rnx token create`",
            code="unknown_token",
        )
    if token.revoked_at is not None:
        raise Unauthenticated(
            f"token {token.id} was revoked; create a new one with `rnx token create`",
            code="revoked_token",
        )
    if (token.kind == AGENT) != agent:
        raise Forbidden(
            "an agent token works only at /mcp (docs/agents.md)"
            if token.kind == AGENT
            else "/mcp takes an agent token: rnx token create --agent NAME --for USER",
            code="agent_token" if token.kind == AGENT else "not_an_agent_token",
        )
    if token.last_used_at is None or utcnow() - token.last_used_at > _TOUCH_EVERY:
        with database.write() as conn:
            tokens.touch(conn, token.id, utcnow())
    return token, secret


def check_signature(
    secret: str,
    timestamp: str | None,
    signature: str | None,
    body: bytes,
    *,
    tolerance_s: int,
    now: float | None = None,
) -> str:
    """Refuse an upload whose timestamp is stale or whose signature does not match the body;
    the signature, as checked."""
    if not timestamp:
        raise Unauthenticated(
            "send X-Kernalin-Timestamp: the upload's time in Unix seconds", code="missing_timestamp"
        )
    if not signature:
        raise Unauthenticated(
            "send X-Kernalin-Signature: sha256=<HMAC-SHA256 "
            "of 'timestamp.body' keyed by the token>",
            code="missing_signature",
        )
    if not re.fullmatch(r"[0-9]{1,12}", timestamp.strip()):
        raise Unauthenticated(
            f"X-Kernalin-Timestamp {timestamp[:40]!r} is not Unix seconds", code="bad_timestamp"
        )
    now = time.time() if now is None else now
    skew = abs(now - int(timestamp))
    if skew > tolerance_s:
        raise Unauthenticated(
            f"X-Kernalin-Timestamp is {int(skew)} s away from "
            f"the server's clock (at most {tolerance_s} s); sign each upload afresh "
            "and check the runner's clock",
            code="stale_timestamp",
        )
    expected = sign_upload(secret, timestamp.strip(), body)
    signature = signature.strip()
    if not hmac.compare_digest(expected.encode(), signature.encode("utf-8", "replace")):
        raise Unauthenticated(
            "X-Kernalin-Signature does not match the body: sign "
            "'timestamp.body' with HMAC-SHA256 keyed by the token, as sha256=<hex>",
            code="bad_signature",
        )
    return signature
