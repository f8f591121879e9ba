"""Layout in headless Chromium at 1280 px and 390 px (issue 27): a half-width card never clips
a column (the overview's LATEST, the run page's baseline); on a phone the key columns stay on
screen. Screenshots of both widths are kept in docs/img."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from rnx.schema import Environment, Profile
from testbed.factories import body, make_results
from testbed.gate_helpers import signed_headers

pytest.register_assert_rewrite("tests.dashboard.dashboard_site")
from tests.dashboard.dashboard_site import CONFIGS, REPO, Site, browser_page  # noqa: E402

pytest_plugins = ["tests.dashboard.dashboard_site"]  # the browser and site fixtures

# The layout is the same on PostgreSQL (test_browser.py covers its pages there): the site is
# seeded on SQLite only, rather than seeded on PostgreSQL too for tests that would skip.
pytestmark = pytest.mark.parametrize("site", ["sqlite"], indirect=True)

IMAGES = Path(__file__).resolve().parents[2] / "docs" / "img"
WIDTHS = {"desktop": {"width": 1280, "height": 900}, "phone": {"width": 390, "height": 844}}

# For each page: the tables to check and the header of each column that must stay on screen.
PAGES = {
    "overview": ("/", [("article.repo table", ["Branch", "Latest"])]),
    "run": (
        "/runs/{pr}",
        [
            ("table.environment", ["Field", "This run", "Baseline"]),
            ("table.comparisons", ["Configuration", "Verdict", "Ratio"]),
            ("table.correctness", ["Configuration", "Result"]),
        ],
    ),
    "history": (f"/repos/{REPO}", []),
}

# The parts of a page that must be on it (and, as everything, within the window's width): the
# PR run's kept traces, the history's peak memory charts.
SHOWN = {
    "run": ('section[aria-label="Kept traces"] a[download]',),
    "history": ("svg.memory-history",),
}

# Where a column's header sits against the box the reader sees it through: the table's
# scrolling wrapper and the window. A column is clipped when it is past either's right edge.
_CLIPPED = """(table, headers) => {
  const wrap = table.closest('.table-wrap') || table.parentElement;
  const box = wrap.getBoundingClientRect();
  const out = [];
  for (const th of table.querySelectorAll('thead th')) {
    const name = th.textContent.trim();
    if (!headers.some(h => h.toLowerCase() === name.toLowerCase())) continue;
    const r = th.getBoundingClientRect();
    const shown = getComputedStyle(th).display !== 'none' && r.width > 0;
    const inside = r.left >= box.left - 1 && r.right <= box.right + 1
      && r.right <= window.innerWidth + 1;
    if (!shown || !inside) out.push(name);
  }
  return out;
}"""


DATA = Path(__file__).resolve().parents[1] / "data"
# A real GPU environment (recorded on an H200: long keys, a GPU uuid, nvidia-smi's line) and a
# workload path as long as real ones get: what made the half-width cards clip.
H200 = Environment.model_validate(
    {**json.loads((DATA / "h200-roofline-results.json").read_text())["environment"], "name": "h200"}
)
LONG_WORKLOAD = "kernels/attention/flash_decoding_split_kv_paged_cache.py"


def _trace_name(c: Any) -> str:
    """A kept trace's name as the harness gives it: as long as a configuration id makes it."""
    return f"head-{c.runtime}-{c.dtype}-bs{c.batch_size}.json"


def _seed_gpu_runs(site: Site) -> str:
    """A baseline push and a pull request run on the H200, whose traces were kept: the PR run's
    id."""
    answers = []
    with httpx.Client(base_url=site.url, timeout=60) as client:
        for args in ({"seed": 900}, {"seed": 901, "branch": "feature/split-kv", "pr_number": 77}):
            doc = make_results(configs=CONFIGS, workload=LONG_WORKLOAD, **args)  # type: ignore[arg-type]
            profiled = [
                c.model_copy(update={"profile": _profile(_trace_name(c))})
                for c in doc.configurations
            ]
            doc = doc.model_copy(update={"environment": H200, "configurations": profiled})
            data = body(doc)
            answer = client.post(
                "/api/v1/runs", content=data, headers=signed_headers(site.ci.secret, data)
            )
            assert answer.status_code == 201, answer.text
            answers.append(answer.json())
        run_id: str = answers[-1]["run_id"]
        for c in doc.configurations:
            trace = gzip.compress(b'{"traceEvents": []}')
            headers = {
                **signed_headers(site.ci.secret, trace),
                "Content-Type": "application/octet-stream",
            }
            kept = client.put(
                f"/api/v1/runs/{run_id}/traces/{_trace_name(c)}", content=trace, headers=headers
            )
            assert kept.status_code == 201, kept.text
    return run_id


def _profile(trace: str) -> Profile:
    return Profile(source="torch.profiler", time_basis="device", calls=3, total_ns=1e4, trace=trace)


@pytest.fixture(scope="module")
def gpu_pr(site: Site) -> str:
    return _seed_gpu_runs(site)


_WIDEST = """() => [...document.querySelectorAll('body *')]
  .filter(e => e.getBoundingClientRect().right > window.innerWidth + 1)
  .slice(0, 4).map(e => e.tagName + '.' + (e.getAttribute('class') || '') + ':'
    + Math.round(e.getBoundingClientRect().right))"""


@pytest.fixture
def page(browser: Any, site: Site) -> Iterator[Any]:
    with browser_page(browser, site.url, WIDTHS["desktop"]) as p:
        p.goto("/")
        p.fill("#token", site.viewer.secret)
        p.click("button[type=submit]")
        p.wait_for_load_state("domcontentloaded")
        yield p


@pytest.mark.parametrize("width", list(WIDTHS))
@pytest.mark.parametrize("name", list(PAGES))
def test_no_key_column_is_clipped(
    page: Any, site: Site, gpu_pr: str, name: str, width: str
) -> None:
    path, tables = PAGES[name]
    page.set_viewport_size(WIDTHS[width])
    page.goto(path.format(pr=gpu_pr))
    IMAGES.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(IMAGES / f"{name}-{width}.png"), full_page=True)
    # What each page must show in full at both widths besides its tables.
    for selector in SHOWN.get(name, ()):
        assert page.locator(selector).first.is_visible(), f"{name} at {width}: {selector}"
    for selector, headers in tables:
        found = page.locator(selector)
        assert found.count() >= 1, selector
        for i in range(found.count()):
            clipped = found.nth(i).evaluate(_CLIPPED, headers)
            assert clipped == [], f"{name} at {width}: {selector} clips {clipped}"
    # Nothing on the page is wider than the window: no sideways scrolling of the whole page.
    overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
    if overflow > 1:
        widest = page.evaluate(_WIDEST)
        raise AssertionError(f"{name} at {width} is {overflow}px wider than the window: {widest}")


# Where each of a form's controls sits against the window: off its right edge, hidden, or
# squeezed below a usable width is a form nobody can use on a phone.
_UNUSABLE = """form => [...form.querySelectorAll('input[type=text], button')].filter(e => {
  const r = e.getBoundingClientRect();
  return getComputedStyle(e).display === 'none' || r.width < 40 || r.height < 16
    || r.left < -1 || r.right > window.innerWidth + 1;
}).map(e => e.tagName + ':' + Math.round(e.getBoundingClientRect().right))"""


@pytest.mark.parametrize("width", list(WIDTHS))
def test_the_acknowledge_and_accept_forms_are_usable_at_both_widths(
    browser: Any, site: Site, gpu_pr: str, width: str
) -> None:
    """An acting viewer's two forms (the overview's acknowledge, the run page's accept) have
    their note and button on screen at 1280 and 390 px; screenshots in docs/img."""
    from testbed.gate_helpers import create_token

    acting = create_token(
        site.server.database_url, viewer=True, can_act=True, branches=("main",), name="alice"
    )
    with browser_page(browser, site.url, WIDTHS[width]) as p:
        p.goto("/")
        p.fill("#token", acting.secret)
        p.click("button[type=submit]")
        p.wait_for_load_state("domcontentloaded")
        for name, path, action in (
            ("acknowledge", "/", "/acknowledge"),
            ("accept", f"/runs/{gpu_pr}", "/accept"),
        ):
            p.goto(path)
            form = p.locator(f"form.act-form[action$='{action}']").first
            assert form.count() == 1, f"no {name} form at {path}"
            form.scroll_into_view_if_needed()
            assert form.evaluate(_UNUSABLE) == [], f"the {name} form at {width}"
            p.screenshot(path=str(IMAGES / f"{name}-form-{width}.png"), full_page=True)
            overflow = p.evaluate("document.documentElement.scrollWidth - window.innerWidth")
            assert overflow <= 1, f"{path} at {width}: {p.evaluate(_WIDEST)}"
