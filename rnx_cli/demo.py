"""`make demo`: the whole flow on this machine, on the embedded defaults, in about a minute.

Starts the real gate server on SQLite on a loopback port, creates a CI token, then gates an
example kernel as CI would: a baseline push to main, a pull request that leaves the kernel
unchanged and one that makes it slower. Prints each verdict and its run page, then stops
the server. Everything lives in .demo/ (git-ignored) and is recreated on each run.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from gate_server.local import start_server

KERNEL = '''\
"""Example kernel (KernelBench convention): a linear layer and a ReLU."""

import torch

batch_size = 8


class Model(torch.nn.Module):
    def __init__(self, size: int = 192):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(size, size) / size**0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
{body}


def get_inputs(batch_size: int = batch_size):
    return [torch.randn(batch_size * 32, 192)]


def get_init_inputs():
    return [192]
'''
FAST = "        return torch.relu(x @ self.weight)"
# The regression a refactoring might bring: the same answer, computed twice.
SLOW = (
    "        wasted = torch.relu(x @ self.weight)\n"
    "        return torch.relu(x @ self.weight) + 0 * wasted"
)

# Pull requests compare base and head in the same job (paired), so a laptop's or a shared
# runner's noise cancels; pushes to main are measured alone and stored as baselines. Few
# samples keep the demo short (a real gate runs more), with a band of equivalence to match.
KERNALIN_YML = """\
version: 1
gate:
  mode: enforce
  block-threshold: 25%
  rope: 10%
  compare: paired
harness:
  samples: 30
  processes: 2
  warmup: 2
benchmarks:
  - workload: kernels/linear_relu.py
    runtimes: [pytorch_eager]
    batch-sizes: [8]
    dtypes: [float32]
"""
REPOSITORY = "demo/kernels"


@dataclass(frozen=True)
class Gated:
    title: str
    exit_code: int
    tier: str
    url: str
    summary: str


def _git(repo: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "demo",
        "GIT_AUTHOR_EMAIL": "demo@example.com",
        "GIT_COMMITTER_NAME": "demo",
        "GIT_COMMITTER_EMAIL": "demo@example.com",
    }
    out = subprocess.run(
        ["git", *args], cwd=repo, env=env, capture_output=True, text=True, check=True
    )
    return out.stdout.strip()


def _commit(repo: Path, body: str, message: str) -> str:
    (repo / "kernels" / "linear_relu.py").write_text(KERNEL.format(body=body))
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "--allow-empty", "-m", message)
    return _git(repo, "rev-parse", "HEAD")


def _rnx(
    *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rnx_cli", *args], cwd=cwd, env=env, capture_output=True, text=True
    )


def _outputs(path: Path) -> dict[str, str]:
    """GITHUB_OUTPUT's heredoc format, as the action writes it."""
    values: dict[str, str] = {}
    lines = path.read_text().splitlines() if path.exists() else []
    i = 0
    while i < len(lines):
        name, _, delimiter = lines[i].partition("<<")
        j = lines.index(delimiter, i + 1)
        values[name] = "\n".join(lines[i + 1 : j])
        i = j + 1
    return values


def _gate(repo: Path, work: Path, title: str, flags: list[str], server: str, token: str) -> Gated:
    output, summary = work / "output.txt", work / "summary.md"
    output.unlink(missing_ok=True)
    summary.unlink(missing_ok=True)
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "RNX_", "KERNALIN_"))
    }
    env.update(
        KERNALIN_URL=server,
        KERNALIN_TOKEN=token,
        GITHUB_OUTPUT=str(output),
        GITHUB_STEP_SUMMARY=str(summary),
        # Two shared cores: one thread per measurement keeps workers from fighting over them.
        RNX_THREADS="1",
    )
    started = time.monotonic()
    done = _rnx("gate", "--repository", REPOSITORY, *flags, cwd=repo, env=env)
    if done.returncode not in (0, 1):
        raise RuntimeError(f"rnx gate failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    out = _outputs(output)
    print(f"  gated in {time.monotonic() - started:.0f}s")
    return Gated(
        title, done.returncode, out.get("tier", "?"), out.get("run-url", ""), out.get("summary", "")
    )


def _table(summary_file: Path) -> str:
    text = summary_file.read_text() if summary_file.exists() else ""
    return "\n".join(line for line in text.splitlines() if line.startswith("|"))


def main() -> int:
    work = Path(".demo").resolve()
    shutil.rmtree(work, ignore_errors=True)
    repo = work / "repo"
    (repo / "kernels").mkdir(parents=True)
    (repo / "kernalin.yml").write_text(KERNALIN_YML)
    _git(repo, "init", "-q", "-b", "main")
    database_url = f"sqlite:///{work / 'gate.db'}"

    print(f"starting the gate server on loopback (SQLite: {work / 'gate.db'})")
    # The server owns the gate's policy (clients cannot weaken it): the same band here.
    server = start_server(database_url, work, env={"RNX_ROPE": "10%"})
    print(f"  listening on {server.url}")
    try:
        created = _rnx(
            "token",
            "create",
            "--workspace",
            "demo",
            "--repo",
            REPOSITORY,
            "--branches",
            "main",
            "--database-url",
            database_url,
            cwd=work,
        )
        if created.returncode != 0:
            raise RuntimeError(f"rnx token create failed: {created.stderr}")
        token = created.stdout.strip().splitlines()[-1]
        print(f"created a CI token for {REPOSITORY} ({token[:11]}...)\n")

        base = _commit(repo, FAST, "add the kernel")
        runs = []
        steps = [
            ("push to main (the baseline)", base, ["--branch", "main", "--sha", base]),
        ]
        _git(repo, "checkout", "-q", "-b", "pr-1")
        same = _commit(repo, FAST, "PR 1: rename a variable (kernel unchanged)")
        steps.append(
            (
                "pull request 1: kernel unchanged",
                same,
                [
                    "--branch",
                    "pr-1",
                    "--sha",
                    same,
                    "--pr",
                    "1",
                    "--base-branch",
                    "main",
                    "--base-sha",
                    base,
                ],
            )
        )
        _git(repo, "checkout", "-q", "-b", "pr-2", base)
        slow = _commit(repo, SLOW, "PR 2: refactor forward (2x the work)")
        steps.append(
            (
                "pull request 2: kernel made slower",
                slow,
                [
                    "--branch",
                    "pr-2",
                    "--sha",
                    slow,
                    "--pr",
                    "2",
                    "--base-branch",
                    "main",
                    "--base-sha",
                    base,
                ],
            )
        )
        for title, sha, flags in steps:
            _git(repo, "checkout", "-q", sha)
            print(f"{title} ({sha[:8]})")
            gated = _gate(repo, work, title, flags, server.url, token)
            runs.append(gated)
            print(f"  verdict: {gated.tier}  (exit code {gated.exit_code})")
            print(f"  why:     {gated.summary}")
            print(f"  run:     {gated.url or '(not uploaded)'}")
            table = _table(work / "summary.md")
            if table:
                print("  " + table.replace("\n", "\n  "))
            print()
    finally:
        server.stop()
        print("stopped the gate server")
    print("\nsummary:")
    for r in runs:
        print(f"  {r.tier:<5}  {r.title}  {r.url}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
