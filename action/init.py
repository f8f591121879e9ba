"""`rnx init` ("Add CI gate"): write .github/workflows/kernalin.yml and a starter kernalin.yml,
and optionally open the pull request that adds them through GitHub's REST API."""

from __future__ import annotations

import argparse
import base64
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import yaml

from action import action_ref
from action.inputs import WORKLOAD_SUFFIXES, parse_runtimes, read_connection
from action.publish import github_client
from rnx.config import parse_config
from rnx.errors import UserError
from rnx_github.client import DEFAULT_API_URL, GitHubClient, GitHubError

WORKFLOW_PATH = ".github/workflows/kernalin.yml"
CONFIG_PATH = "kernalin.yml"
PR_BRANCH = "rnx-benchmark/add-ci-gate"
_SKIP_DIRS = {
    ".git",
    ".venv",
    "venv",
    "node_modules",
    "build",
    "dist",
    "__pycache__",
    "site-packages",
}

WORKFLOW = """\
# Written by `rnx init`: benchmark the kernels listed in kernalin.yml on every pull request.
# Secrets/variables to set: KERNALIN_TOKEN (rnx token create) and KERNALIN_URL (your gate server).
name: kernalin
# A dispatched run names its bisection and commit, so the gate server knows from GitHub's
# workflow_run webhook when one failed; other runs keep GitHub's own name (empty run-name).
run-name: >-
  ${{{{ inputs.bisection && format('kernalin bisection {{0}} at {{1}}', inputs.bisection,
  inputs.commit) || '' }}}}
on:
  pull_request:
  push:
    branches: [{branch}]
  # The gate server (GitHub App mode) runs this at one commit of {branch}: to find the commit
  # that caused a change point (docs/bisection.md; with `bisection`, its runs never become
  # baselines), or to benchmark a commit no push measured (docs/auto-sync.md).
  workflow_dispatch:
    inputs:
      commit:
        description: "commit to benchmark (bisection); empty: the branch head"
        required: false
        default: ""
      bisection:
        description: "the gate server's bisection this run measures for"
        required: false
        default: ""
{schedule}permissions:
  contents: read
  pull-requests: write   # the sticky comment
  statuses: write        # the rnx-benchmark commit status
  id-token: write        # lets the gate server trust this repository's OIDC token
jobs:
  gate:
    runs-on: ubuntu-latest   # GPU kernels: put your GPU runner's labels here
    steps:
      - uses: actions/checkout@v4
      # A dispatched run (bisection, auto-sync) measures the commit it names.
      - if: inputs.commit != ''
        env:
          COMMIT: ${{{{ inputs.commit }}}}
        run: |
          git cat-file -e "$COMMIT^{{commit}}" 2>/dev/null ||
            git fetch -q --depth=1 origin "$COMMIT"
          git checkout -q --detach "$COMMIT"
      - uses: actions/setup-python@v5
        with:
          python-version: "3.11"
      # The action uses the runner's torch and never replaces it: install the build you need.
      - run: pip install torch --index-url https://download.pytorch.org/whl/cpu
      # {action_note}
      - uses: {action_ref}
        with:
          kernalin-token: ${{{{ secrets.KERNALIN_TOKEN }}}}
          kernalin-url: ${{{{ vars.KERNALIN_URL }}}}
          bisection: ${{{{ inputs.bisection }}}}
"""

# --schedule: a scheduled run of the default branch is a point of its history, like a push, so
# the server's change-point check gets points on quiet days too. Off the hour: GitHub delays
# (and may drop) scheduled runs at the top of the hour, when most are due.
SCHEDULES = {"nightly": "17 3 * * *", "weekly": "17 3 * * 1"}
SCHEDULE = """\
  schedule:   # {name}: GitHub runs it on the default branch
    - cron: "{cron}"
"""
_CRON_FIELD = r"[0-9*/,-]+"


def schedule_cron(value: str) -> str:
    """The cron expression of --schedule: nightly, weekly, or five cron fields."""
    if value in SCHEDULES:
        return SCHEDULES[value]
    fields = value.split()
    if len(fields) != 5 or not all(re.fullmatch(_CRON_FIELD, f) for f in fields):
        raise UserError(
            f"--schedule {value!r}: use nightly, weekly, or a cron expression of five fields "
            "like '17 3 * * *' (minute hour day month weekday, UTC)"
        )
    return " ".join(fields)


CONFIG_HEADER = """\
# Thresholds as code for rnx-benchmark (written by `rnx init`). Action inputs override it.
# gate.mode: enforce (BLOCK fails the check) | soft-fail (BLOCK warns) | report-only
# gate.compare: baseline (stored baseline, same environment) | paired (base and head in one job)
"""


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="rnx init", description=__doc__)
    p.add_argument("--workload", action="append", default=[], help="workload file (repeatable)")
    p.add_argument("--runtimes", default="pytorch_eager", help="comma-separated runtimes")
    p.add_argument("--branch", default="main", help="the baseline branch (default main)")
    p.add_argument(
        "--action-ref",
        "--action",
        help="OWNER/REPO@REF of the action (default: the repository and commit this "
        "rnx-benchmark was pip-installed from with a git URL)",
    )
    p.add_argument(
        "--schedule",
        help="also run on a schedule (nightly, weekly or a cron expression): scheduled runs "
        "of the default branch are history points like pushes",
    )
    p.add_argument("--force", action="store_true", help="overwrite existing files")
    p.add_argument("--open-pr", action="store_true", help="open a pull request that adds them")
    p.add_argument("--repo", help="OWNER/NAME for --open-pr (default: GITHUB_REPOSITORY)")
    p.add_argument("--api-url", help="GitHub API (default: GITHUB_API_URL or api.github.com)")
    return p


def find_workloads(root: Path, limit: int = 10) -> list[str]:
    """KernelBench-style files under root: a Model class and get_inputs()."""
    found: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS and not d.startswith("."))
        for name in sorted(filenames):
            path = Path(dirpath) / name
            if name.endswith(".py") and not name.startswith("test_"):
                try:
                    text = path.read_text(encoding="utf-8", errors="replace")
                except OSError:
                    continue
                if re.search(r"^class Model\b", text, re.M) and "def get_inputs" in text:
                    found.append(path.relative_to(root).as_posix())
            if len(found) >= limit:
                return found
    return found


@dataclass(frozen=True)
class Files:
    workflow: str
    config: str


def render(
    workloads: list[str],
    *,
    runtimes: list[str],
    branch: str,
    action: action_ref.ActionRef,
    schedule: str | None = None,
) -> Files:
    config = {
        "version": 1,
        "gate": {
            "mode": "enforce",
            "block-threshold": "25%",
            "rope": "2%",
            "probability": 0.95,
            "compare": "baseline",
            "baseline-branches": [branch],
        },
        "benchmarks": [
            {"workload": w, "runtimes": runtimes, "batch-sizes": [1, 8], "dtypes": ["float32"]}
            for w in workloads
        ],
    }
    text = CONFIG_HEADER + yaml.safe_dump(config, sort_keys=False)
    parse_config(yaml.safe_load(text), source="the starter kernalin.yml")  # never write a bad one
    on_schedule = (
        ""
        if schedule is None
        else SCHEDULE.format(
            name=schedule if schedule in SCHEDULES else "scheduled", cron=schedule_cron(schedule)
        )
    )
    note = (
        f"rnx-benchmark's action: {action.note}"
        if action.known
        else f"FILL IN the action's repository and tag or commit ({action.note})"
    )
    workflow = WORKFLOW.format(
        branch=branch, action_ref=action.uses, action_note=note, schedule=on_schedule
    )
    return Files(workflow, text)


def _check_workloads(root: Path, workloads: list[str]) -> list[str]:
    for w in workloads:
        if not w.endswith(WORKLOAD_SUFFIXES):
            raise UserError(f"--workload {w}: give a KernelBench-style .py file or an .onnx model")
        if not (root / w).is_file():
            raise UserError(f"--workload {w} does not exist (paths are relative to {root})")
    return list(dict.fromkeys(Path(w).as_posix() for w in workloads))


def open_pull_request(gh: GitHubClient, repo: str, files: Files, *, branch: str = PR_BRANCH) -> str:
    """Branch from the default branch, commit both files, open the PR; returns its URL."""
    try:
        default = gh.request("GET", f"/repos/{repo}").json()["default_branch"]
        base_sha = gh.request("GET", f"/repos/{repo}/git/ref/heads/{default}").json()["object"][
            "sha"
        ]
        gh.request(
            "POST", f"/repos/{repo}/git/refs", json={"ref": f"refs/heads/{branch}", "sha": base_sha}
        )
        for path, text in ((WORKFLOW_PATH, files.workflow), (CONFIG_PATH, files.config)):
            gh.request(
                "PUT",
                f"/repos/{repo}/contents/{path}",
                json={
                    "message": f"Add {path} (rnx-benchmark CI gate)",
                    "content": base64.b64encode(text.encode()).decode(),
                    "branch": branch,
                },
            )
        pull = gh.request(
            "POST",
            f"/repos/{repo}/pulls",
            json={
                "title": "Add the rnx-benchmark CI gate",
                "head": branch,
                "base": default,
                "body": "Benchmarks the kernels in kernalin.yml on every pull request and "
                "blocks credible slowdowns and broken runtimes.\n\nBefore merging, set the "
                "KERNALIN_TOKEN secret and the KERNALIN_URL variable.",
            },
        ).json()
    except GitHubError as e:
        text = str(e)
        if "workflow" in text and e.status in (403, 404):
            raise UserError(
                f"GitHub refused to write {WORKFLOW_PATH}: the token may not change workflows. "
                f"Use a token with the 'workflow' scope (classic) or 'Workflows: write' "
                f"(fine-grained), or commit the files written here yourself. ({text})"
            ) from None
        if "Reference already exists" in text:
            raise UserError(
                f"the branch {branch} already exists in {repo}; delete it or merge its PR"
            ) from None
        raise UserError(f"could not open the pull request: {text}") from None
    return str(pull["html_url"])


# owner/repo[/path]@ref: what GitHub accepts in `uses:` for an action in a repository.
_USES = r"[A-Za-z0-9-]+/[A-Za-z0-9_.-]+(/[A-Za-z0-9_./-]+)?@[A-Za-z0-9_./-]+"


def _action(flag: str | None) -> action_ref.ActionRef:
    if flag is None:
        return action_ref.installed()
    if not re.fullmatch(_USES, flag):
        raise UserError(
            f"--action-ref {flag!r}: give OWNER/REPO@REF, e.g. acme/rnx-benchmark@v1 or a "
            "40-character commit"
        )
    return action_ref.ActionRef(flag, "given with --action-ref")


def main(argv: list[str], *, env: Mapping[str, str] | None = None) -> int:
    args = _parser().parse_args(argv)
    env = os.environ if env is None else env
    root = Path.cwd()
    workloads = _check_workloads(root, args.workload) if args.workload else find_workloads(root)
    if not workloads:
        raise UserError(
            "no workloads found; pass --workload PATH (a .py file with class Model and "
            "get_inputs(), or an .onnx model)"
        )
    runtimes = list(parse_runtimes(args.runtimes))
    action = _action(args.action_ref)
    files = render(
        workloads, runtimes=runtimes, branch=args.branch, action=action, schedule=args.schedule
    )

    if args.open_pr:
        repo = args.repo or env.get("GITHUB_REPOSITORY")
        # The gh CLI's GH_TOKEN too: `rnx init --open-pr` runs on a developer's machine.
        token = read_connection(env).github_token or env.get("GH_TOKEN")
        if not repo or not re.fullmatch(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+", repo):
            raise UserError("--open-pr needs --repo OWNER/NAME")
        if not action.known:
            raise UserError(
                f"--open-pr needs --action-ref OWNER/REPO@REF ({action.note}): a pull request "
                f"must not add a workflow that cannot run"
            )
        if not token:
            raise UserError(
                "--open-pr needs a GitHub token in GITHUB_TOKEN (or GH_TOKEN) allowed to write "
                "contents, pull requests and workflows"
            )
        api = args.api_url or env.get("GITHUB_API_URL") or DEFAULT_API_URL
        with github_client(api, token) as gh:
            url = open_pull_request(gh, repo, files)
        print(f"opened {url}")
        return 0

    targets = {root / WORKFLOW_PATH: files.workflow, root / CONFIG_PATH: files.config}
    existing = [str(p.relative_to(root)) for p in targets if p.exists()]
    if existing and not args.force:
        raise UserError(f"{', '.join(existing)} already exist; pass --force to overwrite")
    for path, text in targets.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        print(f"wrote {path.relative_to(root)}")
    if not action.known:
        print(
            f"fill in: {WORKFLOW_PATH} says `uses: {action_ref.PLACEHOLDER}` because "
            f"{action.note}; put the repository and tag or commit you install rnx-benchmark "
            "from there, or run again with --action-ref OWNER/REPO@REF --force"
        )
    print(
        "next: set the KERNALIN_TOKEN secret (rnx token create) and the KERNALIN_URL variable, "
        "then commit both files (docs/quickstart.md, step 3)"
    )
    return 0
