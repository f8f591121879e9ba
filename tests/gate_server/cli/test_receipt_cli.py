"""`rnx receipt verify` against a receipt from the app: by key file, by URL, and with the upload."""

from __future__ import annotations

import json

from rnx_cli.main import main
from testbed.factories import body, make_results


def _upload(client, ci_token, sign):
    tok = ci_token()
    data = body(make_results())
    answer = client.post("/api/v1/runs", content=data, headers=sign(tok.secret, data)).json()
    key = client.get("/api/v1/receipt-key").json()["public_key_pem"]
    return data, answer, key


def test_verify_with_a_key_file(client, ci_token, sign, tmp_path, capsys):
    data, answer, key = _upload(client, ci_token, sign)
    (tmp_path / "key.pem").write_text(key)
    (tmp_path / "answer.json").write_text(json.dumps(answer))
    (tmp_path / "results.json").write_bytes(data)
    key_arg = ["--key", str(tmp_path / "key.pem")]

    assert main(["receipt", "verify", answer["receipt"], *key_arg]) == 0
    claims = json.loads(capsys.readouterr().out)
    assert claims["run_id"] == answer["run_id"] and claims["tier"] == answer["tier"]
    # From a saved answer file, and checked against the uploaded bytes.
    assert (
        main(
            [
                "receipt",
                "verify",
                str(tmp_path / "answer.json"),
                *key_arg,
                "--results",
                str(tmp_path / "results.json"),
            ]
        )
        == 0
    )
    capsys.readouterr()
    (tmp_path / "other.json").write_bytes(data + b" ")
    assert (
        main(
            [
                "receipt",
                "verify",
                answer["receipt"],
                *key_arg,
                "--results",
                str(tmp_path / "other.json"),
            ]
        )
        == 1
    )
    assert "not the document" in capsys.readouterr().err


def test_forged_or_foreign_receipts_fail(client, ci_token, sign, tmp_path, capsys):
    from gate_server.domain.receipts import ReceiptSigner, generate_private_key_pem

    _, answer, key = _upload(client, ci_token, sign)
    (tmp_path / "key.pem").write_text(key)
    key_arg = ["--key", str(tmp_path / "key.pem")]
    head, payload, sig = answer["receipt"].split(".")
    assert main(["receipt", "verify", f"{head}.{payload}.{sig[::-1]}", *key_arg]) == 1
    assert "INVALID" in capsys.readouterr().err
    foreign = ReceiptSigner(generate_private_key_pem()).sign(
        {k: v for k, v in json.loads(json.dumps(answer)).items() if k in ("run_id", "tier")}
        | {"repository": "acme/kernels", "sha": "abcd", "body_sha256": "0" * 64, "iat": 1}
    )
    assert main(["receipt", "verify", foreign, *key_arg]) == 1
    capsys.readouterr()
    assert main(["receipt", "verify", "not.a.jwt", *key_arg]) == 1
    assert main(["receipt", "verify", "garbage", *key_arg]) == 2
    assert main(["receipt", "verify", answer["receipt"], "--key", str(tmp_path / "none")]) == 2


def test_verify_with_the_servers_url(shared_server, workspace, sign, capsys):
    import httpx

    from testbed.gate_helpers import create_token

    live_server = shared_server
    tok = create_token(live_server.database_url, workspace=workspace)
    data = body(make_results())
    answer = httpx.post(
        f"{live_server.url}/api/v1/runs",
        content=data,
        headers=sign(tok.secret, data),
        timeout=60,  # httpx's 5 s default is short on a loaded machine
    ).json()
    assert main(["receipt", "verify", answer["receipt"], "--url", live_server.url]) == 0
    assert json.loads(capsys.readouterr().out)["run_id"] == answer["run_id"]


def test_an_rs256_forgery_against_an_ed25519_key_is_invalid_not_an_error(
    client, ci_token, sign, tmp_path, capsys
):
    """A receipt signed with some RSA key (alg RS256) checked with the server's Ed25519 key:
    exit 1 with one INVALID line (it used to be exit 2 with a message about a generator)."""
    import jwt
    from cryptography.hazmat.primitives.asymmetric import rsa

    _, answer, key = _upload(client, ci_token, sign)
    assert "PUBLIC KEY" in key
    (tmp_path / "key.pem").write_text(key)
    claims = jwt.decode(answer["receipt"], options={"verify_signature": False})
    forger = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    forged = jwt.encode(claims | {"tier": "PASS"}, forger, algorithm="RS256")
    assert main(["receipt", "verify", forged, "--key", str(tmp_path / "key.pem")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "rnx receipt: INVALID: the receipt says it is signed with 'RS256', but the key is for EdDSA"
    ], err


def test_a_receipt_of_another_workspace_with_the_same_repository_fails(
    client, ci_token, sign, tmp_path, capsys, database_url
):
    from gate_server.db import open_database, repositories

    (tmp_path / "key.pem").write_text(client.get("/api/v1/receipt-key").json()["public_key_pem"])
    key = ["--key", str(tmp_path / "key.pem")]
    receipts = {}
    for workspace in ("acme", "intruder"):
        token = ci_token(workspace=workspace)  # both register acme/kernels
        data = body(make_results(seed=len(receipts)))
        answer = client.post("/api/v1/runs", content=data, headers=sign(token.secret, data))
        assert answer.status_code == 201, answer.text
        receipts[workspace] = answer.json()["receipt"]
    capsys.readouterr()
    verify = ["receipt", "verify", receipts["intruder"], *key]
    assert main([*verify, "--workspace", "acme"]) == 1
    assert (
        "INVALID: the receipt is of workspace 'intruder', not of workspace 'acme'"
        in capsys.readouterr().err
    )
    assert main(["receipt", "verify", receipts["acme"], *key, "--workspace", "acme"]) == 0
    claims = json.loads(capsys.readouterr().out)
    assert (claims["workspace"], claims["github_repository_id"]) == ("acme", None)
    assert isinstance(claims["repository_id"], int)
    assert main(["receipt", "verify", receipts["acme"], *key, "--github-repository-id", "42"]) == 1
    assert "names no GitHub repository id (the server did not know it)" in capsys.readouterr().err

    database = open_database(database_url)  # an admin ties acme's acme/kernels to GitHub's id
    try:
        with database.write() as conn:
            [acme] = [r for r in repositories.named(conn, "acme/kernels") if r.workspace == "acme"]
            repositories.set_github_id(conn, acme.id, 42)
    finally:
        database.close()
    token = ci_token(workspace="acme")
    data = body(make_results(seed=9))
    answer = client.post("/api/v1/runs", content=data, headers=sign(token.secret, data)).json()
    capsys.readouterr()
    bound = ["receipt", "verify", answer["receipt"], *key, "--workspace", "acme"]
    assert main([*bound, "--github-repository-id", "42"]) == 0
    assert main([*bound, "--github-repository-id", "43"]) == 1
    assert "is of GitHub repository id 42, not of 43" in capsys.readouterr().err
