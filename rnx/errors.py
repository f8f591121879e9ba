"""Errors a user can fix, and how a command shows them: one line, never a traceback."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable


class UserError(Exception):
    """Something the user gave us is wrong; the message says what and how to fix it."""

    exit_code = 2


def run_command(name: str, command: Callable[[], int]) -> int:
    """Run a command's body and turn what a person can fix into one line and an exit code.

    Used at the edges only (the `rnx` dispatcher, `python -m gate_server`): a UserError is
    printed as `NAME: error: ...`; anything else is a bug and keeps its traceback."""
    try:
        return command()
    except UserError as e:
        print(f"{name}: error: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader went away (`rnx compare ... | head`): not an error of ours. Point stdout
        # at /dev/null so the interpreter's final flush does not fail a second time.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
