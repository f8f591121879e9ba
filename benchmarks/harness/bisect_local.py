"""`rnx bisect` on a planted slowdown: how often it names the right commit, and what it costs.

Each try builds a git repository holding examples/attention.py and 8 commits after it, one of
them (at a seeded random position) slowing ModelNew down: `--slowdown 2x` calls the fused
attention twice; `--slowdown 10%` calls it once more on the first of the batch's 10 samples
(a tenth more work; the ends' measured ratio is printed with each try); `--slowdown none`
changes nothing, and no commit should be named. Then it runs
the real command, `python -m rnx_cli bisect HEAD~8 HEAD --json`, and checks the culprit.

    .venv/bin/python -m benchmarks.harness.bisect_local --slowdown 2x --tries 1
    .venv/bin/python -m benchmarks.harness.bisect_local --slowdown 10% --tries 10

About 20 s a try at 2x and 1-2 minutes at 10% on a quiet 2-core machine.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ONE_CALL = "        return F.scaled_dot_product_attention(q, k, v)\n"
# (what the culprit replaces, with what): 2x calls the fused attention twice; 10% calls it
# once more on the batch's first sample (a tenth more work at batch size 10, plus a call).
PLANTS = {
    "2x": (ONE_CALL, "        F.scaled_dot_product_attention(q, k, v)\n" + ONE_CALL),
    "10%": (ONE_CALL, "        F.scaled_dot_product_attention(q[:1], k[:1], v[:1])\n" + ONE_CALL),
    "none": (ONE_CALL, "        # the same call\n" + ONE_CALL),  # a comment: nothing to name
}
COMMITS = 8


def _git(repo: Path, *args: str, name: str = "dev") -> str:
    done = subprocess.run(
        ["git", "-c", "user.email=dev@example.com", "-c", f"user.name={name}", *args],
        cwd=repo,
        check=True,
        capture_output=True,
        text=True,
    )
    return done.stdout.strip()


def build(repo: Path, slowdown: str, culprit: int) -> str:
    """The repository, its culprit commit (1-based position among the 8) slowing it down."""
    (repo / "kernels").mkdir(parents=True)
    workload = repo / "kernels" / "attention.py"
    shutil.copy(ROOT / "examples" / "attention.py", workload)
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", ".")
    _git(repo, "commit", "-qm", "attention")
    sha = ""
    for i in range(1, COMMITS + 1):
        if i == culprit:
            before, after = PLANTS[slowdown]
            text = workload.read_text()
            workload.write_text(text.replace(before, after))
            _git(repo, "commit", "-qam", f"commit {i}: the slowdown", name="culprit")
            sha = _git(repo, "rev-parse", "HEAD")
        else:
            (repo / "NOTES").write_text(f"note {i}\n")
            _git(repo, "add", "NOTES")
            _git(repo, "commit", "-qm", f"commit {i}: notes")
    return sha


def one_try(args: argparse.Namespace, culprit: int) -> dict[str, object]:
    holder = Path(tempfile.mkdtemp(prefix="rnx-bisect-bench-"))
    try:
        repo = holder / "repo"
        planted = build(repo, args.slowdown, culprit)
        started = time.monotonic()
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "rnx_cli",
                "bisect",
                f"HEAD~{COMMITS}",
                "HEAD",
                "--json",
                "--workload",
                "kernels/attention.py",
                "--samples",
                str(args.samples),
                "--processes",
                str(args.processes),
                "--batch-sizes",
                str(args.batch_size),
            ],
            cwd=repo,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            capture_output=True,
            text=True,
            timeout=1800,
        )
        wall = time.monotonic() - started
        if done.returncode not in (0, 1):
            return {"culprit": culprit, "found": False, "error": done.stderr[-500:], "wall": wall}
        outcome = json.loads(done.stdout.splitlines()[-1])
        named = (outcome["culprit"] or {}).get("sha")
        return {
            "culprit": culprit,
            "found": named is None if args.slowdown == "none" else named == planted,
            "named": "none" if named is None else ("right" if named == planted else "WRONG"),
            "ends": outcome["ends"],
            "steps": len(outcome["steps"]),
            # The ends, then each attempt's two (a skip's first failing one counted as two).
            "runs": 1 + sum(2 * s["attempts"] for s in outcome["steps"]),
            "why": outcome["why"],
            "wall": wall,
        }
    finally:
        shutil.rmtree(holder, ignore_errors=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--slowdown", choices=sorted(PLANTS), default="2x")
    p.add_argument("--tries", type=int, default=1)
    p.add_argument("--batch-size", type=int, default=10)
    p.add_argument("--samples", type=int, default=30)
    p.add_argument("--processes", type=int, default=3)
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args()
    rng = random.Random(args.seed)
    found = 0
    for n in range(1, args.tries + 1):
        r = one_try(args, rng.randint(2, COMMITS))
        found += bool(r["found"])
        ends = r.get("ends") or {}
        print(
            f"try {n}: culprit at commit {r['culprit']} of {COMMITS}, "
            f"ends {ends.get('ratio', 0):.3f}x "
            f"[{ends.get('low', 0):.3f}, {ends.get('high', 0):.3f}], "
            f"named {r.get('named', 'error')}, {r.get('steps', '-')} steps, "
            f"{r.get('runs', '-')} paired runs, {r['wall']:.0f} s"
            + (f"; {r['why']}" if r.get("why") else "")
            + (f"; error: {r['error']}" if r.get("error") else ""),
            flush=True,
        )
    print(
        f"rnx bisect, {args.slowdown} slowdown among {COMMITS} commits, batch size "
        f"{args.batch_size}, samples {args.samples}, processes {args.processes}: "
        + (
            f"no culprit named in {found} of {args.tries} tries"
            if args.slowdown == "none"
            else f"right culprit in {found} of {args.tries} tries"
        )
    )


if __name__ == "__main__":
    main()
