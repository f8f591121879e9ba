"""The server's domain errors: plain exceptions whose message says what is wrong and how to fix it.

The core (gate_server/db, branches, auth, settings, receipts...) raises these; the edges turn
them into an answer: gate_server/answers.py into the one JSON error shape, gate_server/cli.py
into one line and an exit code.
"""

from __future__ import annotations


class GateServerError(Exception):
    """Something the server cannot do as asked."""


class InvalidInput(GateServerError):
    """A value given to the server (by a command, a request or a webhook) that it refuses."""


class NotFound(GateServerError):
    """A name or id that the database does not hold."""


class AmbiguousRepository(GateServerError):
    """A repository name registered in several workspaces, where one must be chosen: GitHub's
    id for it is bound by an admin (`rnx repo bind`), never by guessing."""


class SettingsError(GateServerError):
    """A setting the server cannot start with: an RNX_* variable, a key, a database URL, a
    database written by a newer version. It stops the process with one line."""
