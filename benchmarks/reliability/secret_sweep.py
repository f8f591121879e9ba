"""Plant a secret in every place one can be given, then search everything the product writes
or shows for it: a real server (`--code`: any checkout, default this one) on SQLite and on
PostgreSQL, in GitHub App mode against the GitHub fake.

    .venv/bin/python -m benchmarks.reliability.secret_sweep [--code PATH] [--database
    sqlite,postgresql]
                                                [--blocks 6]

Planted: alert channels of each kind (Slack, Teams and generic webhook URLs to a loopback
receiver that refuses every send and repeats the request's URL in its error page, as many
error pages do; the secret in the URL's path, query and fragment, plain and percent-encoded;
an email channel's SMTP password, its server refusing), the generic webhook's signing secret;
the CI, viewer, acting viewer and agent tokens; the GitHub webhook secret; the GitHub App's
private key and the installation tokens GitHub hands the server; the database password (in
the PostgreSQL URL); RNX_SECRET_KEY; a job's GITHUB_TOKEN, its OIDC request token and the OIDC
tokens GitHub mints for it. Then `--blocks` BLOCKing uploads make every channel fail that many
times in a row (a channel failing, alerted to a working webhook), `rnx gate` reports a pull
request (CI token) and a push (OIDC) as a GitHub Actions job would, the server posts the pull
request's verdict as the App, an agent reads it over MCP, and `rnx secrets rotate` runs.

Searched: the server's log; every row of every table; the dashboard's pages as a viewer and as
an acting viewer; `rnx notify list`, `list --json` and `test` for each channel, `rnx secrets
rotate`; what the working receiver got (the alerts, the channel-failing alert among them);
`rnx gate`'s log as the runner shows it (its `::add-mask::` lines applied), its stderr, job
summary, step outputs and --results-dir files; the PR comments and commit statuses GitHub got
(from the job and from the App); the MCP answers. A percent-encoded secret is searched for in
both forms, a key or token also by a 24-character piece of it. Prints the hits per place and
secret, then a total per database.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
from sqlalchemy import MetaData, create_engine, select

from testbed.code_sides import BRANCH_ROOT, start_code_server
from testbed.factories import body, make_results
from testbed.gate_helpers import create_token, refusing_port, signed_headers
from testbed.receivers import HttpReceiver

WEBHOOK_SECRET = "SWEEPgithubWebhookSecret"
DB_PASSWORD = "SWEEPdbPassword"
GITHUB_TOKEN = "ghs_SWEEPjobToken0123456789abcdefghij"
OIDC_REQUEST_TOKEN = "SWEEPoidcRequestToken0123456789"
REPO = "acme/kernels"
GITHUB_REPOSITORY_ID = 4242
APP_ID = "314"
PR = 9


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


def _pieces(secret: str) -> list[str]:
    """What to look for: the secret, its percent-encodings, and for a long key or token a
    24-character piece of its middle (a log may cut a secret, or wrap a PEM key's lines)."""
    found = [secret, quote(secret, safe=""), _encoded(secret), _encoded(secret).lower()]
    if len(secret) > 48:
        body = "".join(secret.split()[1:-1]) if "PRIVATE KEY" in secret else secret
        middle = len(body) // 2
        found.append(body[middle - 12 : middle + 12])
    return found


def _hits(places: dict[str, str], secrets: dict[str, str]) -> dict[str, list[str]]:
    """Per place, the names of the secrets found in it."""
    return {
        place: [name for name, s in secrets.items() if any(p in text for p in _pieces(s))]
        for place, text in places.items()
    }


@contextmanager
def _database(kind: str, tmp: Path) -> Iterator[str]:
    """A fresh database of that kind; PostgreSQL's URL holds a password (trust auth ignores it)."""
    if kind == "sqlite":
        yield f"sqlite:///{tmp / 'sweep.db'}"
        return
    from sqlalchemy.engine import make_url

    from testbed.gate_helpers import fresh_postgres_schema, postgres_base_url

    base = make_url(postgres_base_url()).set(password=DB_PASSWORD)
    url, drop = fresh_postgres_schema(base.render_as_string(hide_password=False))
    try:
        yield url
    finally:
        drop()


@contextmanager
def _github(app_pem_public: str) -> Iterator[tuple[str, Any]]:
    """The GitHub fake, with the App installed on the repository and the job's token."""
    from rnx_github.client import ACTIONS_BOT
    from testbed.fakes import fake_github
    from testbed.fakes.github_endpoints import FakeApp, extras

    with fake_github.serve() as (url, state):
        extras(state).app = FakeApp(APP_ID, app_pem_public, installations={REPO: 77})
        state.tokens[GITHUB_TOKEN] = fake_github.Token(ACTIONS_BOT, is_app=True)
        yield url, state


def _app_key() -> tuple[str, str]:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    public = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return private, public.decode()


def _gate(root: Path, tmp: Path, name: str, env: dict[str, str], argv: list[str]) -> dict[str, str]:
    """`rnx gate` as a GitHub Actions job runs it; every text it leaves, by place."""
    job = tmp / name
    job.mkdir()
    env = {
        **env,
        "GITHUB_ACTIONS": "true",
        "GITHUB_REPOSITORY": REPO,
        "GITHUB_OUTPUT": str(job / "output"),
        "GITHUB_STEP_SUMMARY": str(job / "summary.md"),
    }
    done = subprocess.run(
        [sys.executable, "-m", "rnx_cli", "gate", *argv, "--results-dir", str(job / "results")],
        capture_output=True,
        text=True,
        env=env,
        cwd=job,
        timeout=300,
    )
    places = {f"rnx gate {name}: log as the runner shows it": as_the_runner_shows(done.stdout)}
    places[f"rnx gate {name}: stderr"] = done.stderr
    # A control, not counted: the raw stdout holds the masked values in its ::add-mask:: lines,
    # so the search must find them there (it would find a leak the same way).
    places[f"control: rnx gate {name}: raw stdout"] = done.stdout
    for f in sorted(job.rglob("*")):
        if f.is_file():
            places[f"rnx gate {name}: {f.relative_to(job)}"] = f.read_text(errors="replace")
    return places


def as_the_runner_shows(log: str) -> str:
    """A job's log as GitHub Actions shows it: an `::add-mask::VALUE` line is consumed by the
    runner, and VALUE is shown as *** in every later line (never in an earlier one)."""
    masked: list[str] = []
    shown = []
    for line in log.splitlines():
        if line.startswith("::add-mask::"):
            masked.append(line.removeprefix("::add-mask::"))
            continue
        for value in masked:
            line = line.replace(value, "***")
        shown.append(line)
    return "\n".join(shown)


def _mcp(url: str, secret: str, pr_number: int) -> str:
    """An agent's read of the pull request's verdict over MCP (the SDK's own client, as
    `rnx mcp` connects to the server)."""
    from rnx_cli.mcp_stdio import gate_session

    async def go() -> str:
        async with gate_session(url, secret) as session:
            found = await session.call_tool("run_verdict", {"pull_request": pr_number})
            return found.model_dump_json()

    return asyncio.run(go())


def sweep(root: Path, kind: str, blocks: int) -> tuple[dict[str, list[str]], int]:
    """One server on one database kind: (hits per place, how many secrets were planted)."""
    from cryptography.fernet import Fernet

    from gate_server.clock import utcnow
    from gate_server.db import open_database, repositories
    from gate_server.domain.agents import issue_agent_token
    from testbed.oidc_issuer import OidcIssuer

    # As docs/security.md tells an operator: stored secrets encrypted with the server's key.
    secret_key = Fernet.generate_key().decode()
    app_private, app_public = _app_key()
    echo = HttpReceiver(
        fail=lambda n: True,
        failure_body=lambda path: (
            f"<html>503: could not deliver to http://127.0.0.1{path}</html>".encode()
        ),
    ).start()
    working = HttpReceiver().start()
    issuer = OidcIssuer()
    issuer.request_token = OIDC_REQUEST_TOKEN
    with (
        tempfile.TemporaryDirectory(prefix="rnx-secret-sweep-") as tmp_name,
        refusing_port() as port,
        _database(kind, Path(tmp_name)) as url,
        _github(app_public) as (github_url, github),
    ):
        tmp = Path(tmp_name)
        # The tokens first, in this process (which holds no key): the server, started with
        # the key, then seals what the database holds.
        ci = create_token(url)
        viewer = create_token(url, viewer=True)
        acting = create_token(url, viewer=True, can_act=True, name="alice")
        database = open_database(url)
        try:
            _, agent = issue_agent_token(
                database,
                workspace="acme",
                repository=REPO,
                branches=["main"],
                name="claude",
                for_user="alice",
                scopes=("read",),
                expires_at=utcnow().replace(year=utcnow().year + 1),
                accept_granted_by=None,
                actor="sweep",
            )
            with database.write() as conn:
                repositories.bind_github_id(conn, GITHUB_REPOSITORY_ID, REPO)
        finally:
            database.close()
        keyed = {"RNX_SECRET_KEY": secret_key}
        server = start_code_server(
            root,
            url,
            tmp,
            env={
                "RNX_GITHUB_WEBHOOK_SECRET": WEBHOOK_SECRET,
                "RNX_OUTBOX_POLL_MS": "100",
                "RNX_GITHUB_APP_ID": APP_ID,
                "RNX_GITHUB_APP_PRIVATE_KEY": app_private,
                "RNX_GITHUB_API_URL": github_url,
                "RNX_OIDC_ISSUER": issuer.url,
                **keyed,
            },
        )
        env = {**os.environ, "PYTHONPATH": str(root)}
        env = {k: v for k, v in env.items() if not k.startswith(("RNX_", "GITHUB_", "ACTIONS_"))}
        env.update(RNX_DATABASE_URL=url, **keyed)
        places: dict[str, str] = {}
        try:
            cli: dict[str, str] = {}
            planted = _planted_urls(echo.url)
            for number, (name, (channel_kind, channel_url)) in enumerate(planted.items()):
                # Named apart from the secret it holds: a channel's name is shown by design.
                cli[f"notify add {name}"] = _rnx(
                    ["notify", "add", channel_kind, "--workspace", "acme", "--name", f"c{number}"],
                    env,
                    channel_url + "\n",
                )
            cli["notify add mail"] = _rnx(
                ["notify", "add", "email", "--workspace", "acme", "--name", "mail"]
                + ["--smtp-host", "127.0.0.1", "--smtp-port", str(port), "--smtp-user", "alerts"]
                + ["--from", "gate@example.com", "--to", "perf@example.com"],
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
                for seed in range(blocks + 1):
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
                # A pull request reported by the job with the CI token, and a push with OIDC.
                pr = make_results(
                    seed=50, slowdown=1.5, event="pull_request", pr_number=PR, branch="feature",
                    base_branch="main", sha="e" * 40,
                )  # fmt: skip
                (tmp / "pr.json").write_text(pr.to_json())
                job = {**env, "KERNALIN_URL": server.url, "GITHUB_API_URL": github_url}
                job["GITHUB_TOKEN"] = GITHUB_TOKEN
                places.update(
                    _gate(
                        root, tmp, "pull-request", {**job, "KERNALIN_TOKEN": ci.secret,
                        "GITHUB_EVENT_NAME": "workflow_run"},
                        ["--from-results", str(tmp / "pr.json"), "--pr", str(PR), "--sha",
                         "e" * 40, "--branch", "feature", "--base-branch", "main"],
                    )
                )  # fmt: skip
                push_sha = "f" * 40
                issuer.job_claims = {
                    "repository": REPO, "repository_id": GITHUB_REPOSITORY_ID,
                    "ref": "refs/heads/main", "sha": push_sha, "event_name": "push",
                }  # fmt: skip
                (tmp / "push.json").write_text(make_results(seed=60, sha=push_sha).to_json())
                places.update(
                    _gate(
                        root, tmp, "push-oidc", {**job, "GITHUB_EVENT_NAME": "push",
                        "ACTIONS_ID_TOKEN_REQUEST_URL": f"{issuer.url}/actions-token",
                        "ACTIONS_ID_TOKEN_REQUEST_TOKEN": OIDC_REQUEST_TOKEN},
                        ["--from-results", str(tmp / "push.json"), "--sha", push_sha,
                         "--branch", "main"],
                    )
                )  # fmt: skip
                time.sleep(15)  # the outbox's first tries (its retries wait 5 s and more)
                for who, token in (("viewer", viewer), ("acting viewer", acting)):
                    auth = {"Authorization": f"Bearer {token.secret}"}
                    for path in (
                        "/",
                        "/repos/acme/kernels",
                        f"/runs/{run_id}",
                        "/audit",
                        "/hardware",
                    ):
                        places[f"page {path} as {who}"] = client.get(path, headers=auth).text
            places["mcp run_verdict"] = _mcp(server.url, agent, PR)
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
            issuer.close()
        # With the server stopped: a rotation to a new key (the old one second).
        new_key = Fernet.generate_key().decode()
        cli["secrets rotate"] = _rnx(
            ["secrets", "rotate"], {**env, "RNX_SECRET_KEY": f"{new_key},{secret_key}"}
        )
        places["server log"] = server.log.read_text(errors="replace")
        places.update({f"table {k}": v for k, v in _table_rows(url).items()})
        places.update({f"rnx {k}": v for k, v in cli.items() if not k.startswith("notify add")})
        places["alerts received (working webhook)"] = "\n".join(
            r.body.decode(errors="replace") + json.dumps(r.headers) for r in working.received
        )
        places["GitHub: PR comments"] = json.dumps(list(github.comments.values()), default=str)
        places["GitHub: commit statuses"] = json.dumps(list(github.statuses.values()), default=str)
        from testbed.fakes.github_endpoints import extras

        installation_tokens = [t for _, t in extras(github).app.issued]
    secrets = {name: name for name in planted}
    secrets.update(
        {
            "SWEEPsmtpPassword": "SWEEPsmtpPassword",
            "CI token": ci.secret,
            "viewer token": viewer.secret,
            "acting viewer token": acting.secret,
            "agent token": agent,
            "GitHub webhook secret": WEBHOOK_SECRET,
            "RNX_SECRET_KEY": secret_key,
            "RNX_SECRET_KEY (new)": new_key,
            "GitHub App private key": app_private,
            "job GITHUB_TOKEN": GITHUB_TOKEN,
            "OIDC request token": OIDC_REQUEST_TOKEN,
        }
    )
    secrets.update({f"webhook signing secret {i}": s for i, s in enumerate(signing)})
    secrets.update({f"OIDC token {i}": t for i, t in enumerate(issuer.issued)})
    secrets.update({f"installation token {i}": t for i, t in enumerate(installation_tokens)})
    if kind == "postgresql":
        secrets["database password"] = DB_PASSWORD
    print(
        f"[{kind}] {len(working.received)} alerts received, {echo.refused} sends refused, "
        f"{len(issuer.issued)} OIDC tokens and {len(installation_tokens)} installation tokens "
        f"issued, {sum(len(v) for v in github.comments.values())} PR comments"
    )
    return _hits(places, secrets), len(secrets)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--code", type=Path, default=BRANCH_ROOT, help="the checkout to run")
    p.add_argument("--database", default="sqlite,postgresql", help="sqlite, postgresql or both")
    p.add_argument("--blocks", type=int, default=6, help="BLOCKing uploads (failed sends)")
    args = p.parse_args(argv)
    grand = 0
    for kind in args.database.split(","):
        hits, planted = sweep(args.code.resolve(), kind, args.blocks)
        total = 0
        for place, found in hits.items():
            total += 0 if place.startswith("control:") else len(found)
            print(f"[{kind}] {place:<58} {len(found):3d} {', '.join(found)}")
        places = sum(not p.startswith("control:") for p in hits)
        print(f"[{kind}] total: {total} hits of {planted} planted secrets in {places} places")
        grand += total
    return 1 if grand else 0


if __name__ == "__main__":
    raise SystemExit(main())
