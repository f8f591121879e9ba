"""The real server started from a given checkout (its own PYTHONPATH), for benchmarks that
measure today's main and this branch side by side on the same inputs."""

from __future__ import annotations

from pathlib import Path

from testbed.live_server import LiveServer, start_server

BRANCH_ROOT = Path(__file__).resolve().parents[1]
MAIN_ROOT = Path("/work/main")


def sides(argument: list[str] | None) -> dict[str, Path]:
    """NAME=PATH pairs (default: main=/work/main and branch=this checkout)."""
    if not argument:
        return {"main": MAIN_ROOT, "branch": BRANCH_ROOT}
    out = {}
    for item in argument:
        name, _, path = item.partition("=")
        if not name or not path or not Path(path, "gate_server").is_dir():
            raise SystemExit(f"--code {item!r}: give NAME=PATH of a checkout with gate_server/")
        out[name] = Path(path).resolve()
    return out


def start_code_server(
    root: Path, database_url: str, workdir: Path, env: dict[str, str] | None = None
) -> LiveServer:
    """`python -m gate_server serve` importing the code under `root`."""
    return start_server(database_url, workdir, env={"PYTHONPATH": str(root), **(env or {})})
