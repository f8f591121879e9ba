"""`rnx change-points list|ack|show|cancel` and `rnx accept`: a person acts on the gate server
through its API, with a token of their own (a viewer token made with --can-act, or a CI token),
found in --token-file or KERNALIN_TOKEN and never taken as an argument (arguments are visible to
every process on the machine)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx

from rnx.errors import UserError

TIMEOUT_S = 20.0


def _connection_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--url", help="the gate server (default: KERNALIN_URL), e.g. https://gate.example.com"
    )
    parser.add_argument(
        "--token-file", help="a file holding the token (default: the KERNALIN_TOKEN variable)"
    )


def _connection(args: argparse.Namespace) -> tuple[str, str]:
    url = (args.url or os.environ.get("KERNALIN_URL") or "").strip().rstrip("/")
    if not url:
        raise UserError("no gate server: pass --url or set KERNALIN_URL")
    if not url.startswith(("https://", "http://")):
        raise UserError(f"--url {url[:80]!r} must start with https:// (or http:// on loopback)")
    if args.token_file:
        try:
            token = Path(args.token_file).read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as e:
            raise UserError(f"cannot read --token-file {args.token_file}: {e}") from None
    else:
        token = os.environ.get("KERNALIN_TOKEN", "").strip()
    if not token:
        raise UserError(
            "no token: set KERNALIN_TOKEN or pass --token-file (an admin makes one with "
            "`rnx token create --viewer --can-act --branches main --name YOU`)"
        )
    return url, token


def _call(url: str, token: str, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
    """The server's JSON answer; a UserError with the server's own message for a refusal."""
    try:
        with httpx.Client(timeout=TIMEOUT_S) as client:
            r = client.request(
                method, url + path, headers={"Authorization": f"Bearer {token}"}, **kwargs
            )
    except httpx.HTTPError as e:
        raise UserError(f"the gate server at {url} is unreachable: {type(e).__name__}") from None
    try:
        data: Any = r.json()
    except ValueError:
        data = None
    if r.status_code >= 400:
        error = data.get("error") if isinstance(data, dict) else None
        message = error.get("message") if isinstance(error, dict) else None
        raise UserError(f"the gate server answered {r.status_code}: {message or r.reason_phrase}")
    if not isinstance(data, dict):
        raise UserError(f"the gate server answered {r.status_code} without a JSON object")
    return data


def _print_change_points(found: list[dict[str, Any]]) -> None:
    if not found:
        print("no change points")
        return
    print(f"{'ID':>5}  {'STATUS':<12}  {'BRANCH':<16}  {'RATIO':>6}  CONFIGURATION (WORKLOAD)")
    for cp in found:
        print(
            f"{cp['id']:>5}  {cp['status']:<12}  {cp['branch']:<16}  "
            f"{cp['ratio']:>5.3f}x  {cp['configuration']} ({cp['workload']})"
            + ("  drift" if cp.get("drift") else "")
            + ("  early" if cp.get("early") else "")
        )


def bisection_text(b: dict[str, Any]) -> str:
    """A change point's bisection as `rnx change-points show` prints it."""
    lines = [f"change point {b['change_point_id']}: bisection {b['state']}"]
    culprit = b.get("culprit")
    if culprit:
        pr = f", pull request #{culprit['pull_request']}" if culprit.get("pull_request") else ""
        lines.append(f"culprit {culprit['sha'][:12]} by {culprit.get('author') or '?'}{pr}")
        lines.append(f"  {culprit['url']}")
    elif b.get("range"):
        lines.append(f"narrowed to {b['range']['after'][:12]}..{b['range']['to'][:12]}")
    if b.get("reason"):
        lines.append(f"why it ended: {b['reason']}")
    for s in b.get("steps") or []:
        e = s.get("evidence") or {}
        where = f"{s.get('side') or s['state']:<10}"
        if "ratio_before" in e:
            ends = [
                f"vs {end} {e[f'ratio_{end}']:.3f}x [{e[f'low_{end}']:.3f}, {e[f'high_{end}']:.3f}]"
                for end in ("before", "after")
            ]
            lines.append(f"  {s['sha'][:12]} #{s['attempt']} {where} {'  '.join(ends)}")
        else:
            lines.append(f"  {s['sha'][:12]} #{s['attempt']} {where} {e.get('reason', '')}")
    return "\n".join(lines)


def change_points_main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="rnx change-points",
        description="List a repository's change points, acknowledge one with a note, show or "
        "cancel its bisection.",
    )
    sub = parser.add_subparsers(dest="action", required=True)
    listing = sub.add_parser("list", help="the change points of a repository, newest first")
    listing.add_argument("--repo", required=True, help="OWNER/NAME")
    listing.add_argument("--status", choices=("open", "acknowledged", "resolved"))
    listing.add_argument("--branch")
    listing.add_argument("--json", action="store_true", help="print the server's JSON")
    ack = sub.add_parser("ack", help="acknowledge a change point: say what is known of it")
    ack.add_argument("id", help="the change point's id (rnx change-points list)")
    ack.add_argument("--note", required=True, help="what is known of the change")
    show = sub.add_parser("show", help="a change point's bisection: culprit and each step")
    show.add_argument("id", help="the change point's id (rnx change-points list)")
    show.add_argument("--json", action="store_true", help="print the server's JSON")
    cancel = sub.add_parser("cancel", help="cancel a change point's running bisection")
    cancel.add_argument("id", help="the change point's id (rnx change-points list)")
    for p in (listing, ack, show, cancel):
        _connection_arguments(p)
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    url, token = _connection(args)
    if args.action == "list":
        params = {"repository": args.repo, "status": args.status, "branch": args.branch}
        data = _call(
            url,
            token,
            "GET",
            "/api/v1/change-points",
            params={k: v for k, v in params.items() if v},
        )
        if args.json:
            print(json.dumps(data, indent=2))
        else:
            _print_change_points(list(data.get("change_points") or []))
        return 0
    base = f"/api/v1/change-points/{quote(args.id, safe='')}"
    if args.action in ("show", "cancel"):
        method, path = (
            ("GET", "/bisection") if args.action == "show" else ("POST", "/bisection/cancel")
        )
        data = _call(url, token, method, base + path)
        print(json.dumps(data, indent=2) if getattr(args, "json", False) else bisection_text(data))
        return 0
    done = _call(url, token, "POST", base + "/acknowledge", json={"note": args.note})
    print(f"change point {done['id']} acknowledged by {done['acknowledged_by']}")
    return 0


def accept_main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="rnx accept",
        description="Accept a run: it becomes the newest baseline of its base branch, "
        "environment and workload (audited, with the token's name as who accepted).",
    )
    parser.add_argument("run", help="the run's id (its run page's URL ends with it)")
    parser.add_argument("--reason", required=True, help="why this run is the new normal")
    _connection_arguments(parser)
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    url, token = _connection(args)
    path = f"/api/v1/runs/{quote(args.run, safe='')}/accept"
    done = _call(url, token, "POST", path, json={"reason": args.reason})
    again = " (it was accepted before)" if done.get("already_accepted") else ""
    print(
        f"run {done['run_id']} accepted by {done['accepted_by']}{again}: now a baseline of "
        f"{done['workload']} on {done['baseline_branch']} in {done['environment']}"
    )
    return 0
