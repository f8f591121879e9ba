"""`rnx notify add|list|remove`: which events of a workspace go to which channel.

Secrets (a webhook URL, an SMTP password) are read from standard input or --secret-file, never
from the command line (where `ps` and shell history would keep them), and never printed.
Errors are the core's (gate_server/errors.py); gate_server/cli/main.py makes them one line."""

from __future__ import annotations

import argparse
import getpass
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gate_server.cli.database_args import add_database_arguments, database_url_of
from gate_server.db import Database
from gate_server.db.alerts import Channel, Rule
from gate_server.domain.alerts import manage
from gate_server.domain.alerts.channels import (
    EMAIL,
    KINDS,
    SLACK,
    TEAMS,
    WEBHOOK,
    ChannelSpec,
    DeliveryFailed,
    check_email,
    email_channel,
    slack_channel,
    teams_channel,
    webhook_channel,
)
from gate_server.domain.alerts.events import ALARMS
from gate_server.errors import InvalidInput
from gate_server.settings import load_settings

_SECRET_OF = {
    SLACK: "the Slack incoming-webhook URL",
    TEAMS: "the Teams workflow webhook URL",
    WEBHOOK: "the webhook URL",
    EMAIL: "the SMTP password",
}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rnx notify",
        description="Send a workspace's alerts to Slack, Teams, email or a "
        "signed webhook (docs/alerts.md).",
    )
    sub = parser.add_subparsers(dest="action", required=True)
    add = sub.add_parser(
        "add",
        help="a new channel and its rule, or (--channel) one more rule for a channel",
        description="The channel's secret (its URL; for email the SMTP password) is read from "
        "standard input or --secret-file, never from the command line.",
    )
    add.add_argument("kind", nargs="?", choices=KINDS, help="the new channel's kind")
    add.add_argument("--workspace", required=True)
    add.add_argument("--repo", help="OWNER/NAME; default: every repository of the workspace")
    names = ",".join(e.replace("_", "-") for e in ALARMS)
    add.add_argument(
        "--events",
        default="",
        help=f"default: {names}; scheduled-report (a scheduled run's report) when named",
    )
    add.add_argument("--name", help="the channel's name (default: its kind)")
    add.add_argument("--channel", help="add a rule to this existing channel instead")
    add.add_argument("--secret-file", type=Path, help="read the secret from this file")
    add.add_argument("--smtp-host", help="email: the SMTP server (STARTTLS is required)")
    add.add_argument("--smtp-port", type=int, default=587, help="email: default 587")
    add.add_argument("--smtp-user", help="email: log in as this user (password: the secret)")
    add.add_argument("--from", dest="sender", help="email: the sender address")
    add.add_argument("--to", default="", help="email: recipients, comma-separated")
    add.add_argument(
        "--no-check",
        action="store_true",
        help="email: add without first connecting (STARTTLS, the certificate, the login)",
    )
    listing = sub.add_parser("list", help="channels and rules (never their secrets)")
    listing.add_argument("--workspace")
    listing.add_argument("--json", action="store_true")
    remove = sub.add_parser("remove", help="remove a channel (with its rules) or a rule")
    remove.add_argument("id", type=int, help="the channel's id (or the rule's, with --rule)")
    remove.add_argument("--rule", action="store_true", help="the id is a rule's")
    test = sub.add_parser("test", help="send a test message to a channel now")
    test.add_argument("id", type=int, help="the channel's id")
    for p in (add, listing, remove, test):
        add_database_arguments(p)
    return parser


def _read_secret(args: argparse.Namespace, what: str, *, required: bool = True) -> str | None:
    if args.secret_file is not None:
        try:
            value = args.secret_file.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as e:
            raise InvalidInput(f"cannot read --secret-file {args.secret_file}: {e}") from None
    elif sys.stdin.isatty():
        value = getpass.getpass(f"{what}: ").strip()
    else:
        value = sys.stdin.readline().strip()
    if required and not value:
        raise InvalidInput(f"give {what} on standard input or with --secret-file")
    return value or None


def _spec(args: argparse.Namespace) -> ChannelSpec:
    what = _SECRET_OF[args.kind]
    if args.kind == EMAIL:
        if not args.smtp_host or not args.sender:
            raise InvalidInput("an email channel needs --smtp-host, --from and --to")
        password = _read_secret(args, what, required=bool(args.smtp_user))
        spec = email_channel(
            host=args.smtp_host,
            port=args.smtp_port,
            user=args.smtp_user,
            password=password,
            sender=args.sender,
            to=args.to.split(","),
        )
        if not args.no_check:
            check_email(spec)
        return spec
    url = _read_secret(args, what) or ""
    build = {SLACK: slack_channel, TEAMS: teams_channel, WEBHOOK: webhook_channel}[args.kind]
    return build(url)


def _add(database: Database, args: argparse.Namespace, actor: str) -> int:
    events = args.events.split(",") if args.events else []
    if args.channel:
        if args.kind:
            raise InvalidInput("give a kind for a new channel, or --channel for an existing one")
        added = manage.add_rule(
            database,
            workspace=args.workspace,
            channel=args.channel,
            repository=args.repo,
            events=events,
            actor=actor,
        )
        print(f"rule {added.rule_id}: {_scope(args)} {','.join(added.events)} -> {args.channel}")
        return 0
    if not args.kind:
        raise InvalidInput(f"say which kind of channel: one of {', '.join(KINDS)}")
    spec = _spec(args)
    name = args.name or args.kind
    added = manage.add_channel(
        database,
        workspace=args.workspace,
        name=name,
        spec=spec,
        repository=args.repo,
        events=events,
        actor=actor,
    )
    # A webhook's standard output is its signing secret alone (`... > secret.txt`).
    print(
        f"channel {added.channel_id} ({spec.kind} {name}), rule {added.rule_id}: "
        f"{_scope(args)} {','.join(added.events)} -> {spec.shown}",
        file=sys.stderr if spec.kind == WEBHOOK else sys.stdout,
    )
    if spec.kind == WEBHOOK:
        print(
            "the webhook's signing secret (X-Kernalin-Signature); it is shown only this once:",
            file=sys.stderr,
        )
        print(spec.secret["signing_secret"])
    return 0


def _scope(args: argparse.Namespace) -> str:
    return args.repo or f"every repository of {args.workspace}"


def _print(channels: list[Channel], rules: list[Rule], *, as_json: bool) -> None:
    def state(c: Channel) -> str:
        if c.failing_since is not None:
            return f"failing since {c.failing_since.isoformat(timespec='seconds')}"
        return "ok" if c.failures == 0 else f"{c.failures} failed sends in a row"

    shown: list[dict[str, Any]] = [
        {
            "id": c.id,
            "workspace": c.workspace,
            "name": c.name,
            "kind": c.kind,
            "target": c.shown,
            "state": state(c),
            "last_error": c.last_error,
            "rules": [
                {"id": r.id, "repository": r.repository, "events": r.events}
                for r in rules
                if r.channel_id == c.id
            ],
        }
        for c in channels
    ]
    if as_json:
        print(json.dumps(shown, indent=2))
        return
    for c in shown:
        print(f"channel {c['id']}  {c['workspace']}/{c['name']}  {c['kind']}  {c['target']}")
        print(f"  state: {c['state']}" + (f" ({c['last_error']})" if c["last_error"] else ""))
        for r in c["rules"]:
            where = r["repository"] or "every repository"
            print(f"  rule {r['id']}: {where}: {','.join(r['events'])}")


def _test(database: Database, channel_id: int) -> int:
    try:
        found = manage.send_test(database, channel_id, public_url=load_settings().public_url)
    except DeliveryFailed as e:
        raise InvalidInput(
            f"channel {channel_id}: the test message was not delivered: {e}"
        ) from None
    print(f"channel {channel_id} ({found.kind} {found.name}): test message delivered")
    return 0


def run_notify(
    argv: list[str], *, database_for: Callable[[str | None], Database], actor: str
) -> int:
    args = _parser().parse_args(argv)
    database = database_for(database_url_of(args))
    try:
        if args.action == "add":
            return _add(database, args, actor)
        if args.action == "list":
            channels, rules = manage.listing(database, args.workspace)
            _print(channels, rules, as_json=args.json)
            return 0
        if args.action == "test":
            return _test(database, args.id)
        if args.rule:
            manage.remove_rule(database, args.id, actor=actor)
            print(f"rule {args.id} removed")
            return 0
        found = manage.remove_channel(database, args.id, actor=actor)
        print(f"channel {args.id} ({found.kind} {found.name}) removed, with its rules")
        return 0
    finally:
        database.close()
