"""The /hardware page's SVG bars: one per timed cell, whiskers at the interval, text escaped."""

from __future__ import annotations

import re

from gate_server.dashboard.hardware_chart import _decades, comparison_svg
from rnx.hardware import compare_hardware
from testbed.factories import h200_score
from tests.rnx.test_hardware import run


def test_one_bar_and_three_whisker_lines_per_timed_cell() -> None:
    c = compare_hardware(
        [
            run("cpu", seed=1),
            run("gpu", seed=2, slowdown=0.01, broken=["pytorch_eager/float32/bs8"]),
        ]
    )
    svg = str(comparison_svg(c))
    assert svg.count('<g class="bar') == 3  # 4 cells, one broken
    assert svg.count('class="whisker"') == 9
    assert "diverged" in svg and "faster" in svg
    # The bars share one log axis: the GPU's median bar is shorter than the CPU's.
    widths = [float(w) for w in re.findall(r'<rect x="\d+" y="[\d.]+" width="([\d.]+)"', svg)]
    assert widths[1] < widths[0]


def test_labels_from_documents_are_escaped() -> None:
    c = compare_hardware([run("a", seed=1), run("b", name="<script>alert(1)</script>", seed=2)])
    svg = str(comparison_svg(c))
    assert "<script>" not in svg and "&lt;script&gt;alert(1)&lt;/script&gt;" in svg


def test_log_ticks() -> None:
    assert _decades(5e3, 2e7) == [1e4, 1e5, 1e6, 1e7]
    assert _decades(90, 1100) == [100, 200, 500, 1000]


def test_the_page_template_shows_sol_only_when_a_run_has_scores() -> None:
    from types import SimpleNamespace

    from gate_server.dashboard.hardware import HardwareQuery
    from gate_server.http.dashboard.routes import templates

    def page(scored: bool) -> str:
        gpu = run("gpu", seed=2, slowdown=0.5)
        if scored:
            sol = h200_score(0.25)
            configs = [c.model_copy(update={"speed_of_light": sol}) for c in gpu.configurations]
            gpu = gpu.model_copy(update={"configurations": configs})
        c = compare_hardware([run("cpu", seed=1), gpu])
        viewer = SimpleNamespace(workspace="acme", via_session=False)
        return templates.get_template("hardware.html").render(
            viewer=viewer,
            csrf="",
            nav="hardware",
            query=HardwareQuery("a/b", "main", "kernels/attention.py", ("cpu", "gpu")),
            workloads=[],
            comparison=c,
            chart=comparison_svg(c),
            run_ids={},
        )

    assert ">SOL</th>" not in page(False)
    scored = page(True)
    assert ">SOL</th>" in scored and scored.count(">0.25</td>") == 2
