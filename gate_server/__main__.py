"""`python -m gate_server serve|token|branch ...`: the server's own commands without the `rnx`
dispatcher, so the server starts with only its own package (gate_server/local.py uses it)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence

from gate_server.cli import branch_main, serve_main, token_main
from rnx.errors import run_command

COMMANDS: dict[str, Callable[[list[str]], int]] = {
    "serve": serve_main,
    "token": token_main,
    "branch": branch_main,
}


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] not in COMMANDS:
        print(f"usage: python -m gate_server {{{','.join(COMMANDS)}}} [ARGS...]", file=sys.stderr)
        return 2
    name, rest = args[0], args[1:]
    return run_command(f"rnx {name}", lambda: COMMANDS[name](rest))


if __name__ == "__main__":
    sys.exit(main())
