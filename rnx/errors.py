"""Errors a user can fix, and how a command shows them: one line, never a traceback."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable


class UserError(Exception):
    """A command's input is wrong (a flag, a file it names, the checkout it runs in): the CLI
    prints the message, which says what and how to fix it, and exits with `exit_code`."""

    exit_code = 2


class InvalidData(Exception):
    """Data handed to the contracts is not what they take (a results document): a domain error,
    whoever handed it over. The CLI shows it as it shows a UserError; the server answers 422."""

    exit_code = 2

    def __init__(self, message: str, details: list[dict[str, str]] | None = None):
        super().__init__(message)
        self.details = details or []


def run_command(name: str, command: Callable[[], int]) -> int:
    """Run a command's body and turn what a person can fix into one line and an exit code.

    Used at the edges only (the `rnx` dispatcher, `python -m gate_server`): a UserError or an
    InvalidData is printed as `NAME: error: ...`; anything else is a bug and keeps its
    traceback."""
    try:
        return command()
    except (UserError, InvalidData) as e:
        print(f"{name}: error: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader went away (`rnx compare ... | head`): not an error of ours. Point stdout
        # at /dev/null so the interpreter's final flush does not fail a second time.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
