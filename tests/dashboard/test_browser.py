"""The dashboard in headless Chromium against the real server, with runs uploaded by the API."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

# Registered before the import, so the fixture module's asserts explain themselves too.
pytest.register_assert_rewrite("tests.dashboard.dashboard_site")
from tests.dashboard.dashboard_site import (  # noqa: E402
    CONFIGS,
    DESKTOP,
    MAIN_POINTS,
    OTHER_PUSHES,
    OTHER_WORKLOAD,
    REPO,
    SCREENSHOTS,
    SPEED_OF_LIGHT,
    STEPPED_CONFIG,
    STEPS_AFTER,
    STEPS_BEFORE,
    STEPS_REPO,
    Site,
    browser_page,
)

pytest_plugins = ["tests.dashboard.dashboard_site"]  # the browser and site fixtures

PHONE = {"width": 390, "height": 844}


@pytest.fixture
def page(browser: Any, site: Site) -> Iterator[Any]:
    """A fresh browser context (no cookies) on the desktop width."""
    with browser_page(browser, site.url) as p:
        yield p


def sign_in(page: Any, token: str, next_path: str = "/") -> None:
    page.goto(next_path)
    assert "/login" in page.url
    page.fill("#token", token)
    page.click("button[type=submit]")
    page.wait_for_load_state("domcontentloaded")


def shoot(page: Any, site: Site, name: str) -> None:
    """Each page at desktop and phone width, saved under artifacts/screenshots/."""
    if site.database != "sqlite":
        return  # the pages look the same on PostgreSQL; one set of pictures is enough
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    for label, size in (("desktop", DESKTOP), ("phone", PHONE)):
        page.set_viewport_size(size)
        page.screenshot(path=str(SCREENSHOTS / f"{name}-{label}.png"), full_page=True)
    page.set_viewport_size(DESKTOP)


def test_anonymous_visitor_sees_nothing(page: Any, site: Site) -> None:
    # What only the workspace's data could put on a page (the login form echoes the path the
    # visitor typed, as its "next" field, and nothing else).
    stored = [
        "acme/tokenizer",
        "bigger tiles",
        "cpu-a",
        "cpu-b",
        "BLOCK",
        "WARN",
        "PASS",
        "run.upload",
        site.runs["tokenizer"],
    ]
    for path in ["/", f"/repos/{REPO}", f"/runs/{site.runs['pr']}", "/audit"]:
        page.goto(path)
        assert re.search(r"/login\?next=", page.url), page.url
        html = page.content()
        for text in stored:
            assert text not in html, f"{path} leaked {text!r} to an anonymous visitor"
    shoot(page, site, "login")


def test_ci_token_never_opens_the_dashboard(page: Any, site: Site) -> None:
    sign_in(page, site.ci.secret)
    assert "/login" in page.url or page.locator("h1").inner_text() != "acme"
    assert "CI token cannot open the dashboard" in page.content()
    assert not [c for c in page.context.cookies() if c["name"] == "rnx_session"]
    assert site.ci.secret not in page.content()


def test_every_page_opens_and_the_overview_leads_to_a_run(page: Any, site: Site) -> None:
    sign_in(page, site.viewer.secret)
    # Overview: both repositories, the latest tier per branch, the BLOCKs and the acceptance.
    assert page.locator("h1").inner_text() == "acme"
    repos = page.locator("article.repo h3").all_inner_texts()
    assert sorted(repos) == ["acme/kernels", "acme/steps", "acme/tokenizer"]
    # The latest run of each workload on a branch, not only the newest workload's.
    workloads = page.locator("article.repo td.workload").all_inner_texts()
    assert "kernels/attention.py" in workloads and OTHER_WORKLOAD in workloads
    assert "globex" not in page.content().replace("workspace", "")
    assert page.locator("section[aria-label='Recent BLOCKs'] a.run-link").count() >= 2
    accepted = page.locator("section[aria-label='Recent acceptances']")
    assert "bigger tiles trade latency for memory" in accepted.inner_text()
    shoot(page, site, "overview")

    # A click from the overview's recent acceptance leads to that run's page.
    accepted.locator("a.run-link").first.click()
    page.wait_for_url(f"**/runs/{site.runs['pr']}")
    assert page.url.endswith(site.answers["pr"]["url"].split("/", 3)[3])
    assert page.locator("h1 .tier").inner_text() == "BLOCK"
    assert "PR #42" in page.locator("h1").inner_text()
    assert page.locator("table.comparisons tbody tr").count() == len(CONFIGS)
    assert page.locator("svg.dist").count() == len(CONFIGS)
    assert page.locator("table.correctness tbody tr").count() == len(CONFIGS)
    sha = page.locator("h1 code").inner_text()
    commit = page.locator("a", has_text="commit").first.get_attribute("href") or ""
    assert re.fullmatch(rf"https://github.com/{REPO}/commit/{sha}[0-9a-f]*", commit), commit
    assert page.locator(f"a[href='https://github.com/{REPO}/pull/42']").count() == 1
    assert "bigger tiles trade latency for memory" in page.locator(".accepted-note").inner_text()
    assert "1 field differs" in page.locator(".env-summary").inner_text()
    differing = page.locator("table.environment tr.diff").all_inner_texts()
    assert len(differing) == 1 and "software.torch" in differing[0] and "2.6.0" in differing[0]
    shoot(page, site, "run")

    # History: one chart set per workload, one chart per configuration, one point per run.
    page.goto(f"/repos/{REPO}")
    sections = page.locator("section.workload-history")
    assert sections.locator("h2.workload-title code").all_inner_texts() == [
        "kernels/attention.py",
        OTHER_WORKLOAD,
    ]
    charts = sections.nth(0).locator("svg.history")
    assert charts.count() == len(CONFIGS)
    for i in range(len(CONFIGS)):
        assert charts.nth(i).locator(".pt").count() == MAIN_POINTS
    others = sections.nth(1).locator("svg.history")
    assert others.count() == len(CONFIGS)
    assert others.first.locator(".pt").count() == OTHER_PUSHES
    assert others.first.locator(".pt-block").count() == 0  # never compared with attention.py
    first = charts.nth(0)
    assert first.locator(".pt-accepted").count() == 1
    assert first.locator(".pt-block").count() == 1
    assert first.locator(".env-change").count() == 1  # cpu-a -> cpu-b
    details = first.locator(".env-details title").all_text_contents()
    assert details == [
        "environment details changed: software.torch: 2.5.0 → 2.5.1",  # push 10
        "environment details changed: software.torch: 2.5.1 → 2.6.0",  # the accepted PR run
    ]
    hover = first.locator(".pt title").last.text_content() or ""
    assert "median" in hover and "×" in hover and "environment cpu-b" in hover
    events = page.locator("section[aria-label='Marked events'] tbody tr")
    assert "kernels/attention.py" in events.first.inner_text()
    shoot(page, site, "history")

    # ?workload= keeps one workload's chart set.
    sections.nth(1).locator("a", has_text="only this one").click()
    page.wait_for_url(re.compile(r".*workload=kernels(/|%2F)other\.py.*"))
    only = page.locator("section.workload-history")
    assert only.count() == 1 and OTHER_WORKLOAD in only.locator("h2").inner_text()
    assert only.locator("svg.history").count() == len(CONFIGS)

    # A point on the chart is a link to its run.
    page.goto(f"/repos/{REPO}")
    first = page.locator("section.workload-history").nth(0).locator("svg.history").nth(0)
    first.locator(".pt-accepted").click()
    page.wait_for_url(f"**/runs/{site.runs['pr']}")

    page.goto("/audit")
    actions = page.locator("table.audit tbody tr td:nth-child(3)").all_inner_texts()
    assert "run.upload" in actions and "run.accept" in actions and "dashboard.login" in actions
    assert "globex" not in page.locator("table.audit").inner_text()
    shoot(page, site, "audit")

    # No page shows a token.
    for path in ["/", f"/repos/{REPO}", f"/runs/{site.runs['pr']}", "/audit"]:
        page.goto(path)
        html = page.content()
        for token in (site.viewer.secret, site.ci.secret):
            assert token not in html and token[:14] not in html


def test_change_points_are_listed_and_marked(page: Any, site: Site) -> None:
    found = site.change_point
    assert found["configuration"] == STEPPED_CONFIG
    assert found["after_run_id"] == site.runs[f"steps{STEPS_BEFORE}"]
    sign_in(page, site.viewer.secret)
    # The overview lists the open change point, with its commits on GitHub.
    rows = page.locator("section[aria-label='Open change points'] tbody tr")
    assert rows.count() == 1
    row = rows.first
    assert row.get_attribute("data-change-point") == str(found["id"])
    assert STEPS_REPO in row.inner_text() and STEPPED_CONFIG in row.inner_text()
    assert f"{found['ratio']:.3f}×" in row.inner_text()
    compare = row.locator("a.compare-link").get_attribute("href") or ""
    assert compare == found["compare_url"]
    assert compare.startswith(f"https://github.com/{STEPS_REPO}/compare/")
    shoot(page, site, "overview-change-points")

    # Its link leads to the history chart of that configuration, marked before the first
    # slower run; the other configurations' charts carry no mark.
    row.locator("a", has_text=STEPS_REPO).click()
    page.wait_for_url(re.compile(rf".*/repos/{STEPS_REPO}\?.*"))
    charts = page.locator("section.config-history")
    assert charts.count() == len(CONFIGS)
    chart_id = STEPPED_CONFIG.replace("/", "-")
    assert page.url.endswith(f"--{chart_id}")  # the link's fragment is the chart
    marked = page.locator(f"section.config-history[id$='--{chart_id}'] svg.history")
    assert marked.locator(".pt").count() == STEPS_BEFORE + STEPS_AFTER
    mark = marked.locator(".change-point")
    assert mark.count() == 1 and "cp-open" in (mark.get_attribute("class") or "")
    assert mark.get_attribute("data-change-point") == str(found["id"])
    title = mark.locator("title").text_content() or ""
    assert title.startswith(f"change point: {found['ratio']:.3f}×") and "open" in title
    assert page.locator("svg .change-point").count() == 1
    event = page.locator("section[aria-label='Marked events'] tr.event-change-point")
    assert event.count() == 1 and f"change point in {STEPPED_CONFIG}" in event.inner_text()
    shoot(page, site, "history-change-point")

    # Acknowledged (by the repository's CI token), it leaves the overview's list and its
    # mark turns grey.
    assert site.steps_ci is not None
    r = page.request.post(
        f"{site.url}/api/v1/change-points/{found['id']}/acknowledge",
        data={"note": "expected: bigger batches"},
        headers={"Authorization": f"Bearer {site.steps_ci.secret}"},
    )
    assert r.status == 200, r.text()
    page.reload()
    assert "cp-acknowledged" in (page.locator("svg .change-point").get_attribute("class") or "")
    page.goto("/")
    assert page.locator("section[aria-label='Open change points']").count() == 0


def test_another_workspace_is_not_found(page: Any, site: Site) -> None:
    sign_in(page, site.viewer.secret)
    response = page.goto(f"/runs/{site.runs['globex']}")
    assert response is not None and response.status == 404
    assert "globex/x" not in page.content()


def test_sign_out_ends_the_session(page: Any, site: Site) -> None:
    sign_in(page, site.viewer.secret, f"/runs/{site.runs['push3']}")
    assert page.url.endswith(f"/runs/{site.runs['push3']}")  # back where the visitor wanted
    cookie = next(c for c in page.context.cookies() if c["name"] == "rnx_session")
    assert cookie["httpOnly"] and cookie["sameSite"] == "Lax"
    page.click("text=Sign out")
    page.wait_for_url("**/login")
    page.goto("/")
    assert "/login" in page.url


def test_the_run_page_shows_speed_of_light_and_flags_a_score_beyond_the_roofline(
    page: Any, site: Site
) -> None:
    sign_in(page, site.viewer.secret, f"/runs/{site.runs['pr-warn']}")
    table = page.locator("table.comparisons")
    assert "SOL" in table.locator("thead").inner_text()
    cells = table.locator("tbody td.sol")
    assert cells.all_inner_texts() == ["0.62 memory", "1.30 compute!", "–"]
    # Only the score beyond the roofline is marked as a problem.
    flagged = table.locator("tbody td.sol.bad")
    assert flagged.count() == 1 and flagged.inner_text() == "1.30 compute!"
    assert flagged.get_attribute("title") == "roofline 1.3 ms, median 1 ms"
    note = page.locator(".sol-note").inner_text()
    assert "H200 SXM (peaks table: dense datasheet figures)" in note
    assert "measurement or counting problem" in note and "never part of a verdict" in note
    assert SPEED_OF_LIGHT[2] is None  # the third configuration has no score: a dash
    shoot(page, site, "run-speed-of-light")
    # A run whose document has no scores (every run before them) shows no SOL column.
    page.goto(f"/runs/{site.runs['pr']}")
    assert "SOL" not in page.locator("table.comparisons thead").inner_text()
    assert page.locator(".sol-note").count() == 0


def test_an_acting_viewer_gets_the_forms_and_their_refusals_read_as_pages(
    page: Any, site: Site
) -> None:
    # A refused submission only: the module's other tests read the site's state as seeded
    # (tests/gate_server/http/test_acting_viewers.py acknowledges and accepts through the forms).
    from testbed.gate_helpers import create_token

    alice = create_token(
        site.server.database_url, viewer=True, can_act=True, branches=("main",), name="alice"
    )
    sign_in(page, alice.secret, f"/runs/{site.runs['pr-warn']}")
    form = page.locator("form.act-form")
    assert form.count() == 1 and "Accept as the new baseline of" in form.inner_text()
    assert form.locator("button").is_visible()
    shoot(page, site, "run-accept-form")
    form.locator("input[name=reason]").fill("looks fine\u202e")
    form.locator("button").click()
    page.wait_for_load_state("domcontentloaded")
    assert "U+202E" in page.content() and "Not done" in page.content()
