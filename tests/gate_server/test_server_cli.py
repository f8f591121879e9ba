"""`rnx token create|list|revoke` and `rnx serve`'s argument errors, through the real dispatcher."""

from __future__ import annotations

import json

from gate_server.auth import hash_token
from gate_server.storage import Storage
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

    s = Storage(database_url)
    try:
        with s.read() as conn:
            tokens = s.list_tokens(conn)
            actions = [e["action"] for e in s.audit_entries(conn)]
    finally:
        s.close()
    # Stored only as a hash.
    assert tokens[0].token_hash == hash_token(secret) and secret not in tokens[0].token_hash
    assert tokens[0].revoked_at is not None
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
