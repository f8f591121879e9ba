"""Plant a secret in every place one can be given, then search everything the product writes
or shows for it: a real server (`--code`: any checkout, default this one) on a SQLite file.

    .venv/bin/python -m benchmarks.secret_sweep [--code PATH] [--blocks 6]

Planted: alert channels of each kind (Slack, Teams and generic webhook URLs to a loopback
receiver that refuses every send and repeats the request's URL in its error page, as many
error pages do; the secret in the URL's path, query and fragment, plain and percent-encoded;
an email channel's SMTP password, its server refusing), the generic webhook's signing secret,
the CI and viewer tokens, the GitHub webhook secret. Then `--blocks` BLOCKing uploads make
every channel fail that many times in a row (a channel failing, alerted to a working webhook).

Searched: the server's log; every row of every table; the dashboard's pages as a viewer;
`rnx notify list`, `list --json` and `test` for each channel (their output); what the working
receiver got (the alerts, the channel-failing alert among them). A percent-encoded secret is
searched for in both forms. Prints the hits per place and secret, then a total.

Not covered here (said so that nobody reads 0 as covering them): the GitHub App key, OIDC
tokens, PR comments and job summaries posted to GitHub, `rnx gate` logs.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import quote

import httpx
from sqlalchemy import MetaData, create_engine, select

from tests.support.code_sides import BRANCH_ROOT, start_code_server
from tests.support.factories import body, make_results
from tests.support.gate_helpers import create_token, refusing_port, signed_headers
from tests.support.receivers import HttpReceiver

WEBHOOK_SECRET = "SWEEPgithubWebhookSecret"


def _encoded(secret: str) -> str:
    """Every character percent-encoded (a URL may spell any character so)."""
    return "".join(f"%{ord(c):02X}" for c in secret)


def _planted_urls(base: str) -> dict[str, tuple[str, str]]:
    """name -> (channel kind, URL holding that name's secret)."""
    out = {}
    for kind in ("slack", "teams", "webhook"):
        plain = f"SWEEP{kind}Path"
        out[plain] = (kind, f"{base}/services/T1/B1/{plain}")
        encoded = f"SWEEP{kind}PathEnc"
        out[encoded] = (kind, f"{base}/services/T1/B1/{_encoded(encoded)}")
        query = f"SWEEP{kind}Query"
        out[query] = (kind, f"{base}/hook?sv=1&sig={query}")
        query_enc = f"SWEEP{kind}QueryEnc"
        out[query_enc] = (kind, f"{base}/hook?sig={_encoded(query_enc)}")
        fragment = f"SWEEP{kind}Fragment"
        out[fragment] = (kind, f"{base}/hook#{fragment}")
    return out


def _rnx(args: list[str], env: dict[str, str], stdin: str = "") -> str:
    done = subprocess.run(
        [sys.executable, "-m", "rnx_cli", *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    return done.stdout + done.stderr


def _table_rows(url: str) -> dict[str, str]:
    engine = create_engine(url)
    try:
        meta = MetaData()
        meta.reflect(engine)
        with engine.connect() as conn:
            return {
                name: "\n".join(repr(tuple(r)) for r in conn.execute(select(table)))
                for name, table in meta.tables.items()
            }
    finally:
        engine.dispose()


def _hits(places: dict[str, str], secrets: list[str]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for place, text in places.items():
        found = [
            s
            for s in secrets
            if s in text
            or quote(s, safe="") in text
            or _encoded(s) in text
            or _encoded(s).lower() in text
        ]
        out[place] = found
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--code", type=Path, default=BRANCH_ROOT, help="the checkout to run")
    p.add_argument("--blocks", type=int, default=6, help="BLOCKing uploads (failed sends)")
    p.add_argument(
        "--no-secret-key",
        action="store_true",
        help="run without RNX_SECRET_KEY (channel secrets then stay plain in the database)",
    )
    args = p.parse_args(argv)
    # As docs/security.md tells an operator: stored secrets encrypted with the server's key.
    keyed: dict[str, str] = {}
    if not args.no_secret_key:
        from cryptography.fernet import Fernet

        keyed["RNX_SECRET_KEY"] = Fernet.generate_key().decode()
    root = args.code.resolve()
    echo = HttpReceiver(
        fail=lambda n: True,
        failure_body=lambda path: (
            f"<html>503: could not deliver to http://127.0.0.1{path}</html>".encode()
        ),
    ).start()
    working = HttpReceiver().start()
    with tempfile.TemporaryDirectory(prefix="rnx-secret-sweep-") as tmp, refusing_port() as port:
        url = f"sqlite:///{Path(tmp) / 'sweep.db'}"
        # The tokens first, in this process (which holds no key): the server, started with
        # the key, then seals what the database holds.
        ci = create_token(url)
        viewer = create_token(url, viewer=True)
        server = start_code_server(
            root,
            url,
            Path(tmp),
            env={
                "RNX_GITHUB_WEBHOOK_SECRET": WEBHOOK_SECRET,
                "RNX_OUTBOX_POLL_MS": "100",
                **keyed,
            },
        )
        env = {**os.environ, "PYTHONPATH": str(root)}
        env = {k: v for k, v in env.items() if not k.startswith("RNX_")}
        env.update(RNX_DATABASE_URL=url, **keyed)
        try:
            cli: dict[str, str] = {}
            planted = _planted_urls(echo.url)
            for number, (name, (kind, channel_url)) in enumerate(planted.items()):
                # Named apart from the secret it holds: a channel's name is shown by design.
                cli[f"notify add {name}"] = _rnx(
                    ["notify", "add", kind, "--workspace", "acme", "--name", f"c{number}"],
                    env,
                    channel_url + "\n",
                )
            cli["notify add mail"] = _rnx(
                [
                    "notify",
                    "add",
                    "email",
                    "--workspace",
                    "acme",
                    "--name",
                    "mail",
                    "--smtp-host",
                    "127.0.0.1",
                    "--smtp-port",
                    str(port),
                    "--smtp-user",
                    "alerts",
                    "--from",
                    "gate@example.com",
                    "--to",
                    "perf@example.com",
                ],
                env,
                "SWEEPsmtpPassword\n",
            )
            cli["notify add working"] = _rnx(
                ["notify", "add", "webhook", "--workspace", "acme", "--name", "working"],
                env,
                working.url + "/ok\n",
            )
            signing = [
                line.split()[-1]
                for line in cli["notify add working"].splitlines()
                if "whsec_" in line or "signing" in line.lower()
            ]
            with httpx.Client(base_url=server.url, timeout=120) as client:
                for seed in range(args.blocks + 1):
                    # The first is the baseline; each later push BLOCKs against it.
                    slowdown = 1.0 if seed == 0 else 1.5
                    doc = make_results(seed=seed, slowdown=slowdown, sha=f"{seed:040x}")
                    data = body(doc)
                    r = client.post(
                        "/api/v1/runs", content=data, headers=signed_headers(ci.secret, data)
                    )
                    if r.status_code != 201:
                        raise SystemExit(f"upload answered {r.status_code}: {r.text[:300]}")
                run_id = r.json()["run_id"]
                time.sleep(15)  # the outbox's first tries (its retries wait 5 s and more)
                auth = {"Authorization": f"Bearer {viewer.secret}"}
                pages = {
                    f"page {path}": client.get(path, headers=auth).text
                    for path in ("/", "/repos/acme/kernels", f"/runs/{run_id}", "/audit")
                }
            cli["notify list"] = _rnx(["notify", "list", "--workspace", "acme"], env)
            cli["notify list --json"] = _rnx(
                ["notify", "list", "--workspace", "acme", "--json"], env
            )
            listed = cli["notify list --json"]
            for channel in json.loads(listed[listed.index("[") :]) if "[" in listed else []:
                test = ["notify", "test", str(channel["id"])]
                cli[f"notify test {channel['name']}"] = _rnx(test, env)
        finally:
            server.stop()
            echo.stop()
            working.stop()
        places = {"server log": server.log.read_text(errors="replace")}
        places.update({f"table {k}": v for k, v in _table_rows(url).items()})
        places.update(pages)
        places.update({f"rnx {k}": v for k, v in cli.items() if not k.startswith("notify add")})
        places["alerts received (working webhook)"] = "\n".join(
            r.body.decode(errors="replace") + json.dumps(r.headers) for r in working.received
        )
    secrets = [*planted, "SWEEPsmtpPassword", ci.secret, viewer.secret, WEBHOOK_SECRET, *signing]
    hits = _hits(places, secrets)
    total = 0
    for place, found in hits.items():
        total += len(found)
        shown = ", ".join(s if s.startswith("SWEEP") else s[:6] + "..." for s in found)
        print(f"{place:<40} {len(found):3d} {shown}")
    print(
        f"total: {total} hits of {len(secrets)} planted secrets in {len(places)} places "
        f"({len(working.received)} alerts received, {echo.refused} sends refused)"
    )
    return 1 if total else 0


if __name__ == "__main__":
    raise SystemExit(main())
