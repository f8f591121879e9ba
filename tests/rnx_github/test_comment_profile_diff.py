"""The PR comment and job summary show the profile diff's top rows, as inert text."""

from __future__ import annotations

from rnx.schema import ConfigComparison, ProfileChange
from rnx_github.comment import PartResult, render_part

HOSTILE = "aten::<img src=x onerror=alert(1)>[click](https://evil.example)**b**@org/team"


def _row(cid_bs: int, changes: list[str]) -> ConfigComparison:
    return ConfigComparison(
        id=f"pytorch_eager/float32/bs{cid_bs}",
        runtime="pytorch_eager",
        dtype="float32",
        batch_size=cid_bs,
        status="ok",
        verdict="slower",
        explanation=[
            ProfileChange(kind="operator", name="x", delta_ns=1e5 - i, text=t)
            for i, t in enumerate(changes)
        ],
    )


def test_the_top_three_rows_per_configuration_as_inert_text():
    rows = [f"+{n} µs op{n}" for n in (180, 95, 40, 12)] + [f"+1 µs {HOSTILE}"]
    part = PartResult(
        workload="w.py",
        environment="env",
        tier="WARN",
        reasons=["slower"],
        comparisons=[_row(8, rows), _row(1, [f"new operator {HOSTILE} 95 µs"]), _row(2, [])],
    )
    text = render_part(part)
    assert "What moved in the profile (explains, never decides):" in text
    # inert_text escapes Markdown's specials, "+" (a list item) among them.
    top = "- `pytorch_eager/float32/bs8`: \\+180 µs op180; \\+95 µs op95; \\+40 µs op40"
    assert top in text
    assert "op12" not in text and "bs2`:" not in text
    line = next(x for x in text.splitlines() if x.startswith("- `pytorch_eager/float32/bs1`"))
    assert "<img" not in line and "[click](" not in line and "**b**" not in line
    assert "&lt;img src=x onerror=alert\\(1\\)&gt;" in line and "@\u2060org" in line


def test_no_explanations_no_section():
    part = PartResult(
        workload="w.py", environment="env", tier="PASS", reasons=[], comparisons=[_row(1, [])]
    )
    assert "What moved" not in render_part(part)


def test_the_plain_log_outside_github_prints_the_rows_too():
    from action.plain_log import render

    rows = [f"+{n} µs op{n}" for n in (180, 95, 40, 12)]
    part = PartResult(
        workload="w.py", environment="env", tier="WARN", reasons=[], comparisons=[_row(8, rows)]
    )
    lines = render([part], "WARN", "enforce")
    at = lines.index(
        "  why pytorch_eager/float32/bs8 moved (profile diff; it explains, never decides):"
    )
    assert lines[at + 1 : at + 4] == ["    +180 µs op180", "    +95 µs op95", "    +40 µs op40"]
    assert "op12" not in "\n".join(lines)
