"""`rnx link PATH --branch main --repo OWNER/NAME`: ask the gate server (GitHub App mode) to
benchmark every new commit of the branch that touches PATH or what it imports (auto-sync,
docs/auto-sync.md). `--list` shows the links, `--unlink` removes one. The token is found as
`rnx change-points` finds it (--token-file or KERNALIN_TOKEN, never an argument)."""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import PurePosixPath

from rnx.errors import UserError
from rnx_cli.acting import _call, _connection, _connection_arguments

PATH = "/api/v1/autosync/links"
_BRANCH = re.compile(r"^[A-Za-z0-9_.+/-]{1,255}$")
_REPOSITORY = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="rnx link",
        description="Link a workload on a branch: the gate server (GitHub App mode) dispatches "
        "the benchmark workflow for every new commit that touches it or what it imports.",
    )
    p.add_argument("path", nargs="?", help="the workload's path in the repository")
    p.add_argument("--branch", help="the branch whose commits are benchmarked, e.g. main")
    p.add_argument("--repo", required=True, help="OWNER/NAME")
    what = p.add_mutually_exclusive_group()
    what.add_argument("--list", action="store_true", help="show the repository's links")
    what.add_argument("--unlink", action="store_true", help="remove the link of PATH on --branch")
    p.add_argument("--json", action="store_true", help="print the server's JSON")
    _connection_arguments(p)
    return p


def _checked(args: argparse.Namespace) -> None:
    """Refuse what the server would refuse, before asking it, with the fix."""
    if not _REPOSITORY.match(args.repo):
        raise UserError(f"--repo {args.repo[:80]!r}: write the repository as OWNER/NAME")
    if args.branch is not None and not _BRANCH.match(args.branch):
        raise UserError(
            f"--branch {args.branch[:80]!r} is not a branch name; give one branch like main "
            "(letters, digits, . _ - + / only; no patterns)"
        )
    if args.list:
        if args.path:
            raise UserError("--list takes no PATH; it shows every link of --repo")
        return
    if not args.path:
        raise UserError("name the workload: rnx link PATH --branch BRANCH --repo OWNER/NAME")
    if not args.branch:
        raise UserError(f"--branch is required: rnx link {args.path} --branch main")
    path = PurePosixPath(args.path.replace("\\", "/"))
    if path.is_absolute() or ".." in path.parts or re.match(r"^[A-Za-z]:", args.path):
        raise UserError(
            f"{args.path[:80]!r} is not a path inside the repository; give it relative to the "
            "repository root without '..', e.g. kernels/attention.py"
        )


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(sys.argv[1:] if argv is None else argv)
    _checked(args)
    url, token = _connection(args)
    if args.list:
        params = {"repository": args.repo, **({"branch": args.branch} if args.branch else {})}
        data = _call(url, token, "GET", PATH, params=params)
        links = list(data.get("links") or [])
        if args.json:
            print(json.dumps(data, indent=2))
        elif not links:
            print(f"no links on {args.repo}")
        else:
            for k in links:
                print(f"{k['branch']:<20}  {k['workload']}  (by {k['created_by']})")
        recent = list(data.get("recent") or [])
        if recent and not args.json:
            print("\nnewest auto-sync commits:")
            for c in recent:
                note = f"  {c['note']}" if c.get("note") else ""
                print(f"  {c['sha'][:12]}  {c['branch']:<16}  {c['reason']:<8}  {c['state']}{note}")
        return 0
    body = {"repository": args.repo, "branch": args.branch, "workload": args.path}
    if args.unlink:
        data = _call(url, token, "POST", PATH + "/remove", json=body)
        gone = data["removed"]
        text = f"unlinked {gone['workload']} on {args.repo} {gone['branch']}"
    else:
        data = _call(url, token, "POST", PATH, json=body)
        again = "" if data.get("created") else " (it was linked before)"
        text = (
            f"linked {data['workload']} on {args.repo} {data['branch']}{again}: every new "
            "commit touching it or what it imports is benchmarked (GitHub App mode)"
        )
    print(json.dumps(data, indent=2) if args.json else text)
    return 0
