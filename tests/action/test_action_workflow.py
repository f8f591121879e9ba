"""Workflow commands and files: escaping, multi-line outputs, summary, masking."""

from __future__ import annotations

import io
from pathlib import Path

from action.workflow import Workflow

ON_ACTIONS = {"GITHUB_ACTIONS": "true"}


def test_annotation_escapes_data_and_properties() -> None:
    out = io.StringIO()
    wf = Workflow(ON_ACTIONS, out)
    wf.error("50% slower\nsee run", file="kernels/a,b.py", line=3, title="rnx: BLOCK")
    assert out.getvalue() == (
        "::error file=kernels/a%2Cb.py,line=3,title=rnx%3A BLOCK::50%25 slower%0Asee run\n"
    )


def test_outputs_and_summary_go_to_the_runner_files(tmp_path: Path) -> None:
    output, summary = tmp_path / "output", tmp_path / "summary.md"
    wf = Workflow(
        {"GITHUB_OUTPUT": str(output), "GITHUB_STEP_SUMMARY": str(summary)}, io.StringIO()
    )
    wf.set_output("tier", "BLOCK")
    wf.set_output("summary", "line one\nline two")
    wf.append_summary("## report")
    text = output.read_text()
    name, rest = text.split("<<", 1)
    assert name == "tier"
    delimiter = rest.split("\n", 1)[0]
    assert f"tier<<{delimiter}\nBLOCK\n{delimiter}\n" in text
    assert "line one\nline two\n" in text
    assert summary.read_text() == "## report\n\n"


def test_on_actions_secrets_are_masked() -> None:
    out = io.StringIO()
    wf = Workflow(ON_ACTIONS, out)
    wf.mask("rnx_ci_secret")
    wf.mask("")
    assert out.getvalue() == "::add-mask::rnx_ci_secret\n"


def test_outside_actions_no_workflow_command_and_no_secret_is_printed() -> None:
    # GitLab, Jenkins, a terminal: `::add-mask::` would print the secret in clear.
    out = io.StringIO()
    wf = Workflow({"GITLAB_CI": "true", "CI": "true"}, out)
    wf.set_output("tier", "PASS")  # no GITHUB_OUTPUT: nothing to write, no error
    wf.mask("rnx_ci_secret")
    wf.error("50% slower\nsee run", file="kernels/a.py", line=3, title="rnx: BLOCK")
    wf.warning("gate server down", title="rnx: outage")
    assert out.getvalue() == (
        "error: kernels/a.py:3: rnx: BLOCK: 50% slower\nsee run\n"
        "warning: rnx: outage: gate server down\n"
    )
