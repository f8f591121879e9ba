"""The dashboard tests' fixtures: the real server on loopback with real uploaded runs, and Chromium.

A plain module, not a conftest.py: a second conftest module would shadow tests/conftest.py
under the name `conftest` that this module imports from.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from rnx.schema import Environment, Memory, SpeedOfLight
from testbed.factories import body, make_results
from testbed.gate_helpers import (
    LiveServer,
    Token,
    create_token,
    fresh_postgres_schema,
    signed_headers,
    start_server,
)

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
DESKTOP = {"width": 1280, "height": 900}
REPO = "acme/kernels"
CONFIGS = (
    ("pytorch_eager", "float32", 1),
    ("pytorch_eager", "float32", 8),
    ("onnxruntime", "float32", 8),
)
# What the seeded history of acme/kernels' main branch holds (the browser test counts them).
MAIN_PUSHES_A = 8  # baseline pushes in environment cpu-a
MAIN_PUSHES_B = 4  # then the team moved to cpu-b
TORCH_UPGRADE_AT = 10  # in cpu-b, push 10 ran a newer torch: an environment *details* change
MAIN_POINTS = MAIN_PUSHES_A + MAIN_PUSHES_B + 1 + 1  # + one BLOCKed push + one accepted PR run
# A second workload on main, twice as slow: its own chart set, never compared with the first.
OTHER_WORKLOAD = "kernels/other.py"
OTHER_PUSHES = 3
# A third repository whose main branch steps 20% slower in one configuration: a change point.
STEPS_REPO = "acme/steps"
STEPPED_CONFIG = "pytorch_eager/float32/bs8"
STEPS_BEFORE, STEPS_AFTER = 12, 5  # 5 runs above 12: p = 2 / C(17, 5) = 0.0003 < 0.0005
# The speed-of-light scores of PR #43's run (one per configuration of CONFIGS): the second
# claims to beat its roofline, which the run page must flag as a problem; the third has none.
SPEED_OF_LIGHT: tuple[SpeedOfLight | None, ...] = (
    SpeedOfLight(
        score=0.62,
        bound="memory",
        roofline_s=6.2e-4,
        measured_s=1e-3,
        peak_bandwidth=4.8e12,
        peak_source="table",
        peak_part="H200 SXM",
    ),
    SpeedOfLight(
        score=1.3,
        bound="compute",
        roofline_s=1.3e-3,
        measured_s=1e-3,
        peak_flops=989.5e12,
        peak_source="table",
        peak_part="H200 SXM",
        beyond_roofline=True,
    ),
    None,
)


def browser_missing() -> str | None:
    if not Path(CHROMIUM).exists():
        return f"Debian's chromium is not installed at {CHROMIUM} (apt-get install chromium)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright is not installed (pip install playwright)"
    return None


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    """Headless Chromium (the system browser, driven by Playwright)."""
    why = browser_missing()
    if why is not None:
        if os.environ.get("RNX_REQUIRE_BROWSER") == "1":
            pytest.fail(why + " (RNX_REQUIRE_BROWSER=1 makes this a failure)")
        pytest.skip(why)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


@dataclass
class Site:
    """A running server holding a small real history, and what a test needs to find its way."""

    server: LiveServer
    database: str
    viewer: Token
    ci: Token
    other_workspace_viewer: Token
    runs: dict[str, str] = field(default_factory=dict)  # name -> run_id
    answers: dict[str, dict[str, Any]] = field(default_factory=dict)
    steps_ci: Token | None = None
    change_point: dict[str, Any] = field(default_factory=dict)  # as the API shows it

    @property
    def url(self) -> str:
        return self.server.url


def _environment(key: str, torch: str) -> Environment:
    return Environment(
        key=key,
        name=f"{key} runner",
        hardware={"cpu": "AMD EPYC 7B13", "cores": 2},
        runner={"os": "Linux", "image": "ubuntu-24.04"},
        software={"python": "3.11.7", "torch": torch},
    )


def _upload(
    client: httpx.Client,
    token: Token,
    *,
    torch: str = "2.5.0",
    speed_of_light: tuple[SpeedOfLight | None, ...] | None = None,
    **doc_args: Any,
) -> dict[str, Any]:
    doc = make_results(configs=CONFIGS, n=24, **doc_args)
    doc = doc.model_copy(update={"environment": _environment(doc.environment.key, torch)})
    # Every run records its peak memory, as the harness does: the history draws it.
    peak = (4 << 20) + 65536 * int(doc_args.get("seed", 0))
    memory = Memory(device="cpu", peak_allocated_bytes=peak)
    doc = doc.model_copy(
        update={
            "configurations": [c.model_copy(update={"memory": memory}) for c in doc.configurations]
        }
    )
    if speed_of_light is not None:
        configurations = [
            c.model_copy(update={"speed_of_light": sol})
            for c, sol in zip(doc.configurations, speed_of_light, strict=True)
        ]
        doc = doc.model_copy(update={"configurations": configurations})
    data = body(doc)
    response = client.post("/api/v1/runs", content=data, headers=signed_headers(token.secret, data))
    assert response.status_code == 201, response.text
    answer: dict[str, Any] = response.json()
    return answer


def seed(site: Site) -> None:
    """Real uploads through the API: a main-branch history with an environment change, pushes
    of a second workload, a BLOCKed push, a BLOCKed pull request that is then accepted, and a
    second repository."""
    other_repo = create_token(site.server.database_url, repository="acme/tokenizer")
    with httpx.Client(base_url=site.url, timeout=30) as client:
        for i in range(MAIN_PUSHES_A + MAIN_PUSHES_B):
            env = "cpu-a" if i < MAIN_PUSHES_A else "cpu-b"
            site.answers[f"push{i}"] = _upload(
                client,
                site.ci,
                seed=i,
                environment=env,
                median_ns=1e6 * (1 + 0.002 * i),
                torch="2.5.1" if i >= TORCH_UPGRADE_AT else "2.5.0",
            )
        for i in range(OTHER_PUSHES):
            site.answers[f"other{i}"] = _upload(
                client,
                site.ci,
                seed=50 + i,
                environment="cpu-b",
                workload=OTHER_WORKLOAD,
                slowdown=2.0,
                torch="2.5.1",
            )
        site.answers["blocked-push"] = _upload(
            client, site.ci, seed=100, environment="cpu-b", slowdown=1.6, torch="2.5.1"
        )
        site.answers["pr"] = _upload(
            client,
            site.ci,
            torch="2.6.0",
            seed=200,
            environment="cpu-b",
            branch="feature/tiles",
            pr_number=42,
            slowdown=1.4,
        )
        accepted = client.post(
            f"/api/v1/runs/{site.answers['pr']['run_id']}/accept",
            json={"reason": "bigger tiles trade latency for memory"},
            headers={"Authorization": f"Bearer {site.ci.secret}"},
        )
        assert accepted.status_code == 200, accepted.text
        site.answers["pr-warn"] = _upload(
            client,
            site.ci,
            seed=300,
            environment="cpu-b",
            branch="feature/fast",
            pr_number=43,
            slowdown=1.41,
            speed_of_light=SPEED_OF_LIGHT,
        )
        site.answers["tokenizer"] = _upload(
            client, other_repo, repository="acme/tokenizer", seed=400, environment="cpu-a"
        )
        site.change_point = _seed_step(client, site)
        globex = create_token(site.server.database_url, workspace="globex", repository="globex/x")
        site.answers["globex"] = _upload(
            client, globex, repository="globex/x", seed=500, environment="cpu-a"
        )
    site.runs = {name: a["run_id"] for name, a in site.answers.items()}


def _seed_step(client: httpx.Client, site: Site) -> dict[str, Any]:
    """acme/steps: a step in one configuration's history, and the change point the server
    finds in it after the uploads (its outbox worker runs the detection)."""
    site.steps_ci = create_token(site.server.database_url, repository=STEPS_REPO)
    for i in range(STEPS_BEFORE + STEPS_AFTER):
        site.answers[f"steps{i}"] = _upload(
            client,
            site.steps_ci,
            repository=STEPS_REPO,
            seed=600 + i,
            environment="cpu-a",
            slowdown={STEPPED_CONFIG: 1.2 if i >= STEPS_BEFORE else 1.0},
        )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        r = client.get(
            "/api/v1/change-points",
            params={"repository": STEPS_REPO},
            headers={"Authorization": f"Bearer {site.steps_ci.secret}"},
        )
        assert r.status_code == 200, r.text
        found: list[dict[str, Any]] = r.json()["change_points"]
        if found:
            assert len(found) == 1, found
            return found[0]
        time.sleep(0.2)
    raise AssertionError("the server found no change point in acme/steps within 60 s")


@contextmanager
def module_database(request: pytest.FixtureRequest, name: str) -> Iterator[tuple[Path, str]]:
    """A new work folder and a fresh database of request.param's kind (sqlite or postgresql):
    the folder and the database's URL, both removed after."""
    workdir = Path(tempfile.mkdtemp(prefix=f"rnx-{name}-"))
    drop = None
    if request.param == "sqlite":
        url = f"sqlite:///{workdir / f'{name}.db'}"
    else:
        url, drop = fresh_postgres_schema(request.getfixturevalue("postgres_url"))
    try:
        yield workdir, url
    finally:
        if drop is not None:
            drop()
        shutil.rmtree(workdir, ignore_errors=True)


@contextmanager
def browser_page(browser: Any, base_url: str, viewport: dict[str, int] = DESKTOP) -> Iterator[Any]:
    """A page in a fresh browser context (no cookies) at `base_url`, the desktop width unless
    `viewport` says otherwise."""
    context = browser.new_context(viewport=viewport, base_url=base_url)
    p = context.new_page()
    # Every wait ends as soon as its condition holds; a minute is for a loaded machine, where
    # Chromium beside two test workers on 2 cores can take more than 10 s to load a page.
    p.set_default_timeout(60_000)
    try:
        yield p
    finally:
        context.close()


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def site(request: pytest.FixtureRequest) -> Iterator[Site]:
    """The real server (`rnx serve` on loopback) over a fresh database, seeded once per module."""
    with module_database(request, "dashboard") as (workdir, url):
        viewer = create_token(url, viewer=True)
        ci = create_token(url)
        other = create_token(url, workspace="globex", viewer=True)
        server = start_server(url, workdir)
        try:
            s = Site(server, request.param, viewer, ci, other)
            try:
                seed(s)
            except AssertionError as e:
                raise AssertionError(
                    f"{e}\nserver log:\n{server.log.read_text()[-4000:]}"
                ) from None
            yield s
        finally:
            server.stop()


SCREENSHOTS = Path(__file__).resolve().parents[2] / "artifacts" / "screenshots"
