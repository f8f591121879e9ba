"""`rnx change-points list|ack` and `rnx accept` against the real server on loopback, on
SQLite and PostgreSQL: a person's own token acts, the server's refusals reach them in words."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from gate_server.settings import ServerSettings
from rnx_cli.main import main
from testbed.gate_helpers import app_without_worker, create_token
from testbed.live_server import LiveServer
from tests.gate_server.domain.test_change_points import _stepped
from tests.gate_server.http.test_acting_viewers import _pr_run


def test_a_person_lists_acknowledges_and_accepts_with_their_token(
    database_url: str,
    server_factory: Callable[..., LiveServer],
    refused_port: int,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    settings = ServerSettings(
        database_url=database_url, public_url="http://gate.test", outbox_poll_ms=60_000
    )
    with app_without_worker(settings) as app:
        history, found = _stepped(app, database_url)
        run_id = _pr_run(app, history.token)
    server = server_factory(database_url)
    carol = create_token(database_url, viewer=True, can_act=True, branches=("main",), name="carol")
    reader = create_token(database_url, viewer=True)

    def rnx(*args: str, token: str = carol.secret) -> tuple[int, str, str]:
        monkeypatch.setenv("KERNALIN_URL", server.url)
        monkeypatch.setenv("KERNALIN_TOKEN", token)
        code = main(list(args))
        out, err = capsys.readouterr()
        return code, out, err

    code, out, _ = rnx("change-points", "list", "--repo", "acme/kernels")
    assert code == 0 and f"{found['id']:>5}  open" in out, out
    code, _, err = rnx("change-points", "ack", str(found["id"]), "--note", "x", token=reader.secret)
    assert code == 2 and "answered 403: this viewer token only reads" in err, err
    code, _, err = rnx("change-points", "ack", "\u00b9", "--note", "x")
    assert code == 2 and "answered 404: no change point" in err, err
    code, out, _ = rnx("change-points", "ack", str(found["id"]), "--note", "new allocator")
    assert (code, out) == (
        0,
        f"change point {found['id']} acknowledged by token:{carol.id} (carol)\n",
    )
    code, out, _ = rnx("change-points", "list", "--repo", "acme/kernels", "--status", "open")
    assert (code, out) == (0, "no change points\n")

    code, out, _ = rnx("accept", run_id, "--reason", "new tiling, expected")
    assert code == 0 and out.startswith(f"run {run_id} accepted by token:{carol.id} (carol): "), out
    code, out, _ = rnx("accept", run_id, "--reason", "again")
    assert code == 0 and "(it was accepted before)" in out

    monkeypatch.delenv("KERNALIN_TOKEN")
    assert main(["accept", run_id, "--reason", "x", "--url", server.url]) == 2
    assert "no token: set KERNALIN_TOKEN or pass --token-file" in capsys.readouterr().err
    monkeypatch.setenv("KERNALIN_TOKEN", carol.secret)
    assert (
        main(["accept", run_id, "--reason", "x", "--url", f"http://127.0.0.1:{refused_port}"]) == 2
    )
    assert "is unreachable" in capsys.readouterr().err
