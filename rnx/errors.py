"""Errors a user can fix: the CLI prints them as one line, never a traceback."""

from __future__ import annotations


class UserError(Exception):
    """Something the user gave us is wrong; the message says what and how to fix it."""

    exit_code = 2
