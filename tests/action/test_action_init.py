"""`rnx init`: the files it writes are valid, and --open-pr opens the PR through GitHub's API."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from action.action_ref import from_direct_url, pip_install
from action.init import CONFIG_PATH, PR_BRANCH, WORKFLOW_PATH
from rnx.config import load_config
from rnx.errors import UserError
from rnx_cli.main import _load
from rnx_cli.main import main as rnx
from testbed.fakes.fake_github import Repo, State, Token, serve

KERNEL = Path(__file__).resolve().parents[1] / "data" / "action-kernel.py"


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "attention.py").write_text(KERNEL.read_text())
    (tmp_path / "kernels" / "helpers.py").write_text("def util(): pass\n")
    monkeypatch.chdir(tmp_path)
    for name in ("GITHUB_REPOSITORY", "GITHUB_TOKEN", "GH_TOKEN", "GITHUB_API_URL"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


COMMIT = "3f2c9a1e" * 5


def installed_from(root: Path, direct_url: dict[str, object] | None) -> str:
    """An rnx-benchmark distribution on sys.path, ahead of the shared venv's editable one,
    recorded as pip records it (PEP 610's direct_url.json)."""
    info = root / "site" / "rnx_benchmark-0.1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: rnx-benchmark\nVersion: 0.1.0\n")
    if direct_url is not None:
        (info / "direct_url.json").write_text(json.dumps(direct_url))
    return str(root / "site")


@pytest.fixture
def from_github(
    project: Path, monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> None:
    # pip install "rnx-benchmark @ git+https://github.com/acme/rnx-benchmark@v1"
    record = {
        "url": "https://github.com/acme/rnx-benchmark",
        "vcs_info": {"vcs": "git", "commit_id": COMMIT, "requested_revision": "v1"},
    }
    monkeypatch.syspath_prepend(installed_from(tmp_path_factory.mktemp("dist"), record))


@pytest.mark.usefixtures("from_github")
def test_init_writes_a_workflow_and_a_valid_config(project: Path) -> None:
    assert rnx(["init", "--workload", "kernels/attention.py"]) == 0
    config = load_config(project / CONFIG_PATH)
    assert [b.workload for b in config.benchmarks] == ["kernels/attention.py"]
    workflow = yaml.safe_load((project / WORKFLOW_PATH).read_text())
    steps = workflow["jobs"]["gate"]["steps"]
    gate = steps[-1]
    assert gate["uses"] == "acme/rnx-benchmark@" + COMMIT  # what it was installed from
    assert gate["with"]["kernalin-token"] == "${{ secrets.KERNALIN_TOKEN }}"
    assert workflow["permissions"]["id-token"] == "write"
    # A second run refuses to overwrite what the user may have edited.
    assert rnx(["init", "--workload", "kernels/attention.py"]) == 2
    assert rnx(["init", "--workload", "kernels/attention.py", "--force"]) == 0


def test_init_schedule_adds_a_scheduled_trigger(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert rnx(["init", "--workload", "kernels/attention.py"]) == 0
    plain = yaml.safe_load((project / WORKFLOW_PATH).read_text())
    assert "schedule" not in plain[True]  # YAML 1.1 reads the key `on` as True
    assert (
        rnx(["init", "--workload", "kernels/attention.py", "--schedule", "nightly", "--force"]) == 0
    )
    workflow = yaml.safe_load((project / WORKFLOW_PATH).read_text())
    assert workflow[True]["schedule"] == [{"cron": "17 3 * * *"}]
    assert workflow[True]["push"] == {"branches": ["main"]} and "pull_request" in workflow[True]
    args = ["init", "--workload", "kernels/attention.py", "--force", "--schedule"]
    assert rnx([*args, "30 2 * * 1-5"]) == 0
    workflow = yaml.safe_load((project / WORKFLOW_PATH).read_text())
    assert workflow[True]["schedule"] == [{"cron": "30 2 * * 1-5"}]
    capsys.readouterr()
    for bad in ("hourly", "* * *", "17 3 * * * *", "17 3 * * mon; rm -rf /"):
        assert rnx([*args, bad]) == 2
        assert "--schedule" in capsys.readouterr().err
    # A refused schedule wrote nothing over the previous files.
    workflow = yaml.safe_load((project / WORKFLOW_PATH).read_text())
    assert workflow[True]["schedule"] == [{"cron": "30 2 * * 1-5"}]


def test_init_finds_kernelbench_workloads(project: Path) -> None:
    assert rnx(["init"]) == 0
    assert [b.workload for b in load_config(project / CONFIG_PATH).benchmarks] == [
        "kernels/attention.py"
    ]


def test_init_refuses_bad_input(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert rnx(["init", "--workload", "kernels/missing.py"]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert rnx(["init", "--workload", "kernels/attention.py", "--runtimes", "tensorflow"]) == 2
    assert "pytorch_eager" in capsys.readouterr().err


@pytest.fixture
def github() -> Iterator[tuple[str, State]]:
    state = State()
    state.tokens["ghp_workflow"] = Token("octocat", workflows=True)
    state.tokens["ghp_no_workflow"] = Token("octocat", workflows=False)
    state.repos["acme/kernels"] = Repo(default_branch="main", refs={"main": "a" * 40})
    with serve(state) as (url, st):
        yield url, st


def _init_open_pr(api_url: str) -> int:
    """`rnx init --open-pr` of kernels/attention.py on acme/kernels at the GitHub fake."""
    args = ["init", "--workload", "kernels/attention.py", "--open-pr", "--repo", "acme/kernels"]
    return rnx([*args, "--api-url", api_url])


@pytest.mark.usefixtures("from_github")
def test_open_pr_through_the_rest_api(
    project: Path, github: tuple[str, State], monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    url, state = github
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_workflow")
    code = _init_open_pr(url)
    assert code == 0, capsys.readouterr().err
    repo = state.repos["acme/kernels"]
    (pull,) = repo.pulls
    assert pull["head"]["ref"] == PR_BRANCH and pull["base"]["ref"] == "main"
    assert "opened https://github.com/acme/kernels/pull/1" in capsys.readouterr().out
    assert "kernels/attention.py" in repo.files[(PR_BRANCH, CONFIG_PATH)]
    assert f"uses: acme/rnx-benchmark@{COMMIT}" in repo.files[(PR_BRANCH, WORKFLOW_PATH)]
    assert not (project / WORKFLOW_PATH).exists()  # nothing written locally


@pytest.mark.usefixtures("from_github")
def test_open_pr_without_workflow_permission_says_what_token_to_use(
    project: Path, github: tuple[str, State], monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    url, state = github
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_no_workflow")
    code = _init_open_pr(url)
    assert code == 2
    err = capsys.readouterr().err
    assert "'workflow' scope" in err and "Workflows: write" in err
    assert state.repos["acme/kernels"].pulls == []


@pytest.mark.parametrize(
    ("record", "why"),
    [
        (None, "not installed from a git URL"),  # from an index or a wheel file
        ({"url": "file:///src/rnx-benchmark", "dir_info": {"editable": True}}, "not a git URL"),
        (
            {"url": "https://gitlab.com/acme/rnx", "vcs_info": {"vcs": "git", "commit_id": COMMIT}},
            "not a repository on github.com",
        ),
    ],
)
def test_init_without_a_known_source_writes_a_placeholder_and_says_so(
    project: Path,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path_factory: pytest.TempPathFactory,
    capsys: pytest.CaptureFixture[str],
    record: dict[str, object] | None,
    why: str,
) -> None:
    monkeypatch.syspath_prepend(installed_from(tmp_path_factory.mktemp("dist"), record))
    assert rnx(["init", "--workload", "kernels/attention.py"]) == 0
    out = capsys.readouterr().out
    assert "fill in:" in out and "--action-ref OWNER/REPO@REF" in out and why in out
    text = (project / WORKFLOW_PATH).read_text()
    assert "uses: OWNER/REPO@REF" in text and "# FILL IN" in text
    # A pull request must not add a workflow that cannot run.
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_workflow")
    args = ["init", "--workload", "kernels/attention.py", "--open-pr", "--repo", "acme/kernels"]
    assert rnx(args) == 2
    assert "--open-pr needs --action-ref" in capsys.readouterr().err
    # --action-ref fills it in.
    args = ["init", "--workload", "kernels/attention.py", "--force", "--action-ref"]
    assert rnx([*args, "acme/rnx-benchmark@v1"]) == 0
    gate = yaml.safe_load((project / WORKFLOW_PATH).read_text())["jobs"]["gate"]["steps"][-1]
    assert gate["uses"] == "acme/rnx-benchmark@v1"
    assert rnx([*args, "rnx-benchmark"]) == 2
    assert "give OWNER/REPO@REF" in capsys.readouterr().err


def test_action_ref_from_the_urls_pip_records() -> None:
    vcs = {"vcs": "git", "commit_id": COMMIT}
    for url in (
        "https://github.com/acme/rnx-benchmark.git",
        "ssh://git@github.com/acme/rnx-benchmark.git",
        "git@github.com:acme/rnx-benchmark",
    ):
        ref = from_direct_url(json.dumps({"url": url, "vcs_info": vcs}))
        assert ref.uses == f"acme/rnx-benchmark@{COMMIT}", url
    sub = {"url": "https://github.com/acme/mono", "vcs_info": vcs, "subdirectory": "tools/rnx"}
    assert from_direct_url(json.dumps(sub)).uses == f"acme/mono/tools/rnx@{COMMIT}"
    # A credential in a hand-made record reaches neither the note nor the workflow.
    leaky = {"url": "https://x-access-token:ghs_secret@github.com/acme/rnx", "vcs_info": vcs}
    ref = from_direct_url(json.dumps(leaky))
    assert ref.uses == f"acme/rnx@{COMMIT}" and "ghs_secret" not in ref.note
    assert not from_direct_url("{not json").known
    assert not from_direct_url(json.dumps({"url": sub["url"], "vcs_info": {"vcs": "git"}})).known


@pytest.mark.usefixtures("from_github")
def test_a_missing_extra_is_installed_from_where_rnx_came_from(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # No release is on PyPI: `pip install 'rnx-benchmark[server]'` would fail, the same commit
    # of the same repository does not.
    with pytest.raises(UserError) as refused:
        _load("rnx_no_such_module:main", "server")
    wanted = (
        f"pip install 'rnx-benchmark[server] @ git+https://github.com/acme/rnx-benchmark@{COMMIT}'"
    )
    assert str(refused.value).endswith(wanted)
    checkout = {"url": "file:///src/my%20rnx", "dir_info": {"editable": True}}
    assert pip_install("gpu", json.dumps(checkout)) == "pip install -e '/src/my rnx[gpu]'"
    wheel = {"url": "file:///tmp/rnx_benchmark-0.1.0-py3-none-any.whl", "archive_info": {}}
    assert pip_install("gpu", json.dumps(wheel)) == "pip install 'rnx-benchmark[gpu]'"
