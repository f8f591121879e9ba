"""The server-side SVG charts and the numbers they show."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from datetime import datetime, timedelta, timezone

import numpy as np

from gate_server.dashboard.charts import (
    ChangeMark,
    HistoryPoint,
    distribution_svg,
    history_svg,
    median_interval,
    memory_svg,
    nice_ticks,
)

SVG = "{http://www.w3.org/2000/svg}"


def point(i: int, **kw: object) -> HistoryPoint:
    base: dict[str, object] = dict(
        run_id=f"00000000-0000-0000-0000-{i:012d}",
        sha=f"{i:040x}",
        created_at=datetime(2026, 11, 1, tzinfo=timezone.utc) + timedelta(hours=i),
        median_ns=1e6 + i * 1e3,
        low_ns=0.99e6 + i * 1e3,
        high_ns=1.01e6 + i * 1e3,
        environment="cpu-a",
        tier="PASS",
        is_baseline=True,
        ratio=1.0,
    )
    base.update(kw)
    return HistoryPoint(**base)  # type: ignore[arg-type]


def test_nice_ticks_are_round_and_cover_the_range() -> None:
    ticks = nice_ticks(1.1e6, 2.05e6)
    assert ticks == [1.2e6, 1.4e6, 1.6e6, 1.8e6, 2.0e6]
    assert nice_ticks(980, 1020) == [980, 990, 1000, 1010, 1020]


def test_median_interval_matches_order_statistics_and_covers_the_median() -> None:
    rng = np.random.default_rng(1)
    values = list(rng.lognormal(0, 0.1, size=101))
    med, low, high = median_interval(values)
    s = sorted(values)
    assert med == s[50]
    # n=101: ranks 50.5 -/+ 1.96*sqrt(101)/2 = 40.65..60.35 -> s[40] and s[60].
    assert (low, high) == (s[40], s[60])
    covered = 0
    for seed in range(200):
        sample = np.random.default_rng(seed).lognormal(0, 0.1, size=31)
        _, lo, hi = median_interval(list(sample))
        covered += lo <= 1.0 <= hi  # the true median of lognormal(0, .) is 1
    assert 0.90 <= covered / 200 <= 1.0


def test_history_svg_draws_one_marker_per_commit_with_hover_text() -> None:
    points = [point(i) for i in range(5)]
    points.append(point(5, environment="cpu-b", tier="BLOCK", is_baseline=False, ratio=1.6))
    points.append(point(6, environment="cpu-b", accepted_reason="tiles", ratio=1.4))
    svg = history_svg(points, label="t")
    root = ET.fromstring(str(svg))
    markers = [e for e in root.iter() if "pt" in (e.get("class") or "").split()]
    assert len(markers) == 7 == int(root.get("data-points", "0"))
    assert [m.get("class") for m in markers][-2:] == ["pt pt-block", "pt pt-accepted"]
    titles = [m.find(f"{SVG}title").text or "" for m in markers]  # type: ignore[union-attr]
    assert "1.600×" in titles[5] and "not a baseline" in titles[5]
    assert "accepted: tiles" in titles[6]
    assert "0000000000" in titles[0] and "1 ms" in titles[0]
    # The environment change is marked once; the band runs through cpu-a's baselines only (the
    # line skips the BLOCK and the accept: test_history_drawing.py).
    assert len(re.findall(r'class="mark env-change"', str(svg))) == 1
    assert str(svg).count('class="band"') == 1
    links = [a.get("href") for a in root.iter(f"{SVG}a")]
    assert links == [f"/runs/{p.run_id}" for p in points]


def test_history_svg_escapes_what_uploaders_chose() -> None:
    evil = '<script>alert(1)</script>"'
    svg = str(history_svg([point(0, environment=evil, accepted_reason=evil)], label=evil))
    assert "<script>" not in svg
    ET.fromstring(svg)  # still well-formed


def test_history_svg_without_points_says_so() -> None:
    assert "No runs on the baseline branch yet" in history_svg([], label="x")


def test_distribution_svg_shows_both_sides_on_one_axis() -> None:
    rng = np.random.default_rng(0)
    base = list(rng.normal(1e6, 1e4, 500))
    head = list(rng.normal(1.3e6, 1e4, 30))
    root = ET.fromstring(str(distribution_svg(base, head, label="x")))
    lanes = {g.get("class"): g for g in root.iter(f"{SVG}g") if "lane" in (g.get("class") or "")}
    assert set(lanes) == {"lane base", "lane head"}
    assert len(lanes["lane base"].findall(f"{SVG}circle")) <= 240  # thinned, never thousands
    assert len(lanes["lane head"].findall(f"{SVG}circle")) == 30
    base_median = float(lanes["lane base"].find(f"{SVG}line[@class='median']").get("x1"))  # type: ignore[union-attr]
    head_median = float(lanes["lane head"].find(f"{SVG}line[@class='median']").get("x1"))  # type: ignore[union-attr]
    assert head_median > base_median  # slower is to the right


def test_distribution_svg_with_one_side_missing() -> None:
    svg = str(distribution_svg(None, [1.0e6, 1.1e6], label="x"))
    assert "no samples" in svg and 'class="lane head"' in svg


def test_history_svg_marks_a_change_point_between_its_runs() -> None:
    points = [point(i) for i in range(6)]
    changes = [
        ChangeMark(7, points[3].run_id, 1.1, 1.08, 1.12, "open"),
        ChangeMark(8, "not-in-this-window", 0.9, 0.88, 0.92, "resolved"),
    ]
    svg = str(history_svg(points, label="t", changes=changes))
    root = ET.fromstring(svg)
    [mark] = [g for g in root.iter(f"{SVG}g") if "change-point" in (g.get("class") or "")]
    assert mark.get("class") == "mark change-point cp-open"
    assert mark.get("data-change-point") == "7"
    line = mark.find(f"{SVG}line")
    dots = [e for e in root.iter(f"{SVG}circle")]
    x = float(line.get("x1", "0"))  # type: ignore[union-attr]
    assert float(dots[2].get("cx", "0")) < x < float(dots[3].get("cx", "0"))
    title = mark.find(f"{SVG}title").text or ""  # type: ignore[union-attr]
    assert (
        title == f"change point: 1.100× (90% interval 1.080–1.120) from {points[3].sha[:10]}, open"
    )


def test_memory_svg_draws_each_recorded_peak_on_the_time_charts_x_positions() -> None:
    pts = [point(0, peak_bytes=4 << 20), point(1), point(2, peak_bytes=6 << 20)]
    svg = memory_svg(pts, label="peak <memory>")
    assert svg is not None
    root = ET.fromstring(str(svg))
    assert root.get("aria-label") == "peak <memory>"
    dots = {c.get("data-bytes"): c for c in root.iter(f"{SVG}circle")}
    assert set(dots) == {str(4 << 20), str(6 << 20)}  # the run without memory has no dot
    small, large = dots[str(4 << 20)], dots[str(6 << 20)]
    assert float(large.get("cy", 0)) < float(small.get("cy", 0))  # more memory is drawn higher
    # The same x as the time chart's markers of the same commits, so the two line up.
    times = {
        c.get("data-run-id"): c.get("cx")
        for c in ET.fromstring(str(history_svg(pts, label="t"))).iter(f"{SVG}circle")
    }
    assert small.get("cx") == times[pts[0].run_id] and large.get("cx") == times[pts[2].run_id]
    assert "6 MiB" in "".join(root.itertext())
    assert "MiB" in "".join(t.text or "" for t in root.iter(f"{SVG}text"))


def test_memory_svg_is_absent_without_memory_and_breaks_at_an_environment_change() -> None:
    assert memory_svg([point(0), point(1)], label="m") is None
    pts = [point(0, peak_bytes=1000), point(1, peak_bytes=1000, environment="cpu-b")]
    root = ET.fromstring(str(memory_svg(pts, label="m")))
    assert len(list(root.iter(f"{SVG}polyline"))) == 2
