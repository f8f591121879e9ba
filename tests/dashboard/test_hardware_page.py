"""The /hardware page in headless Chromium against the real server, with real recorded runs.

The runs in tests/data/hardware were measured by `rnx bench examples/gelu_linear.py` on this
machine's CPU (1 and 2 threads) and, when its file is there, on an H200 (docs/hardware.md has the
commands). They are uploaded through the API as pushes to main, so each becomes its
environment's baseline; the page must show what `rnx compare-hardware` computes from the same
files, and its CSV must be the CLI's CSV byte for byte.
"""

from __future__ import annotations

import csv
import hashlib
import io
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from rnx.hardware import CSV_COLUMNS, compare_hardware, to_csv
from rnx.schema import ResultsDocument, load_results
from rnx_cli.main import main as rnx
from testbed.factories import body
from testbed.gate_helpers import (
    LiveServer,
    create_token,
    signed_headers,
    start_server,
)
from tests.dashboard.dashboard_site import browser_page, module_database

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "hardware"
SCREENSHOT = ROOT / "docs" / "img" / "hardware.png"
REPO = "rnx-benchmark/examples"
WORKLOAD = "examples/gelu_linear.py"
# The session's one Chromium (a second Playwright in the same process cannot start).
pytest_plugins = ["tests.dashboard.dashboard_site"]
PRICES = {"cpu-2core": 0.10, "cpu-2core-2threads": 0.10, "h200": 3.50}
VERDICTS = {"baseline", "faster", "slower", "no credible difference", "not compared"}


def recorded_runs() -> list[ResultsDocument]:
    """The recorded runs, baseline (the 1-thread CPU) first, the H200 last when present."""
    order = ["cpu-gelu_linear.json", "cpu2t-gelu_linear.json"]
    order += sorted(p.name for p in DATA.glob("h200-*.json"))
    return [load_results(str(DATA / name)) for name in order]


def as_push_to_main(doc: ResultsDocument, n: int) -> ResultsDocument:
    """The same measurements as a push to main (the recording was a local run)."""
    git = doc.git.model_copy(
        update={
            "branch": "main",
            "event": "push",
            "sha": hashlib.sha1(f"hardware{n}".encode()).hexdigest(),
        }
    )
    return doc.model_copy(update={"git": git, "run_id": uuid.uuid4(), "repository": REPO})


@dataclass
class HardwareSite:
    server: LiveServer
    database: str
    url: str
    viewer: str
    documents: list[ResultsDocument]
    other_viewer: str  # a viewer of another workspace


def _seed(server: LiveServer, database_url: str) -> list[ResultsDocument]:
    ci = create_token(database_url, repository=REPO)
    uploaded = []
    with httpx.Client(base_url=server.url, timeout=30) as client:
        for n, doc in enumerate(recorded_runs()):
            doc = as_push_to_main(doc, n)
            data = body(doc)
            answer = client.post(
                "/api/v1/runs", content=data, headers=signed_headers(ci.secret, data)
            )
            assert answer.status_code == 201, answer.text
            uploaded.append(doc)
    # Prices through the admin command, as an operator sets them.
    for doc in uploaded:
        price = str(PRICES[doc.environment.name or ""])
        key = doc.environment.key
        where = ["--workspace", "acme", "--database-url", database_url]
        assert rnx(["environment", "price", key, price, *where]) == 0
    return uploaded


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def hw_site(request: pytest.FixtureRequest) -> Iterator[HardwareSite]:
    with module_database(request, "hardware") as (workdir, url):
        viewer = create_token(url, viewer=True)
        other = create_token(url, workspace="globex", viewer=True)
        server = start_server(url, workdir)
        try:
            documents = _seed(server, url)
            yield HardwareSite(
                server, request.param, server.url, viewer.secret, documents, other.secret
            )
        finally:
            server.stop()


@pytest.fixture
def page(browser: Any, hw_site: HardwareSite) -> Iterator[Any]:
    with browser_page(browser, hw_site.url) as p:
        yield p


def sign_in(page: Any, token: str, next_path: str) -> None:
    page.goto(next_path)
    assert "/login" in page.url
    page.fill("#token", token)
    page.click("button[type=submit]")
    page.wait_for_load_state("domcontentloaded")


def test_pick_compare_chart_csv_in_the_browser(page: Any, hw_site: HardwareSite) -> None:
    docs = hw_site.documents
    assert len(docs) >= 2
    sign_in(page, hw_site.viewer, "/")
    page.click("nav >> text=Hardware")
    page.wait_for_url("**/hardware")
    # 1. The workload, with every recorded environment's baseline.
    row = page.locator("table.hw-workloads tbody tr", has_text=WORKLOAD)
    assert row.locator("td.num").inner_text() == str(len(hw_site.documents))
    row.locator("a").click()
    page.wait_for_selector("table.hw-envs")
    # 2. Every environment is offered with its price; pick the 1-thread CPU (the baseline) and
    # the last recorded one (the H200 when its run is there), leaving the others out.
    envs = page.locator("table.hw-envs tbody tr")
    assert envs.count() == len(docs)
    assert "0.10" in page.locator("table.hw-envs").inner_text()
    docs = [docs[0], docs[-1]]
    for doc in docs:
        page.check(f"input[name=env][value='{doc.environment.key}']")
    page.check(f"input[name=baseline][value='{docs[0].environment.key}']")
    page.click("form.hw-pick button[type=submit]")
    page.wait_for_selector("table.hw-table")

    # 3. What the page shows is what rnx.hardware computes from the same documents.
    expected = compare_hardware(
        docs, prices={d.environment.key: PRICES[d.environment.name or ""] for d in docs}
    )
    cells = [c for r in expected.rows for c in r.cells]
    lines = page.locator("table.hw-table tbody tr")
    assert lines.count() == len(cells)
    shown = [
        v.split("\n")[0].split(" (")[0] for v in page.locator("td.hw-verdict").all_inner_texts()
    ]
    assert shown == [c.verdict for c in cells]
    assert set(shown) <= VERDICTS and shown.count("baseline") == len(expected.rows)
    chart = page.locator("svg.hwbars")
    timed = [c for c in cells if c.median_ns is not None]
    assert chart.locator("g.bar").count() == len(timed)
    assert chart.locator("g.bar line.whisker").count() == 3 * len(timed)
    titles = chart.locator("g.bar title").all_text_contents()
    assert all("median" in t and "90% interval" in t for t in titles)
    # Software side by side, the differing rows marked.
    differing = page.locator("table.hw-software tr.diff th").all_inner_texts()
    want = {r.label for r in expected.software if r.differs}
    assert {d.replace(" differs", "").strip() for d in differing} == want and want

    # The CSV link: the CLI's CSV for the same runs and prices, byte for byte.
    href = page.locator("a.csv-link").get_attribute("href")
    answer = page.request.get(href)
    assert answer.status == 200 and answer.headers["content-type"].startswith("text/csv")
    assert 'filename="hardware-gelu_linear.csv"' in answer.headers["content-disposition"]
    text = answer.text()
    assert text == to_csv(expected)
    assert tuple(next(csv.reader(io.StringIO(text)))) == CSV_COLUMNS

    if hw_site.database == "sqlite":
        SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SCREENSHOT), full_page=True)


def test_bad_picks_explain_themselves(page: Any, hw_site: HardwareSite) -> None:
    key = hw_site.documents[0].environment.key
    base = f"/hardware?repo={REPO}&branch=main&workload={WORKLOAD}"
    sign_in(page, hw_site.viewer, base + f"&env={key}")
    assert "Pick 2 to 6 environments (1 picked)" in page.locator("[role=alert]").inner_text()
    assert page.locator("table.hw-envs").count() == 1  # the pick is offered again
    page.goto(base + f"&env={key}&env=env-nowhere")
    assert "No baseline of this workload in env-nowhere" in page.content()
    other = hw_site.documents[1].environment.key
    page.goto(base + f"&env={key}&env={other}&baseline=env-nowhere")
    assert "The baseline must be one of the environments picked" in page.content()
    response = page.goto(f"/hardware?repo={REPO}&workload=kernels/none.py")
    assert response.status == 404
    response = page.goto(f"/hardware.csv?repo={REPO}&workload={WORKLOAD}&env={key}")
    assert response.status == 400 and "Pick 2 to 6" in page.content()


def test_anonymous_visitors_are_sent_to_sign_in(hw_site: HardwareSite) -> None:
    keys = "&".join(f"env={d.environment.key}" for d in hw_site.documents)
    for path in ("/hardware", f"/hardware.csv?repo={REPO}&workload={WORKLOAD}&{keys}"):
        answer = httpx.get(hw_site.url + path, follow_redirects=False, timeout=60)
        assert answer.status_code == 303 and "/login?next=" in answer.headers["location"]


def test_another_workspace_sees_none_of_it(hw_site: HardwareSite) -> None:
    keys = "&".join(f"env={d.environment.key}" for d in hw_site.documents)
    auth = {"Authorization": f"Bearer {hw_site.other_viewer}"}
    page = httpx.get(hw_site.url + "/hardware", headers=auth, timeout=60)
    assert page.status_code == 200 and "No baselines yet" in page.text
    assert WORKLOAD not in page.text
    query = f"?repo={REPO}&branch=main&workload={WORKLOAD}&{keys}"
    for path in ("/hardware", "/hardware.csv"):
        answer = httpx.get(hw_site.url + path + query, headers=auth, timeout=60)
        assert answer.status_code == 404, (path, answer.status_code)
        assert hw_site.documents[0].environment.key not in answer.text
