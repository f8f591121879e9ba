"""Agent tokens: a coding agent acting for one user on one repository, with scopes (read,
benchmark, upload, accept) and an expiry; made by an admin on the command line, used only at
/mcp (gate_server/http/mcp.py), every action audited as "agent <name> for <user>"."""

from __future__ import annotations

import re
import secrets
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from gate_server.clock import utcnow
from gate_server.db import Database, agent_tokens, audit, repositories, tokens
from gate_server.db.agent_tokens import AgentGrant
from gate_server.db.tokens import AGENT, TokenRecord
from gate_server.domain.auth import authenticate, check_branch_patterns, hash_token
from gate_server.errors import Forbidden, InvalidInput, RateLimited, Unauthenticated

READ, BENCHMARK, UPLOAD, ACCEPT = "read", "benchmark", "upload", "accept"
SCOPES = (READ, BENCHMARK, UPLOAD, ACCEPT)
# An agent token that never expires would outlive the session it was made for.
MAX_LIFETIME = timedelta(days=90)
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@-]{0,99}$")
_REPOSITORY = re.compile(r"^[A-Za-z0-9_.-]{1,100}/[A-Za-z0-9_.-]{1,100}$")


@dataclass(frozen=True)
class Agent:
    """The agent behind a request: its token (workspace, repository, branches) and grant."""

    token: TokenRecord
    grant: AgentGrant
    # It keys the signature stored with the agent's uploads; never shown.
    secret: str = field(repr=False)

    @property
    def actor(self) -> str:
        return f"agent {self.grant.name} for {self.grant.for_user}"


def parse_scopes(text: str) -> list[str]:
    asked = {s.strip().lower() for s in text.split(",") if s.strip()}
    if not asked or not asked <= set(SCOPES):
        raise InvalidInput(
            f"--scopes {text[:100]!r}: give some of {', '.join(SCOPES)}, comma-separated"
        )
    return [s for s in SCOPES if s in asked]


def parse_expiry(text: str, now: datetime) -> datetime:
    """--expires: a duration (30m, 12h, 7d) or an ISO time with a zone, at most 90 days ahead."""
    found = re.fullmatch(r"([0-9]{1,4})([mhd])", text.strip())
    if found:
        unit = {"m": "minutes", "h": "hours", "d": "days"}[found.group(2)]
        when = now + timedelta(**{unit: int(found.group(1))})
    else:
        try:
            when = datetime.fromisoformat(text.strip())
        except ValueError:
            raise InvalidInput(
                f"--expires {text[:60]!r}: give a duration (30m, 12h, 7d) or an ISO time "
                "with a zone (2027-01-31T00:00:00+00:00)"
            ) from None
        if when.tzinfo is None:
            raise InvalidInput(f"--expires {text[:60]!r}: give the time's zone, e.g. +00:00")
    if when <= now:
        raise InvalidInput(f"--expires {text[:60]!r} is not in the future")
    if when - now > MAX_LIFETIME:
        raise InvalidInput(f"--expires {text[:60]!r}: an agent token lives at most 90 days")
    return when


def issue_agent_token(
    database: Database,
    *,
    workspace: str,
    repository: str,
    branches: Sequence[str],
    name: str,
    for_user: str,
    scopes: Sequence[str],
    expires_at: datetime,
    accept_granted_by: str | None,
    actor: str,
) -> tuple[int, str]:
    """Create an agent token; returns (id, secret), the secret shown once and stored hashed."""
    for label, value in (("--agent", name), ("--for", for_user), ("--workspace", workspace)):
        if not _NAME.match(value):
            raise InvalidInput(f"{label} {value[:100]!r}: letters, digits, '.', '_', '@', '-'")
    if not _REPOSITORY.match(repository):
        raise InvalidInput(f"--repo {repository[:200]!r} must look like OWNER/NAME")
    if ACCEPT in scopes and not accept_granted_by:
        raise InvalidInput(
            "the accept scope is granted by a code owner of the repository: "
            "name them with --accept-granted-by GITHUB_USER"
        )
    if accept_granted_by and (ACCEPT not in scopes or not _NAME.match(accept_granted_by)):
        raise InvalidInput("--accept-granted-by goes with the accept scope and names a user")
    patterns = check_branch_patterns(branches)
    if not patterns:
        raise InvalidInput("an agent token needs --branches, e.g. --branches main")
    secret = "rnx_agent_" + secrets.token_urlsafe(32)
    with database.write() as conn:
        workspace_id = repositories.ensure_workspace(conn, workspace)
        repository_id = repositories.ensure(conn, workspace_id, repository)
        token_id = tokens.insert_token(
            conn,
            kind=AGENT,
            workspace_id=workspace_id,
            repository_id=repository_id,
            branches=patterns,
            token_hash=hash_token(secret),
            prefix=secret[:14],
        )
        agent_tokens.insert_grant(
            conn,
            token_id=token_id,
            name=name,
            for_user=for_user,
            scopes=scopes,
            expires_at=expires_at,
            accept_granted_by=accept_granted_by,
        )
        audit.record(
            conn,
            actor=actor,
            action="token.create",
            subject=f"token:{token_id}",
            details={
                "kind": AGENT,
                "workspace": workspace,
                "repository": repository,
                "branches": patterns,
                "agent": name,
                "for": for_user,
                "scopes": list(scopes),
                "expires_at": expires_at.isoformat(),
                "accept_granted_by": accept_granted_by,
            },
        )
    return token_id, secret


def authenticate_agent(database: Database, authorization: str | None) -> Agent:
    """The agent behind an Authorization header: a known, unrevoked, unexpired agent token."""
    token, secret = authenticate(database, authorization, agent=True)
    with database.lookup() as conn:
        grant = agent_tokens.of_token(conn, token.id)
    if grant is None:
        raise Unauthenticated(
            "the agent token has no grant; create a new one", code="unknown_token"
        )
    if grant.expires_at <= utcnow():
        raise Unauthenticated(
            f"agent token {token.id} expired at {grant.expires_at.isoformat(timespec='seconds')}; "
            "ask for a new one (rnx token create --agent)",
            code="expired_token",
        )
    return Agent(token, grant, secret)


def require_scope(database: Database, agent: Agent, scope: str, what: str) -> None:
    """Refuse (and audit the refusal of) an action the agent's token has no scope for."""
    if scope in agent.grant.scopes:
        return
    with database.write() as conn:
        audit.record(
            conn,
            actor=agent.actor,
            token_id=agent.token.id,
            action="agent.refused",
            subject=f"token:{agent.token.id}",
            details={"tool": what, "missing_scope": scope},
        )
    raise Forbidden(
        f"{what} needs the {scope!r} scope; this token has {', '.join(agent.grant.scopes)}"
        + (" (a code owner grants accept: --accept-granted-by)" if scope == ACCEPT else ""),
        code="missing_scope",
    )


class RateLimit:
    """At most `per_minute` calls per token in any minute (a token bucket per token, per
    process): an agent in a loop cannot starve CI's uploads."""

    def __init__(self, per_minute: int, clock: Callable[[], float] | None = None) -> None:
        self.per_minute = per_minute
        self._clock = clock or time.monotonic
        self._buckets: dict[int, tuple[float, float]] = {}
        self._lock = threading.Lock()

    def take(self, token_id: int) -> None:
        now = self._clock()
        with self._lock:
            tokens_left, then = self._buckets.get(token_id, (float(self.per_minute), now))
            tokens_left = min(self.per_minute, tokens_left + (now - then) * self.per_minute / 60)
            if tokens_left < 1:
                wait = (1 - tokens_left) * 60 / self.per_minute
                raise RateLimited(
                    f"this agent token made more than {self.per_minute} calls a minute; "
                    f"retry in {wait:.0f} s",
                    code="rate_limited",
                    retry_after_s=max(1, round(wait)),
                )
            self._buckets[token_id] = (tokens_left - 1, now)
