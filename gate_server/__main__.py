"""`python -m gate_server serve|token|branch ...`: the server's own commands without the `rnx`
dispatcher, so the server starts with only its own package (the tests' live_server.py uses
it)."""

from __future__ import annotations

import sys

from gate_server.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
