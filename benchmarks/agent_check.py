"""The agents' pre-flight, at length: how often `rnx check` (what `rnx mcp`'s `benchmark`
runs) reaches the right verdict on examples/attention.py, and how long past its budget the
`benchmark` tool answers when the budget is too small.

A temporary git repository holds examples/attention.py on main and a branch forked from it.
Each repeat runs `rnx check --json` twice, alternating: the unchanged tree (PASS expected)
and a 2x slower edit (two sdpa calls where there was one: BLOCK expected). Then the
`benchmark` tool, through `rnx mcp` over stdio against a real gate server, is given budgets
too small to finish; the answer's delay past the budget is reported as a ratio to the budget.

Run: .venv/bin/python -m benchmarks.agent_check [--repeat 5] [--samples 30] [--processes 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ONE = "        return F.scaled_dot_product_attention(q, k, v)\n"
EDITS = {
    "unchanged": ONE,
    "2x slower": "        F.scaled_dot_product_attention(q, k, v)\n" + ONE,
}


def _git(repo: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.email=b@example.com", "-c", "user.name=b", *args],
        cwd=repo,
        check=True,
        capture_output=True,
    )


def _repository(where: Path) -> Path:
    repo = where / "repo"
    (repo / "kernels").mkdir(parents=True)
    shutil.copy(ROOT / "examples" / "attention.py", repo / "kernels" / "attention.py")
    (repo / "kernalin.yml").write_text("benchmarks:\n  - workload: kernels/attention.py\n")
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", ".")
    _git(repo, "commit", "-qm", "attention")
    _git(repo, "checkout", "-qb", "agent/try")
    return repo


def _check(repo: Path, edit: str, args: argparse.Namespace) -> tuple[str, float]:
    target = repo / "kernels" / "attention.py"
    original = (ROOT / "examples" / "attention.py").read_text()
    target.write_text(original.replace(ONE, EDITS[edit]))
    command = [sys.executable, "-m", "rnx_cli", "check", "--json"]
    command += ["--samples", str(args.samples), "--processes", str(args.processes)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(command, cwd=repo, env=env, capture_output=True, text=True)
    answer = json.loads(done.stdout)
    ratio = answer["workloads"][0]["comparisons"][0]["ratio"]
    return str(answer["tier"]), float(ratio)


def _budget_overrun(repo: Path, budgets: list[float], work: Path) -> list[tuple[float, float]]:
    """(budget, seconds the answer came after it) for each budget, through rnx mcp."""
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    from gate_server.agents import issue_agent_token
    from gate_server.clock import utcnow
    from gate_server.db import open_database
    from gate_server.local import start_server

    url = f"sqlite:///{work / 'gate.db'}"
    database = open_database(url)
    try:
        _, secret = issue_agent_token(
            database,
            workspace="acme",
            repository="acme/kernels",
            branches=["main"],
            name="bench",
            for_user="bench",
            scopes=["read", "benchmark"],
            expires_at=utcnow() + timedelta(hours=1),
            accept_granted_by=None,
            actor="benchmark",
        )
    finally:
        database.close()
    server = start_server(url, work)
    env = {**os.environ, "KERNALIN_URL": server.url, "KERNALIN_TOKEN": secret}
    env["PYTHONPATH"] = str(ROOT)
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "rnx_cli", "mcp", "--root", str(repo)], env=env
    )
    found: list[tuple[float, float]] = []

    async def go() -> None:
        async with stdio_client(params) as (read, write), ClientSession(read, write) as s:
            await s.initialize()
            for budget in budgets:
                started = time.monotonic()
                answer = await s.call_tool("benchmark", {"budget_s": budget, "samples": 2000})
                text = answer.content[0].text  # type: ignore[union-attr]
                if "budget_exhausted" not in text:  # it finished in time: nothing to say
                    continue
                found.append((budget, time.monotonic() - started - budget))

    try:
        asyncio.run(go())
    finally:
        server.stop()
    return found


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--samples", type=int, default=30)
    p.add_argument("--processes", type=int, default=3)
    p.add_argument("--budgets", default="2,5,10", help="seconds, comma-separated")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="rnx-agent-check-") as tmp:
        work = Path(tmp)
        repo = _repository(work)
        tiers: dict[str, Counter[str]] = {edit: Counter() for edit in EDITS}
        ratios: dict[str, list[float]] = {edit: [] for edit in EDITS}
        for _ in range(args.repeat):
            for edit in EDITS:  # alternating, so load on the machine hits every case
                tier, ratio = _check(repo, edit, args)
                tiers[edit][tier] += 1
                ratios[edit].append(ratio)
        (repo / "kernels" / "attention.py").write_text(
            (ROOT / "examples" / "attention.py").read_text()
        )
        budgets = [float(b) for b in args.budgets.split(",")]
        overruns = _budget_overrun(repo, budgets, work)
    print(f"rnx check --samples {args.samples} --processes {args.processes}, {args.repeat} repeats")
    print(f"{'tree':<12}  {'PASS':>4}  {'WARN':>4}  {'BLOCK':>5}  median ratio  range")
    for edit in EDITS if args.repeat else ():
        r = sorted(ratios[edit])
        counts = tiers[edit]
        print(
            f"{edit:<12}  {counts['PASS']:>4}  {counts['WARN']:>4}  {counts['BLOCK']:>5}  "
            f"{r[len(r) // 2]:>12.3f}  {r[0]:.3f}-{r[-1]:.3f}"
        )
    print("benchmark tool, budget too small to finish (rnx mcp over stdio):")
    for budget, late in overruns:
        print(f"  budget {budget:>5.1f} s: answered {late:+.2f} s after it ({late / budget:+.0%})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
