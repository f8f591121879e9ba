"""The agents' pre-flight, at length: how often `rnx check` (what `rnx mcp`'s `benchmark`
runs) reaches the right verdict on examples/attention.py, and how long past its budget the
`benchmark` tool answers when the budget is too small.

A temporary git repository holds examples/attention.py on main and a branch forked from it.
Each repeat runs `rnx check --json` twice, alternating: the unchanged tree (PASS expected)
and a 2x slower edit (two sdpa calls where there was one: BLOCK expected); once in paired mode
(`--against paired`) and once against the stored baseline (`--against stored`: a real gate
server holding --baseline-runs runs of main's kernel measured here with `rnx bench`). Then the
`benchmark` tool, through `rnx mcp` over stdio against a real gate server, is given budgets
too small to finish; the answer's delay past the budget is reported as a ratio to the budget.

Run: .venv/bin/python -m benchmarks.harness.agent_check [--repeat 5] [--samples 30] [--processes 3]
     [--against paired,stored] [--baseline-runs 3] [--budgets 2,5,10]
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
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
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


def _check(
    repo: Path, edit: str, args: argparse.Namespace, against: str, server: dict[str, str]
) -> tuple[str, float]:
    target = repo / "kernels" / "attention.py"
    original = (ROOT / "examples" / "attention.py").read_text()
    target.write_text(original.replace(ONE, EDITS[edit]))
    command = [sys.executable, "-m", "rnx_cli", "check", "--json", "--against", against]
    command += ["--samples", str(args.samples), "--processes", str(args.processes)]
    env = {**os.environ, "PYTHONPATH": str(ROOT), **server}
    done = subprocess.run(command, cwd=repo, env=env, capture_output=True, text=True)
    if done.returncode not in (0, 1):
        raise RuntimeError(f"rnx check failed ({done.returncode}): {done.stderr[-1500:]}")
    answer = json.loads(done.stdout)
    ratio = answer["workloads"][0]["comparisons"][0]["ratio"]
    return str(answer["tier"]), float(ratio)


def _stored_baseline(
    repo: Path, args: argparse.Namespace, work: Path
) -> tuple[Any, dict[str, str]]:
    """A gate server holding --baseline-runs runs of main's kernel, measured here by `rnx
    bench` with the check's settings and uploaded as pushes to main; (server, its env)."""
    import httpx

    from rnx.schema import ResultsDocument
    from testbed.gate_helpers import create_token, signed_headers
    from testbed.live_server import start_server

    url = f"sqlite:///{work / 'stored.db'}"
    ci = create_token(url)
    server = start_server(url, work)
    target = repo / "kernels" / "attention.py"
    target.write_text((ROOT / "examples" / "attention.py").read_text())
    for i in range(args.baseline_runs):
        out = work / f"base{i}.json"
        command = [sys.executable, "-m", "rnx_cli", "bench", str(target), "--out", str(out)]
        command += ["--samples", str(args.samples), "--processes", str(args.processes)]
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        subprocess.run(command, cwd=repo, env=env, capture_output=True, check=True)
        doc = ResultsDocument.model_validate_json(out.read_text())
        git = {"branch": "main", "sha": f"{i + 1:040x}", "event": "push"}
        doc = doc.model_copy(
            update={
                "repository": "acme/kernels",
                "git": doc.git.model_copy(update={**git, "pr_number": None, "base_branch": None}),
                "workload": doc.workload.model_copy(update={"path": "kernels/attention.py"}),
            }
        )
        data = doc.to_json().encode()
        r = httpx.post(
            f"{server.url}/api/v1/runs", content=data, headers=signed_headers(ci.secret, data)
        )
        r.raise_for_status()
    return server, {"KERNALIN_URL": server.url, "KERNALIN_TOKEN": ci.secret}


def _budget_overrun(repo: Path, budgets: list[float], work: Path) -> list[tuple[float, float]]:
    """(budget, seconds the answer came after it) for each budget, through rnx mcp."""
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    from gate_server.clock import utcnow
    from gate_server.db import open_database
    from gate_server.domain.agents import issue_agent_token
    from testbed.live_server import start_server

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
    p.add_argument("--against", default="paired,stored", help="paired, stored or both")
    p.add_argument("--baseline-runs", type=int, default=3, help="stored baseline runs of main")
    args = p.parse_args(argv)
    modes = args.against.split(",")
    cases = [(mode, edit) for mode in modes for edit in EDITS]
    tiers: dict[tuple[str, str], Counter[str]] = {c: Counter() for c in cases}
    ratios: dict[tuple[str, str], list[float]] = {c: [] for c in cases}
    with tempfile.TemporaryDirectory(prefix="rnx-agent-check-") as tmp:
        work = Path(tmp)
        repo = _repository(work)
        servers = {"paired": (None, {})}
        if "stored" in modes and args.repeat:
            servers["stored"] = _stored_baseline(repo, args, work)
        try:
            for _ in range(args.repeat):
                for mode, edit in cases:  # alternating, so load on the machine hits every case
                    tier, ratio = _check(repo, edit, args, mode, servers[mode][1])
                    tiers[(mode, edit)][tier] += 1
                    ratios[(mode, edit)].append(ratio)
        finally:
            for server, _ in servers.values():
                if server is not None:
                    server.stop()
        (repo / "kernels" / "attention.py").write_text(
            (ROOT / "examples" / "attention.py").read_text()
        )
        budgets = [float(b) for b in args.budgets.split(",") if b]
        overruns = _budget_overrun(repo, budgets, work) if budgets else []
    print(f"rnx check --samples {args.samples} --processes {args.processes}, {args.repeat} repeats")
    print(
        f"{'against':<8}  {'tree':<12}  {'PASS':>4}  {'WARN':>4}  {'BLOCK':>5}  median ratio  range"
    )
    for mode, edit in cases if args.repeat else ():
        r = sorted(ratios[(mode, edit)])
        counts = tiers[(mode, edit)]
        print(
            f"{mode:<8}  {edit:<12}  {counts['PASS']:>4}  {counts['WARN']:>4}  "
            f"{counts['BLOCK']:>5}  {r[len(r) // 2]:>12.3f}  {r[0]:.3f}-{r[-1]:.3f}"
        )
    print("benchmark tool, budget too small to finish (rnx mcp over stdio):")
    for budget, late in overruns:
        print(f"  budget {budget:>5.1f} s: answered {late:+.2f} s after it ({late / budget:+.0%})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
