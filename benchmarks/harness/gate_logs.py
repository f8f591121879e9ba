"""What a newcomer's GitLab job log shows: `rnx gate` outside GitHub for WARN, PASS and BLOCK.

Runs the real `rnx gate` (a subprocess, the harness measuring for real on this CPU) with the
environment a GitLab job has and nothing of GitHub's, against the real gate server (SQLite,
loopback):
  1. a merge request before any baseline is stored   -> WARN (nothing to compare with)
  2. the push to main that stores the baseline       -> WARN (nothing stored before it)
  3. a merge request that changes nothing             -> PASS
  4. a merge request whose kernel is 2x slower        -> BLOCK (exit code 1)
and prints each log whole, then checks that no log holds the CI token or a workflow command.

    .venv/bin/python -m benchmarks.harness.gate_logs
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from testbed.gate_helpers import create_token, start_server

REPO_ROOT = Path(__file__).resolve().parents[2]
REPOSITORY = "acme/kernels"
KERNEL = REPO_ROOT / "tests" / "data" / "action-kernel.py"
SLOW_KERNEL = REPO_ROOT / "tests" / "data" / "action-kernel-slow.py"
FLAGS = ["--workload", "kernels/matmul.py", "--runtimes", "pytorch_eager", "--dtypes", "float32"]
FLAGS += ["--batch-sizes", "1,8", "--repository", REPOSITORY]


def _gitlab_env(url: str, token: str, branch: str) -> dict[str, str]:
    keep = ("PATH", "HOME", "LANG", "TMPDIR")
    env = {k: v for k, v in os.environ.items() if k in keep}
    env.update(
        CI="true",
        GITLAB_CI="true",
        CI_PROJECT_PATH=REPOSITORY,
        CI_COMMIT_REF_NAME=branch,
        KERNALIN_URL=url,
        KERNALIN_TOKEN=token,
        PYTHONPATH=str(REPO_ROOT),
    )
    return env


def _gate(work: Path, kernel: Path, env: dict[str, str], identity: list[str]) -> tuple[int, str]:
    shutil.copy(kernel, work / "kernels" / "matmul.py")
    done = subprocess.run(
        [sys.executable, "-m", "rnx_cli", "gate", *FLAGS, *identity],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    return done.returncode, done.stdout + done.stderr


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="rnx-gate-logs-") as tmp:
        root = Path(tmp)
        database = f"sqlite:///{root / 'gate.db'}"
        token = create_token(database, repository=REPOSITORY, branches=("main",))
        live = start_server(database, root)
        work = root / "checkout"
        (work / "kernels").mkdir(parents=True)
        mr = ["--branch", "feature", "--base-branch", "main", "--pr"]
        steps = [
            ("merge request before any baseline", KERNEL, "feature", [*mr, "1", "--sha", "1" * 40]),
            (
                "push to main (the baseline)",
                KERNEL,
                "main",
                ["--branch", "main", "--sha", "2" * 40],
            ),
            ("merge request, unchanged kernel", KERNEL, "feature", [*mr, "2", "--sha", "3" * 40]),
            (
                "merge request, kernel 2x slower",
                SLOW_KERNEL,
                "feature",
                [*mr, "3", "--sha", "4" * 40],
            ),
        ]
        leaks = 0
        try:
            for title, kernel, branch, identity in steps:
                env = _gitlab_env(live.url, token.secret, branch)
                code, log = _gate(work, kernel, env, identity)
                leaks += (token.secret in log) + sum(
                    line.startswith("::") for line in log.splitlines()
                )
                print(f"===== {title}: $ rnx gate ... (exit code {code})")
                print(log.rstrip())
                print()
        finally:
            live.stop()
        print(f"logs holding the token or a workflow command: {leaks}")
        return 1 if leaks else 0


if __name__ == "__main__":
    raise SystemExit(main())
