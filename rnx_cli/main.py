"""The `rnx` command: a thin dispatcher to the subcommands that live in each package."""

from __future__ import annotations

import gc
import importlib
import sys
from collections.abc import Callable, Sequence

from rnx import __version__
from rnx.errors import UserError, run_command

# name -> (module:function, extra that provides it, one-line help). Modules load lazily so
# `rnx compare` never imports torch and `rnx bench` never imports the server.
COMMANDS: dict[str, tuple[str, str | None, str]] = {
    "bench": ("bench_runner.cli:main", "torch", "run a workload's benchmarks, write results"),
    "compare": ("rnx_cli.compare:main", None, "offline verdict between two results files"),
    "compare-hardware": (
        "rnx_cli.hardware:main",
        None,
        "one workload on 2-6 environments: latency, throughput, cost",
    ),
    "gate": ("action.gate:main", None, "benchmark, upload and report (what CI runs)"),
    "check": (
        "rnx_cli.check:main",
        "torch",
        "the gate's pre-flight: the working tree against the merge-base",
    ),
    "bisect": (
        "rnx_cli.bisect:main",
        "torch",
        "find the commit that slowed a workload down (local git worktrees)",
    ),
    "mcp": ("rnx_cli.mcp_stdio:main", "mcp", "the MCP server for coding agents, over stdio"),
    "init": ("action.init:main", None, "add a CI gate: write the workflow and kernalin.yml"),
    "serve": ("gate_server.cli.main:serve_main", "server", "run the gate server"),
    "token": ("gate_server.cli.main:token_main", "server", "create, list or revoke tokens"),
    "branch": ("gate_server.cli.main:branch_main", "server", "follow a branch renamed on GitHub"),
    "notify": ("gate_server.cli.main:notify_main", "server", "send alerts to Slack, Teams, ..."),
    "environment": (
        "gate_server.cli.main:environment_main",
        "server",
        "set environments' hourly prices (server)",
    ),
    "repo": ("gate_server.cli.main:repo_main", "server", "bind a repository to its GitHub id"),
    "secrets": (
        "gate_server.cli.main:secrets_main",
        "server",
        "the key that encrypts stored secrets (server)",
    ),
    "change-points": (
        "rnx_cli.acting:change_points_main",
        None,
        "list a repository's change points, or acknowledge one",
    ),
    "accept": ("rnx_cli.acting:accept_main", None, "accept a run as the new baseline"),
    "link": (
        "rnx_cli.link:main",
        None,
        "benchmark every new commit touching a workload (auto-sync)",
    ),
    "receipt": ("rnx_cli.receipt:main", None, "verify a server's signed receipt offline"),
    "schema": ("rnx_cli.schema:main", None, "print the JSON Schema of results documents"),
}


def _usage() -> str:
    lines = ["usage: rnx COMMAND [ARGS...]", "", "commands:"]
    lines += [f"  {name:<16} {help_}" for name, (_, _, help_) in COMMANDS.items()]
    lines += ["", "rnx COMMAND --help shows a command's options."]
    return "\n".join(lines)


def _load(target: str, extra: str | None) -> Callable[[list[str]], int]:
    module_name, func = target.split(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as e:
        from action.action_ref import pip_install  # only to word this error

        hint = f": {pip_install(extra)}" if extra else ""
        raise UserError(f"this command needs the missing package {e.name!r}{hint}") from None
    fn: Callable[[list[str]], int] = getattr(module, func)
    return fn


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    code = run_command("rnx", lambda: _dispatch(args))
    if argv is None:
        # The process ends next (`rnx` or `python -m rnx_cli`, not a caller's main(argv)): out
        # of the collector's reach, what it holds (torch's modules, after `rnx gate` or `rnx
        # check`) is not traversed again by the collections at exit, 0.5-1 s on 2 busy cores.
        gc.freeze()
    return code


def _dispatch(args: list[str]) -> int:
    if not args or args[0] in ("-h", "--help", "help"):
        print(_usage())
        return 0
    if args[0] == "--version":
        print(f"rnx-benchmark {__version__}")
        return 0
    name, rest = args[0], args[1:]
    if name not in COMMANDS:
        print(f"rnx: unknown command {name!r}\n\n{_usage()}", file=sys.stderr)
        return 2
    target, extra, _ = COMMANDS[name]
    return run_command(f"rnx {name}", lambda: _load(target, extra)(rest))


if __name__ == "__main__":
    sys.exit(main())
