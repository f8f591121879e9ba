"""`make demo`: the whole flow on this machine, on the embedded defaults, in about a minute.

Runs the real commands, each as its own process, as a user would: `rnx serve` (SQLite, a
loopback port), `rnx token create`, then `rnx gate` on an example kernel as CI would: a
baseline push to main, a pull request that leaves the kernel unchanged and one that makes it
slower. Prints each verdict and its run page, what each tier does to a CI job, and a viewer
token's file for the dashboard; then keeps the server up until Ctrl-C (on a terminal) or
stops it and prints the one command that brings it back. Everything lives in .demo/
(git-ignored) and is recreated on each run.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

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
# The server owns the gate's policy (clients cannot weaken it): the same band as above.
SERVER_ENV = {"RNX_ROPE": "10%"}


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


def _rnx_command(*args: str) -> list[str]:
    """`rnx ARGS` with this interpreter (the `rnx` script may not be on PATH)."""
    return [sys.executable, "-m", "rnx_cli", *args]


def _rnx(
    *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(_rnx_command(*args), cwd=cwd, env=env, capture_output=True, text=True)


def _clean_env(**extra: str) -> dict[str, str]:
    """This shell's environment without GitHub's, the server's or the gate's own variables."""
    prefixes = ("GITHUB_", "RNX_", "KERNALIN_", "INPUT_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(prefixes)}
    return {**env, **extra}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def _serve(
    database_url: str,
    work: Path,
    server_env: dict[str, str] | None = None,
    port: int | None = None,
) -> Iterator[str]:
    """`rnx serve` on a loopback port (a free one by default) until the block ends; yields its
    URL once ready. server_env: its RNX_* settings (default: the demo's, SERVER_ENV)."""
    port = _free_port() if port is None else port
    url = f"http://127.0.0.1:{port}"
    args = ["serve", "--host", "127.0.0.1", "--port", str(port), "--database-url", database_url]
    log = work / "server.log"
    with open(log, "wb") as out:
        server = subprocess.Popen(
            _rnx_command(*args, "--log-level", "warning"),
            cwd=work,
            env=_clean_env(**(SERVER_ENV if server_env is None else server_env)),
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        _wait_ready(url, server, log)
        yield url
    finally:
        server.terminate()
        server.wait(timeout=30)


def _wait_ready(url: str, server: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"rnx serve exited with {server.returncode}:\n{log.read_text()}")
        try:
            if httpx.get(f"{url}/readyz", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"rnx serve did not get ready within 60 s:\n{log.read_text()}")


def _create_token(work: Path, database_url: str) -> str:
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
    return created.stdout.strip().splitlines()[-1]


def _create_viewer_token(work: Path, database_url: str) -> Path:
    """A dashboard token, kept in a file (a secret is never printed): its path."""
    created = _rnx(
        "token",
        "create",
        "--workspace",
        "demo",
        "--viewer",
        "--database-url",
        database_url,
        cwd=work,
    )
    if created.returncode != 0:
        raise RuntimeError(f"rnx token create --viewer failed: {created.stderr}")
    path = work / "viewer-token.txt"
    path.write_text(created.stdout.strip().splitlines()[-1] + "\n")
    path.chmod(0o600)
    return path


def serve_command(port: int, database_url: str) -> str:
    """The one command that brings the demo's server (and its dashboard) back."""
    settings = " ".join(f"{k}={shlex.quote(v)}" for k, v in SERVER_ENV.items())
    args = ["serve", "--host", "127.0.0.1", "--port", str(port), "--database-url", database_url]
    return f"{settings} {shlex.join(_rnx_command(*args))}"


SETTINGS_NOTE = (
    "pull requests are compared in paired mode (base and head measured in turn in the same "
    "job, so this machine's noise cancels), with rope 10% (changes under 10% count as equal: "
    "few samples keep the demo short) and a 25% block threshold. A real gate's defaults: "
    "baseline mode, rope 2% (kernalin.yml, docs/configuration.md)."
)
LEGEND = (
    "PASS   the CI job succeeds: no credible slowdown.",
    "WARN   the CI job succeeds with a warning: a slowdown below the block threshold, "
    "undecided configurations, or no baseline yet.",
    "BLOCK  the CI job fails (mode enforce): a credible slowdown beyond the threshold or a "
    "broken runtime; a code owner may accept it with `/kernalin accept <reason>`.",
)


def dashboard_lines(url: str, viewer_token: Path) -> list[str]:
    return [
        f"dashboard: {url}/  (sign in at {url}/login with the viewer token in {viewer_token})",
        "",
        "what each tier does to a CI job:",
        *(f"  {line}" for line in LEGEND),
    ]


def _hold(url: str) -> None:
    """Until Ctrl-C: the dashboard stays up to look at."""
    print(f"\nthe gate server stays up at {url} until Ctrl-C")
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        print()


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
    env = _clean_env(
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


def _pull_request(branch: str, sha: str, number: int, base: str) -> list[str]:
    flags = ["--branch", branch, "--sha", sha, "--pr", str(number)]
    return flags + ["--base-branch", "main", "--base-sha", base]


def _history(repo: Path) -> list[tuple[str, str, list[str]]]:
    """The commits to gate: (title, sha, `rnx gate` flags), in order."""
    base = _commit(repo, FAST, "add the kernel")
    _git(repo, "checkout", "-q", "-b", "pr-1")
    same = _commit(repo, FAST, "PR 1: rename a variable (kernel unchanged)")
    _git(repo, "checkout", "-q", "-b", "pr-2", base)
    slow = _commit(repo, SLOW, "PR 2: refactor forward (2x the work)")
    return [
        ("push to main (the baseline)", base, ["--branch", "main", "--sha", base]),
        ("pull request 1: kernel unchanged", same, _pull_request("pr-1", same, 1, base)),
        ("pull request 2: kernel made slower", slow, _pull_request("pr-2", slow, 2, base)),
    ]


def _gate_all(repo: Path, work: Path, server: str, token: str) -> list[Gated]:
    runs = []
    for title, sha, flags in _history(repo):
        _git(repo, "checkout", "-q", sha)
        print(f"{title} ({sha[:8]})")
        gated = _gate(repo, work, title, flags, server, token)
        runs.append(gated)
        print(f"  verdict: {gated.tier}  (exit code {gated.exit_code})")
        print(f"  why:     {gated.summary}")
        print(f"  run:     {gated.url or '(not uploaded)'}")
        table = _table(work / "summary.md")
        if table:
            print("  " + table.replace("\n", "\n  "))
        print()
    return runs


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m rnx_cli.demo", description=__doc__)
    p.add_argument(
        "--wait",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="keep the server up until Ctrl-C (default: when run on a terminal)",
    )
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    wait = sys.stdin.isatty() and sys.stdout.isatty() if args.wait is None else args.wait
    work = Path(".demo").resolve()
    shutil.rmtree(work, ignore_errors=True)
    repo = work / "repo"
    (repo / "kernels").mkdir(parents=True)
    (repo / "kernalin.yml").write_text(KERNALIN_YML)
    _git(repo, "init", "-q", "-b", "main")
    database_url = f"sqlite:///{work / 'gate.db'}"

    print(f"starting the gate server on loopback (SQLite: {work / 'gate.db'})")
    print(f"  {SETTINGS_NOTE}")
    port = _free_port()
    with _serve(database_url, work, port=port) as url:
        print(f"  listening on {url}")
        token = _create_token(work, database_url)
        print(f"created a CI token for {REPOSITORY} ({token[:11]}...)\n")
        runs = _gate_all(repo, work, url, token)
        viewer = _create_viewer_token(work, database_url)
        print("summary:")
        for r in runs:
            print(f"  {r.tier:<5}  {r.title}  {r.url}")
        print()
        print("\n".join(dashboard_lines(url, viewer)))
        if wait:
            _hold(url)
    print("stopped the gate server; to bring it back with its dashboard and runs, run:")
    print(f"  {serve_command(port, database_url)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
