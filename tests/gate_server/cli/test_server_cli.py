"""`rnx token create|list|revoke` and `rnx serve`'s argument errors, through the real dispatcher."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gate_server.db import Database, audit, tokens
from gate_server.domain.auth import hash_token
from rnx_cli.main import main


def test_token_lifecycle(database_url, capsys):
    url = ["--database-url", database_url]
    assert (
        main(
            [
                "token",
                "create",
                "--workspace",
                "acme",
                "--repo",
                "acme/kernels",
                "--branches",
                "main,release/*",
                *url,
            ]
        )
        == 0
    )
    out, err = capsys.readouterr()
    secret = out.strip()
    assert secret.startswith("rnx_ci_") and len(secret) > 40
    assert "shown only this once" in err
    assert main(["token", "create", "--workspace", "acme", "--viewer", *url]) == 0
    viewer = capsys.readouterr().out.strip()
    assert viewer.startswith("rnx_view_")

    assert main(["token", "list", "--json", *url]) == 0
    listing = capsys.readouterr().out
    assert secret not in listing and viewer not in listing  # only prefixes are shown
    rows = json.loads(listing)
    assert [(r["kind"], r["repository"], r["branches"], r["revoked"]) for r in rows] == [
        ("ci", "acme/kernels", ["main", "release/*"], False),
        ("viewer", None, [], False),
    ]
    assert main(["token", "list", *url]) == 0
    assert "acme/kernels" in capsys.readouterr().out

    assert main(["token", "revoke", str(rows[0]["id"]), *url]) == 0
    assert "revoked" in capsys.readouterr().out
    assert main(["token", "revoke", str(rows[0]["id"]), *url]) == 0
    assert "already revoked" in capsys.readouterr().out

    s = Database(database_url)
    try:
        with s.read() as conn:
            stored = tokens.all_tokens(conn)
            actions = [e["action"] for e in audit.entries(conn)]
    finally:
        s.close()
    # Stored only as a hash.
    assert stored[0].token_hash == hash_token(secret) and secret not in stored[0].token_hash
    assert stored[0].revoked_at is not None
    assert actions == ["token.create", "token.create", "token.revoke"]


def test_token_errors_are_one_line(database_url, capsys):
    url = ["--database-url", database_url]
    cases = [
        (["token", "create", "--workspace", "acme", "--branches", "main"], "--repo OWNER/NAME"),
        (["token", "create", "--workspace", "acme", "--repo", "acme/k"], "--branches"),
        (
            [
                "token",
                "create",
                "--workspace",
                "acme",
                "--repo",
                "not a repo",
                "--branches",
                "main",
            ],
            "OWNER/NAME",
        ),
        (
            ["token", "create", "--workspace", "acme", "--repo", "acme/k", "--branches", "ma in"],
            "branch pattern",
        ),
        (["token", "create", "--workspace", "a b", "--viewer"], "workspace"),
        (["token", "revoke", "999"], "no token with id 999"),
    ]
    for argv, expected in cases:
        assert main([*argv, *url]) == 2, argv
        err = capsys.readouterr().err
        assert expected in err and err.count("\n") == 1, err
    assert main(["token", "list", "--database-url", "nonsense://"]) == 2
    assert "unsupported database" in capsys.readouterr().err


def test_serve_refuses_a_bad_database_url(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("RNX_DATABASE_URL", "")  # serve sets it for its workers; restored after
    assert main(["serve", "--database-url", "nonsense://x"]) == 2
    assert "unsupported database" in capsys.readouterr().err
    assert main(["serve", "--workers", "0"]) == 2
    assert "--workers" in capsys.readouterr().err
    monkeypatch.setenv("RNX_BLOCK_THRESHOLD", "lots")
    assert main(["serve", "--database-url", f"sqlite:///{tmp_path / 'x.db'}"]) == 2
    assert "RNX_BLOCK_THRESHOLD" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("variable", "value", "says"),
    [
        ("RNX_RESAMPLES", "100", "RNX_RESAMPLES=100 must be at least 2000"),
        ("RNX_PORT", "eighty", "RNX_PORT='eighty' is not a whole number"),
        ("RNX_PORT", "0", "RNX_PORT=0 must be at least 1"),
    ],
)
def test_serve_stops_with_one_line_naming_a_bad_variable(
    tmp_path: Path, variable: str, value: str, says: str
) -> None:
    """The real command, as a user starts it: exit 2 and one line on stderr, no traceback
    (RNX_PORT used to print one; RNX_RESAMPLES=100 used to start a server that answered 500)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RNX_")}
    env[variable] = value
    done = subprocess.run(
        [sys.executable, "-m", "rnx_cli", "serve", "--database-url", f"sqlite:///{tmp_path}/x.db"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and says in done.stderr, done.stderr
    assert not (tmp_path / "x.db").exists()  # stopped before it opened anything
