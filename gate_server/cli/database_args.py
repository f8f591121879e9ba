"""The `--database-url` / `--database-url-file` pair every server command takes.

A database URL may hold a password, and a command's arguments are readable by every user of
the machine (/proc/PID/cmdline, `ps`); so the URL can come from a file (a container secret) or
from the environment: `--database-url-file FILE`, `RNX_DATABASE_URL_FILE`.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from gate_server.errors import SettingsError


def add_database_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--database-url",
        help="default: RNX_DATABASE_URL (or the file RNX_DATABASE_URL_FILE names), else "
        "./rnx-gate.db; a URL with a password is seen by every user in the process list, so "
        "give that one with --database-url-file",
    )
    parser.add_argument(
        "--database-url-file", metavar="FILE", help="read the database URL from FILE"
    )


def database_url_of(args: argparse.Namespace) -> str | None:
    """The URL the flags give, or None: the settings' own (RNX_DATABASE_URL[_FILE])."""
    path = args.database_url_file
    if path is None:
        return args.database_url or None
    if args.database_url:
        raise SettingsError("give --database-url or --database-url-file, not both")
    try:
        url = Path(path).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as e:
        raise SettingsError(f"cannot read --database-url-file {path}: {e}") from None
    if not url:
        raise SettingsError(f"--database-url-file {path} is empty; write the database URL in it")
    return url
