"""The server's domain errors: plain exceptions whose message says what is wrong and how to fix it.

The core (gate_server/db, branches, auth, settings, receipts...) raises these; the edges turn
them into an answer: gate_server/http/answers.py into the one JSON error shape,
gate_server/cli/main.py into one line and an exit code.
"""

from __future__ import annotations

from typing import Any, ClassVar


class GateServerError(Exception):
    """Something the server cannot do as asked."""


class Refused(GateServerError):
    """Something asked of the core that it turns down. `code` names why for a program (the
    API's error code, each kind has its default); the message says what to do. What each kind
    becomes over HTTP is decided at the edge (gate_server/http/answers.py), not here, so the core is
    called the same from a route, an MCP tool, a job or a test."""

    code: ClassVar[str] = "refused"

    def __init__(self, message: str, *, code: str | None = None, details: list[Any] | None = None):
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code  # type: ignore[misc]  # an instance's own code over its kind's
        self.details = details or []


class InvalidInput(Refused):
    """A value given to the server (by a command, a request or a webhook) that it refuses."""

    code = "invalid_request"


class Malformed(Refused):
    """A body the server cannot read at all (not JSON, nested too deep)."""

    code = "invalid_json"


class NotFound(Refused):
    """A name or id that the database does not hold."""

    code = "not_found"


class Unauthenticated(Refused):
    """No credential the server can trust: missing, unknown, revoked, expired, or a signature
    that does not match."""

    code = "unauthorized"


class Forbidden(Refused):
    """A known credential that may not do this (its scope, its kind, its branch patterns)."""

    code = "forbidden"


class Conflict(Refused):
    """Asked of something whose state says otherwise (a run id stored with other bytes)."""

    code = "conflict"


class TooLarge(Refused):
    """More than the server takes in one request."""

    code = "too_large"


class RateLimited(Refused):
    """Too many calls too fast; `retry_after_s` says when to try again."""

    code = "rate_limited"

    def __init__(self, message: str, *, retry_after_s: int, code: str | None = None):
        super().__init__(message, code=code)
        self.retry_after_s = retry_after_s


class UpstreamFailed(Refused):
    """GitHub, which the answer depends on, did not answer or answered what cannot be used."""

    code = "github_unavailable"


class AmbiguousRepository(Conflict):
    """A repository name registered in several workspaces, where one must be chosen: GitHub's
    id for it is bound by an admin (`rnx repo bind`), never by guessing."""

    code = "ambiguous_repository"


class PermanentFailure(GateServerError):
    """Raised by a job's handler when trying the job again cannot help (it is marked failed)."""


class TryLater(GateServerError):
    """Raised by a job's handler that did nothing this time (a resource is busy): tried again
    with the usual backoff, logged without a traceback."""


class SettingsError(GateServerError):
    """A setting the server cannot start with: an RNX_* variable, a key, a database URL, a
    database written by a newer version. It stops the process with one line."""
