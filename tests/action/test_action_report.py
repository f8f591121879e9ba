"""Markdown reports: sections per part, gathering, the overall tier, status text."""

from __future__ import annotations

import dataclasses
import re

from rnx.schema import ConfigComparison
from rnx_github.comment import (
    COMMENT_MARKER,
    ConfigNote,
    PartResult,
    combine,
    parse_parts,
    status_description,
)
from testbed.factories import h200_score


def _part(tier: str, env: str, *, reasons: list[str] | None = None) -> PartResult:
    c = ConfigComparison(
        id="onnxruntime/float16/bs8",
        runtime="onnxruntime",
        dtype="float16",
        batch_size=8,
        status="diverged" if tier == "BLOCK" else "ok",
        verdict="broken" if tier == "BLOCK" else "equivalent",
        reason="max abs error 0.5 > atol | 1e-3" if tier == "BLOCK" else None,
        base_median_ns=1_250_000.0,
        head_median_ns=1_262_500.0,
        ratio=1.01,
        low=0.99,
        high=1.03,
    )
    return PartResult(
        workload="kernels/attention.py",
        job="gate",
        environment=env,
        tier=tier,
        reasons=reasons or [],
        comparisons=[c],  # type: ignore[arg-type]
        url="https://gate.example.com/runs/1",
    )


def test_a_part_shows_medians_ratio_interval_verdict_correctness_and_link() -> None:
    body = combine([], [_part("PASS", "a100")], sha="abc123def4567890").body
    assert body.startswith(COMMENT_MARKER)
    assert "rnx-benchmark: PASS" in body and "commit abc123def456" in body
    row = next(line for line in body.splitlines() if line.startswith("| `onnxruntime"))
    assert (
        row == "| `onnxruntime/float16/bs8` | 1.25 ms | 1.26 ms "
        "| 1.010× (0.990–1.030) | equivalent | ok |"
    )
    assert "[Run page](https://gate.example.com/runs/1)" in body


def test_broken_correctness_is_escaped_into_the_table() -> None:
    body = combine([], [_part("BLOCK", "a100", reasons=["diverged"])], sha="a" * 40).body
    assert "**diverged**: max abs error 0.5 &gt; atol \\| 1e-3" in body


def test_parts_of_the_same_commit_are_kept_and_older_commits_dropped() -> None:
    first = combine([], [_part("BLOCK", "h100")], sha="1" * 40).body
    same_commit = combine([first], [_part("PASS", "a100")], sha="1" * 40)
    assert set(parse_parts(same_commit.body)) == {
        "gate/h100/kernels/attention.py",
        "gate/a100/kernels/attention.py",
    }
    assert same_commit.tier == "BLOCK"
    next_commit = combine([same_commit.body], [_part("PASS", "a100")], sha="2" * 40)
    assert set(parse_parts(next_commit.body)) == {"gate/a100/kernels/attention.py"}
    assert next_commit.tier == "PASS"


def test_status_description_fits_githubs_limit() -> None:
    text = status_description("BLOCK", "soft-fail", ["x" * 500])
    assert len(text) == 140 and text.startswith("BLOCK (soft-fail): xxx")
    assert status_description("PASS", "enforce", []) == "PASS: no credible slowdown"


def test_many_configurations_list_only_what_needs_a_look() -> None:
    base = _part("PASS", "a100").comparisons[0]
    rows = [base.model_copy(update={"id": f"pytorch_eager/float32/bs{i}"}) for i in range(1, 40)]
    rows[5] = rows[5].model_copy(update={"verdict": "undecided"})
    part = _part("WARN", "a100")
    part = PartResult(**{**part.__dict__, "comparisons": rows})
    body = combine([], [part], sha="a" * 40).body
    assert "`pytorch_eager/float32/bs6`" in body and "`pytorch_eager/float32/bs7`" not in body
    assert "| 38 more configurations: equivalent, faster or skipped |" in body


def test_text_from_a_results_document_cannot_forge_markers_or_format_the_comment() -> None:
    # A fork's workflow writes the results document: its reasons and names are untrusted.
    forged = "ok` <!-- rnx-benchmark:part key=x tier=PASS -->\n[click](https://evil.example) **b**"
    base = _part("BLOCK", "a100", reasons=[forged])
    part = dataclasses.replace(
        base,
        workload="kernels/`evil`<!--.py",
        comparisons=[base.comparisons[0].model_copy(update={"reason": forged})],
    )
    body = combine([], [part], sha="abc123def4567890").body
    assert len(parse_parts(body)) == 1
    assert body.count("<!-- rnx-benchmark:part key=") == 1
    assert "[click](" not in body and "**b**" not in body
    assert "&lt;\\!-- rnx-benchmark:part key=x" in body


def test_measurement_notes_are_one_inert_line_per_configuration_under_the_table() -> None:
    notes = [
        ConfigNote("pytorch_eager/float32/bs8", "GPU shared with other work: 3 other process(es)"),
        ConfigNote("torch_compile/float16/bs8", "a *fixed* kernel ran <b>3.2x</b> its fastest"),
    ]
    part = dataclasses.replace(_part("PASS", "h200"), notes=notes)
    lines = combine([], [part], sha="b" * 40).body.splitlines()
    at = lines.index("Measurement notes:")
    assert lines[at - 2].startswith("| `onnxruntime/float16/bs8`")  # under the table
    assert lines[at + 1] == (
        "- `pytorch_eager/float32/bs8`: GPU shared with other work: 3 other process\\(es\\)"
    )
    assert lines[at + 2] == (
        "- `torch_compile/float16/bs8`: a \\*fixed\\* kernel ran &lt;b&gt;3.2x&lt;/b&gt; "
        "its fastest"
    )
    many = [ConfigNote(f"pytorch_eager/float32/bs{i}", "GPU shared") for i in range(1, 16)]
    body = combine([], [dataclasses.replace(part, notes=many)], sha="b" * 40).body
    assert body.count(": GPU shared") == 12
    assert "- and 3 more configurations (see the run page)" in body
    assert "Measurement notes" not in combine([], [_part("PASS", "h200")], sha="b" * 40).body


def test_speed_of_light_is_a_column_and_a_note_when_the_run_has_scores() -> None:
    part = _part("PASS", "h200")
    sol = h200_score(1.31, measured_s=1e-3, beyond_roofline=True)
    scored = dataclasses.replace(
        part, comparisons=[part.comparisons[0].model_copy(update={"speed_of_light": sol})]
    )
    body = combine([], [scored], sha="abc123def4567890").body
    lines = body.splitlines()
    header = next(line for line in lines if line.startswith("| configuration"))
    assert "| ratio head/base (90% interval) | SOL | verdict |" in header
    row = next(line for line in lines if line.startswith("| `onnxruntime"))
    assert "| 1.010× (0.990–1.030) | 1.31 memory\\! | equivalent | ok |" in row
    note = next(line for line in lines if line.startswith("SOL: roofline time"))
    assert "a measurement or counting problem" in note
    assert "H200 SXM (peaks table: dense datasheet figures)" in note
    # Without scores (documents written before them): no column, no note.
    plain = combine([], [part], sha="abc123def4567890").body
    assert "| SOL |" not in plain and "SOL: roofline" not in plain


def test_mentions_in_what_users_wrote_notify_nobody() -> None:
    # The comment and the job summary are posted as the App: a branch, workload or reason
    # holding `@org/team` must not page that team.
    part = dataclasses.replace(
        _part("WARN", "@acme/env-team", reasons=["@acme/perf-team see feature/@octocat"]),
        workload="kernels/@acme/kernels-team.py",
        outage="refused by @acme/ops",
    )
    body = combine([], [part], sha="a" * 40).body
    # Inside a code span GitHub links no mention; everywhere else none may be live.
    body = re.sub(r"`[^`]*`", "", body)
    for handle in ("acme/env-team", "acme/perf-team", "octocat", "acme/kernels-team", "acme/ops"):
        assert f"@{handle}" not in body, body
    assert "@\u2060acme/perf-team" in body.replace("\\/", "/")
