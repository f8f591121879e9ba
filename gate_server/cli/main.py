"""The server's command line: `rnx serve`, `rnx token create|list|revoke`, `rnx branch rename`,
`rnx repo bind`, `rnx notify` and `rnx environment price`; an edge where the core's domain errors
become one line and exit code 2 (UserError).

The same commands run without the `rnx` dispatcher as
`python -m gate_server serve|token|branch|repo|notify|environment` (main below), so the server
starts with only its own package (testbed/live_server.py uses it)."""

from __future__ import annotations

import argparse
import functools
import getpass
import json
import math
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from sqlalchemy.exc import SQLAlchemyError

from gate_server.cli.database_args import add_database_arguments, database_url_of
from gate_server.clock import utcnow
from gate_server.db import (
    Database,
    audit,
    open_database,
    prices,
    repositories,
    sealed,
    tokens,
)
from gate_server.db.engine import shown_url
from gate_server.db.tokens import TokenRecord
from gate_server.domain.agents import issue_agent_token, parse_expiry, parse_scopes
from gate_server.domain.auth import issue_token, revoke_token
from gate_server.domain.branches import check_branch_name, rename_branch
from gate_server.domain.environments import KnownEnvironment, environment_key, known_environments
from gate_server.errors import GateServerError
from gate_server.settings import load_settings, secret_keys
from rnx.errors import UserError, run_command


def _one_line_errors(main: Callable[[list[str]], int]) -> Callable[[list[str]], int]:
    """A domain error (a bad setting, name or id) is the user's to fix: one line, exit 2."""

    @functools.wraps(main)
    def run(argv: list[str]) -> int:
        try:
            return main(argv)
        except GateServerError as e:
            raise UserError(str(e)) from None

    return run


def app_from_env() -> object:
    """uvicorn's factory: every worker process builds its app from the same RNX_* environment."""
    from gate_server.asgi import create_app

    return create_app(load_settings())


@_one_line_errors
def serve_main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="rnx serve", description="Run the gate server.")
    parser.add_argument("--host", help="default: RNX_HOST, else 127.0.0.1")
    parser.add_argument("--port", type=int, help="default: RNX_PORT, else 8000")
    add_database_arguments(parser)
    parser.add_argument("--workers", type=int, default=1, help="server processes (default 1)")
    parser.add_argument("--log-level", default="info")
    args = parser.parse_args(argv)
    if args.workers < 1:
        raise UserError("--workers must be at least 1")
    if args.database_url_file:
        # Workers are separate processes: they read the URL from the environment like the rest
        # (the file's name, not the URL, so the password stays out of every process's view).
        database_url_of(args)  # a missing or empty file is one line here, not one per worker
        os.environ.pop("RNX_DATABASE_URL", None)
        os.environ["RNX_DATABASE_URL_FILE"] = args.database_url_file
    elif args.database_url:
        os.environ["RNX_DATABASE_URL"] = args.database_url
    settings = load_settings()
    try:
        # Once here, so a bad URL is one clear line instead of a traceback per worker.
        open_database(settings.database_url, settings.secret_keys).close()
    except (SQLAlchemyError, OSError) as e:
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        where = shown_url(settings.database_url)
        raise UserError(f"cannot open the database {where}: {first}") from None

    import uvicorn

    from gate_server.asgi import MAX_PARSED_HEADER_BYTES

    uvicorn.run(
        "gate_server.cli.main:app_from_env",
        factory=True,
        host=args.host or settings.host,
        port=settings.port if args.port is None else args.port,
        workers=args.workers,
        log_level=args.log_level,
        proxy_headers=True,
        # h11 stops at 16 KiB of headers and drops the connection; read up to 1 MiB so that
        # large headers get an answer (431, gate_server/asgi.py), not a reset.
        http="h11",
        h11_max_incomplete_event_size=MAX_PARSED_HEADER_BYTES,
    )
    return 0


def _database(url: str | None) -> Database:
    return open_database(url or load_settings().database_url, secret_keys())


def _actor() -> str:
    try:
        return f"cli:{getpass.getuser()}"
    except Exception:
        return "cli"


@_one_line_errors
def token_main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="rnx token", description="Manage the server's tokens.")
    sub = parser.add_subparsers(dest="action", required=True)
    create = sub.add_parser("create", help="create a token and print it once")
    create.add_argument("--workspace", required=True)
    create.add_argument("--repo", help="OWNER/NAME (required for CI tokens)")
    create.add_argument("--branches", default="", help="baseline branches, e.g. main,release/*")
    create.add_argument("--viewer", action="store_true", help="a dashboard token; cannot upload")
    create.add_argument(
        "--name", help="who holds it (a person or system); shown wherever the token acts"
    )
    create.add_argument(
        "--can-act",
        action="store_true",
        help="a viewer token that may also acknowledge change points and accept runs of the "
        "workspace's repositories on its --branches (dashboard, rnx accept, rnx change-points)",
    )
    create.add_argument("--agent", metavar="NAME", help="an agent token (MCP, docs/agents.md)")
    create.add_argument("--for", dest="for_user", metavar="USER", help="who the agent acts for")
    create.add_argument("--scopes", default="read", help="agent: read,benchmark,upload,accept")
    create.add_argument("--expires", default="7d", help="agent: 30m, 12h, 7d or an ISO time")
    create.add_argument(
        "--accept-granted-by", metavar="USER", help="the code owner granting accept"
    )
    listing = sub.add_parser("list", help="list tokens (never their secrets)")
    listing.add_argument("--json", action="store_true")
    revoke = sub.add_parser("revoke", help="revoke a token by id")
    revoke.add_argument("id", type=int)
    for p in (create, listing, revoke):
        add_database_arguments(p)
    args = parser.parse_args(argv)

    database = _database(database_url_of(args))
    try:
        if args.action == "create" and args.agent:
            return _create_agent_token(database, args)
        if args.action == "create":
            token_id, secret = issue_token(
                database,
                workspace=args.workspace,
                repository=args.repo,
                branches=args.branches.split(",") if args.branches else [],
                viewer=args.viewer,
                actor=_actor(),
                name=args.name,
                can_act=args.can_act,
            )
            kind = "acting viewer" if args.can_act else "viewer" if args.viewer else "CI"
            print(f"created {kind} token {token_id}; it is shown only this once:", file=sys.stderr)
            print(secret)
            return 0
        if args.action == "list":
            with database.read() as conn:
                _print_tokens(tokens.all_tokens(conn), as_json=args.json)
            return 0
        done = revoke_token(database, args.id, actor=_actor())
        print(f"token {args.id} revoked" if done else f"token {args.id} was already revoked")
        return 0
    finally:
        database.close()


def _create_agent_token(database: Database, args: argparse.Namespace) -> int:
    if args.viewer or not args.repo or not args.for_user:
        raise UserError("an agent token takes --repo OWNER/NAME and --for USER, not --viewer")
    token_id, secret = issue_agent_token(
        database,
        workspace=args.workspace,
        repository=args.repo,
        branches=args.branches.split(",") if args.branches else ["main"],
        name=args.agent,
        for_user=args.for_user,
        scopes=parse_scopes(args.scopes),
        expires_at=parse_expiry(args.expires, utcnow()),
        accept_granted_by=args.accept_granted_by,
        actor=_actor(),
    )
    print(f"created agent token {token_id}; it is shown only this once:", file=sys.stderr)
    print(secret)
    return 0


def _print_tokens(found: list[TokenRecord], *, as_json: bool) -> None:
    rows: list[dict[str, Any]] = [
        {
            "id": t.id,
            "kind": t.kind,
            # A person who signed in with GitHub has no token name: their login names it.
            "name": t.name or (f"github:{t.github_login}" if t.github_login else None),
            "github_login": t.github_login,
            "can_act": t.can_act,
            "workspace": t.workspace,
            "repository": t.repository,
            "branches": t.branches,
            "prefix": t.prefix + "...",
            "created_at": t.created_at.isoformat(timespec="seconds"),
            "last_used_at": t.last_used_at.isoformat(timespec="seconds")
            if t.last_used_at
            else None,
            "revoked": t.revoked_at is not None,
        }
        for t in found
    ]
    if as_json:
        print(json.dumps(rows, indent=2))
        return
    print(
        f"{'ID':>4}  {'KIND':<13}  {'NAME':<16}  {'WORKSPACE':<14}  {'REPOSITORY':<28}  "
        f"{'BRANCHES':<20}  {'LAST USED':<19}  STATUS"
    )
    for r in rows:
        print(
            f"{r['id']:>4}  {r['kind'] + (' (acts)' if r['can_act'] else ''):<13}  "
            f"{r['name'] or '-':<16}  {r['workspace']:<14}  "
            f"{r['repository'] or '-':<28}  {','.join(r['branches']) or '-':<20}  "
            f"{r['last_used_at'] or 'never':<19}  "
            f"{'revoked' if r['revoked'] else 'active'}"
        )


@_one_line_errors
def branch_main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="rnx branch",
        description="Follow a branch rename made on GitHub, for servers that cannot learn of it "
        "from the webhook (no GitHub App).",
    )
    sub = parser.add_subparsers(dest="action", required=True)
    rename = sub.add_parser(
        "rename",
        help="the baselines recorded under --from count for --to from now on",
        description="After renaming a branch on GitHub: its baseline history, and uploads that "
        "still name the old branch, count for the new name. Running it again changes nothing.",
    )
    rename.add_argument("--repo", required=True, help="OWNER/NAME")
    rename.add_argument("--from", dest="old", required=True, help="the branch's old name")
    rename.add_argument("--to", dest="new", required=True, help="the branch's new name")
    rename.add_argument(
        "--workspace", help="needed only when OWNER/NAME is registered in several workspaces"
    )
    add_database_arguments(rename)
    args = parser.parse_args(argv)
    old = check_branch_name(args.old, "--from")
    new = check_branch_name(args.new, "--to")
    if old == new:
        raise UserError(f"--from and --to are the same branch ({old!r}); nothing to rename")

    database = _database(database_url_of(args))
    try:
        with database.read() as conn:
            found = repositories.named(conn, args.repo)
        if args.workspace:
            found = [r for r in found if r.workspace == args.workspace]
        if not found:
            where = f" in workspace {args.workspace!r}" if args.workspace else ""
            raise UserError(
                f"no repository {args.repo!r} is registered{where}; `rnx token list` shows "
                "the registered repositories"
            )
        if len(found) > 1:
            names = ", ".join(sorted(r.workspace for r in found))
            raise UserError(
                f"{args.repo} is registered in several workspaces ({names}); "
                "say which with --workspace"
            )
        with database.write() as conn:
            result = rename_branch(conn, found[0].id, old, new, actor=_actor(), via="cli")
    finally:
        database.close()
    if not result.changed:
        print(f"{result.repository}: {old} -> {new} was followed before; nothing changed")
        return 0
    print(
        f"{result.repository}: {old} -> {new}: {result.runs_moved} baseline "
        f"run{'' if result.runs_moved == 1 else 's'} now count for {new}; uploads naming "
        f"{old} count for {new}"
    )
    if result.tokens_widened:
        ids = ", ".join(str(i) for i in result.tokens_widened)
        many = len(result.tokens_widened) > 1
        print(f"CI token{'s' if many else ''} {ids} now also cover{'' if many else 's'} {new}")
    return 0


@_one_line_errors
def notify_main(argv: list[str]) -> int:
    """`rnx notify add|list|remove` (gate_server/cli/alerts.py)."""
    from gate_server.cli.alerts import run_notify

    return run_notify(argv, database_for=_database, actor=_actor())


def _price_arg(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not an hourly price; write e.g. 3.50")
    return value


def _workspace_id(found: dict[str, int], name: str | None) -> tuple[str, int]:
    if name is not None:
        if name not in found:
            raise UserError(f"no workspace {name!r}; `rnx token list` shows the workspaces")
        return name, found[name]
    if len(found) == 1:
        return next(iter(found.items()))
    if not found:
        raise UserError("the database has no workspace yet; `rnx token create` makes one")
    raise UserError(f"say which workspace with --workspace ({', '.join(found)})")


@_one_line_errors
def environment_main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="rnx environment",
        description="Environments' hourly prices, for the cost per million items on the "
        "dashboard's /hardware page.",
    )
    sub = parser.add_subparsers(dest="action", required=True)
    price = sub.add_parser("price", help="set an environment's hourly price")
    price.add_argument(
        "environment", help="its name (e.g. h200) or key (env-...): rnx environment list"
    )
    price.add_argument("price", type=_price_arg, help="price per hour, e.g. 3.50")
    listing = sub.add_parser("list", help="the environments runs carry: key, name and price")
    prices_listing = sub.add_parser("prices", help="list the prices set")
    for p in (price, listing, prices_listing):
        p.add_argument("--workspace", help="needed only when the database has several")
        add_database_arguments(p)
    args = parser.parse_args(argv)
    database = _database(database_url_of(args))
    try:
        with database.write() as conn:
            workspace, workspace_id = _workspace_id(prices.workspace_ids(conn), args.workspace)
            if args.action == "prices":
                for key, amount in prices.of_workspace(conn, workspace_id):
                    print(f"{key}  {amount:g}")
                return 0
            known = known_environments(conn, workspace_id)
            if args.action == "list":
                _print_environments(known)
                return 0
            key = environment_key(known, args.environment, workspace)
            prices.set_price(conn, workspace_id, key, args.price)
            audit.record(
                conn,
                actor=_actor(),
                action="environment.price",
                subject=f"{workspace}/{key}",
                details={"price_per_hour": args.price, "named": args.environment},
            )
    finally:
        database.close()
    shown = key if key == args.environment else f"{args.environment} ({key})"
    print(f"{workspace}: {shown} costs {args.price:g} per hour")
    return 0


def _print_environments(known: list[KnownEnvironment]) -> None:
    if not known:
        print("no environment yet: no run has been uploaded to this workspace")
        return
    width = max(len(e.key) for e in known)
    print(f"{'KEY':<{width}}  {'NAME':<20}  PRICE/HOUR")
    for e in known:
        price = "-" if e.price_per_hour is None else f"{e.price_per_hour:g}"
        print(f"{e.key:<{width}}  {e.name or '-':<20}  {price}")


@_one_line_errors
def repo_main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="rnx repo",
        description="Registered repositories: tie one to GitHub's numeric id when its name is "
        "registered in several workspaces (OIDC uploads and webhooks refuse to guess).",
    )
    sub = parser.add_subparsers(dest="action", required=True)
    bind = sub.add_parser("bind", help="tie OWNER/NAME in one workspace to GitHub's id")
    bind.add_argument("--repo", required=True, help="OWNER/NAME")
    bind.add_argument("--workspace", required=True)
    bind.add_argument(
        "--github-id", type=int, required=True, help="the repository's id (GET /repos/OWNER/NAME)"
    )
    add_database_arguments(bind)
    args = parser.parse_args(argv)
    if args.github_id < 1:
        raise UserError("--github-id must be GitHub's positive numeric id of the repository")
    database = _database(database_url_of(args))
    try:
        with database.write() as conn:
            found = [
                r for r in repositories.named(conn, args.repo) if r.workspace == args.workspace
            ]
            if not found:
                raise UserError(
                    f"no repository {args.repo!r} in workspace {args.workspace!r}; "
                    "`rnx token list` shows the registered repositories"
                )
            holder = repositories.by_github_id(conn, args.github_id)
            if holder is not None and holder.id != found[0].id:
                raise UserError(
                    f"GitHub id {args.github_id} is bound to {holder.name} in workspace "
                    f"{holder.workspace!r}; one GitHub repository belongs to one workspace"
                )
            if found[0].github_repository_id not in (None, args.github_id):
                raise UserError(
                    f"{found[0].name} in {args.workspace!r} is bound to GitHub id "
                    f"{found[0].github_repository_id} already"
                )
            repositories.set_github_id(conn, found[0].id, args.github_id)
            audit.record(
                conn,
                actor=_actor(),
                action="repository.bind",
                subject=f"repository:{found[0].name}",
                details={"workspace": args.workspace, "github_repository_id": args.github_id},
            )
    finally:
        database.close()
    print(f"{found[0].name} in workspace {args.workspace} is GitHub repository {args.github_id}")
    return 0


@_one_line_errors
def secrets_main(argv: list[str]) -> int:
    """`rnx secrets new-key|rotate`: the key that encrypts stored secrets (docs/security.md)."""
    parser = argparse.ArgumentParser(
        prog="rnx secrets", description="The key that encrypts the secrets the server stores."
    )
    sub = parser.add_subparsers(dest="action", required=True)
    sub.add_parser("new-key", help="print a new key for RNX_SECRET_KEY")
    rotate = sub.add_parser(
        "rotate",
        help="encrypt every stored secret with the first key of RNX_SECRET_KEY (set it to "
        "'NEW,OLD' first); afterwards OLD may be dropped",
    )
    add_database_arguments(rotate)
    args = parser.parse_args(argv)
    if args.action == "new-key":
        from cryptography.fernet import Fernet

        print(Fernet.generate_key().decode("ascii"))
        return 0
    if not secret_keys():
        raise UserError(
            "RNX_SECRET_KEY (or RNX_SECRET_KEY_FILE) is not set: set it to 'NEW,OLD' (the new "
            "key first) to rotate, or to one key to encrypt the stored secrets"
        )
    database = _database(database_url_of(args))  # seals plain secrets, checks every key opens
    try:
        with database.write() as conn:
            done = sealed.settle(conn, database.sealer, rotate=True)
            audit.record(conn, actor=_actor(), action="secrets.rotate", subject="secrets")
    finally:
        database.close()
    print(
        f"{done.resealed} stored secrets encrypted with the first key; restart every server "
        "process with that key alone, and the others are no longer needed"
    )
    return 0


COMMANDS: dict[str, Callable[[list[str]], int]] = {
    "serve": serve_main,
    "token": token_main,
    "branch": branch_main,
    "notify": notify_main,
    "environment": environment_main,
    "repo": repo_main,
    "secrets": secrets_main,
}


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m gate_server COMMAND ...`: what `rnx COMMAND ...` runs, errors shown alike."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] not in COMMANDS:
        print(f"usage: python -m gate_server {{{','.join(COMMANDS)}}} [ARGS...]", file=sys.stderr)
        return 2
    name, rest = args[0], args[1:]
    return run_command(f"rnx {name}", lambda: COMMANDS[name](rest))
