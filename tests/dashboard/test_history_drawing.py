"""History charts draw the real history (issue 27): the line skips BLOCKs and accepted runs,
which are marked points; the axis is scaled to the line; an accepted run stands where it was
accepted; environments are named, the key on hover."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from datetime import datetime, timedelta, timezone

from gate_server.dashboard.charts import history_svg
from gate_server.dashboard.reads import drawing_order
from gate_server.db.runs import ListedRun
from tests.dashboard.test_charts import SVG, point

T0 = datetime(2026, 11, 1, tzinfo=timezone.utc)


def _history() -> list:
    """Ten baselines wandering within +-20%, a 2.5x BLOCK and a 2.5x accepted run among them."""
    wander = [1.0, 1.1, 0.9, 1.2, 0.8, 1.0, 1.1, 0.95, 1.05, 1.0]
    points = [
        point(i, median_ns=1e6 * w, low_ns=0.98e6 * w, high_ns=1.02e6 * w)
        for i, w in enumerate(wander)
    ]
    points.insert(
        4,
        point(40, median_ns=2.5e6, low_ns=2.45e6, high_ns=2.55e6, tier="BLOCK", is_baseline=False),
    )
    points.insert(
        8, point(80, median_ns=2.5e6, low_ns=2.45e6, high_ns=2.55e6, accepted_reason="bigger tiles")
    )
    return points


def test_the_line_skips_blocks_and_accepts_and_the_axis_follows_the_line() -> None:
    points = _history()
    root = ET.fromstring(str(history_svg(points, label="t")))
    lines = root.findall(f".//{SVG}polyline")
    assert len(lines) == 1
    drawn = lines[0].get("points", "").split()
    assert len(drawn) == 10  # the ten baselines, not the BLOCK nor the accept
    # The axis is the line's: its top tick is below the spikes' 2.5 ms.
    ticks = [t.text or "" for t in root.findall(f".//{SVG}g[@class='grid']/{SVG}text")]
    tops = [float(re.sub(r"[^0-9.]", "", t)) for t in ticks if t.strip()]
    assert max(tops) < 1.5, ticks  # in ms
    # Both spikes are drawn, marked, at the plot's edge, and say why on hover.
    off = [e for e in root.iter() if "pt-off-scale" in (e.get("class") or "")]
    assert {e.get("data-run-id") for e in off} == {points[4].run_id, points[8].run_id}
    assert any("pt-block" in (e.get("class") or "") for e in off)
    assert any("pt-accepted" in (e.get("class") or "") for e in off)
    titles = [e.findtext(f"{SVG}title") or "" for e in off]
    assert all("off the chart's scale" in t for t in titles)
    # The line spans the real +-20%: from the plot's top area to its bottom area.
    ys = [float(xy.split(",")[1]) for xy in drawn]
    assert max(ys) - min(ys) > 120  # of a 198 px plot


def test_without_a_line_the_axis_covers_what_there_is() -> None:
    only = [point(0, tier="BLOCK", is_baseline=False)]
    root = ET.fromstring(str(history_svg(only, label="t")))
    assert not root.findall(f".//{SVG}polyline")
    assert not [e for e in root.iter() if "pt-off-scale" in (e.get("class") or "")]


def _listed(n: int, received: datetime, accepted: datetime | None = None) -> ListedRun:
    return ListedRun(
        run_id=f"run-{n}",
        sha=f"{n:040x}",
        branch="main",
        base_branch=None,
        event="push",
        pr_number=None,
        environment_key="env-a",
        workload="k.py",
        tier="PASS",
        created_at=received,
        received_at=received,
        baseline_branch="main",
        repository="acme/kernels",
        accepted_at=accepted,
        accepted_by=None,
        accept_reason=None if accepted is None else "ok",
    )


def test_an_accepted_run_stands_where_it_was_accepted() -> None:
    # PR run received at hour 1, two pushes at hours 2 and 3, accepted at hour 4.
    pr = _listed(1, T0 + timedelta(hours=1), accepted=T0 + timedelta(hours=4))
    pushes = [_listed(n, T0 + timedelta(hours=n)) for n in (2, 3)]
    window = [(r, {}) for r in sorted([pr, *pushes], key=lambda r: r.received_at, reverse=True)]
    assert [r.run_id for r, _ in window] == ["run-3", "run-2", "run-1"]  # as stored
    assert [r.run_id for r, _ in drawing_order(window)] == ["run-1", "run-3", "run-2"]
