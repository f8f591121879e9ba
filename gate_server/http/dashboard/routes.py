"""The dashboard's pages: thin routes that check the viewer, read, and render a template."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote

from jinja2 import Environment, FileSystemLoader, select_autoescape
from markupsafe import Markup, escape
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from gate_server.clock import utcnow
from gate_server.dashboard import hardware, reads
from gate_server.dashboard.hardware import HardwareQuery
from gate_server.dashboard.hardware_chart import comparison_svg
from gate_server.dashboard.reads import AUDIT_PAGE
from gate_server.dashboard.sessions import PRELOGIN_COOKIE, SESSION_COOKIE, new_nonce
from gate_server.domain.traces import read_trace
from gate_server.errors import NotFound
from gate_server.http.answers import ApiError, trace_response
from gate_server.http.dashboard.access import (
    SECURITY_HEADERS,
    NotAViewer,
    Viewer,
    current_viewer,
    login_viewer,
    record_login,
    same_origin,
    secure_cookies,
    set_prelogin_cookie,
    set_session_cookie,
)
from gate_server.http.endpoints import read_body
from gate_server.numbers import whole_number
from gate_server.services import services
from rnx.formatting import (
    format_factor_interval,
    format_money,
    format_ns,
    format_percent,
    format_rate,
    format_ratio,
    format_ratio_interval,
    format_speed_of_light,
)
from rnx.hardware import HardwareComparison, to_csv, to_markdown

HERE = Path(__file__).parents[2] / "dashboard"  # the pages: templates and static files
MAX_FORM_BODY = 8 * 1024


def _ago(when: datetime | None) -> str:
    if when is None:
        return "–"
    seconds = (utcnow() - when).total_seconds()
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{int(seconds // size)} {unit} ago"
    return "just now"


templates = Environment(
    loader=FileSystemLoader(HERE / "templates"),
    autoescape=select_autoescape(["html"]),
    trim_blocks=True,
    lstrip_blocks=True,
)
templates.filters.update(
    ns=format_ns,
    ratio=format_ratio,
    ratio_interval=format_ratio_interval,
    rate=format_rate,
    money=format_money,
    sol=lambda score: format_speed_of_light(score, None),
    factor_interval=lambda c: format_factor_interval(c.ratio, c.ratio_low, c.ratio_high),
    pct=format_percent,
    dt=lambda d: "–" if d is None else f"{d:%Y-%m-%d %H:%M} UTC",
    dts=lambda d: "–" if d is None else f"{d:%Y-%m-%d %H:%M:%S}",
    ago=_ago,
    # "pytorch_eager/float32/bs8" may wrap after each "/" on a phone.
    breakable=lambda text: Markup("/<wbr>").join(escape(str(text)).split("/")),
)
_CSS = (HERE / "static" / "dashboard.css").read_bytes()


def _secure(response: Response) -> Response:
    response.headers.update(SECURITY_HEADERS)
    return response


def render(
    request: Request, name: str, viewer: Viewer | None, status: int = 200, **context: Any
) -> Response:
    csrf = ""
    if viewer is not None and viewer.via_session:
        csrf = services(request).dashboard.signer.csrf_token(viewer.csrf_binding)
    html = templates.get_template(name).render(
        viewer=viewer, csrf=context.pop("csrf", csrf), **context
    )
    return _secure(HTMLResponse(html, status_code=status))


def _error_page(
    request: Request, viewer: Viewer | None, status: int, heading: str, msg: str
) -> Response:
    return render(request, "error.html", viewer, status, heading=heading, message=msg)


def _safe_next(target: str | None) -> str:
    # Only paths on this server: "//evil.example" and "/\\evil" would leave it.
    if (
        not target
        or not target.startswith("/")
        or target.startswith("//")
        or "\\" in target
        or any(ord(c) < 33 for c in target)  # browsers drop tabs and newlines: "/\t/x" is "//x"
    ):
        return "/"
    return target


async def _viewer_or_response(request: Request) -> Viewer | Response:
    """The viewer, or the response an anonymous or refused visitor gets (and nothing else)."""
    try:
        viewer = await current_viewer(request)
    except NotAViewer as e:
        return _error_page(request, None, e.status, "Not allowed", e.message)
    if viewer is None:
        target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        return _secure(RedirectResponse(f"/login?next={quote(target, safe='')}", status_code=303))
    return viewer


# ---- pages


def _not_found(request: Request, viewer: Viewer, what: str) -> Response:
    message = f"No {what} in workspace {viewer.workspace}."
    return _error_page(request, viewer, 404, "Not found", message)


async def overview(request: Request) -> Response:
    viewer = await _viewer_or_response(request)
    if isinstance(viewer, Response):
        return viewer
    svc = services(request)
    data = await run_in_threadpool(
        reads.overview, svc.database, svc.dashboard.summaries, viewer.workspace_id
    )
    return render(request, "overview.html", viewer, nav="overview", **data)


def _page_number(request: Request) -> int:
    raw = request.query_params.get("page", "1")
    number = whole_number(raw)
    return max(1, min(number, 100_000)) if number is not None else 1


async def history(request: Request) -> Response:
    viewer = await _viewer_or_response(request)
    if isinstance(viewer, Response):
        return viewer
    svc = services(request)
    name = f"{request.path_params['owner']}/{request.path_params['name']}"
    query = request.query_params
    shown = reads.HistoryFilter(
        branch=query.get("branch"),
        environment=query.get("environment") or None,
        workload=query.get("workload") or None,
    )
    data = await run_in_threadpool(
        lambda: reads.history(
            svc.database,
            svc.dashboard.summaries,
            viewer.workspace_id,
            name,
            shown,
            page=_page_number(request),
        )
    )
    if data is None:
        return _not_found(request, viewer, f"repository {name}")
    return render(request, "history.html", viewer, nav="history", **data)


def _parse_run_id(raw: str) -> str | None:
    try:
        return str(uuid.UUID(raw))
    except ValueError:
        return None


async def run_page(request: Request) -> Response:
    viewer = await _viewer_or_response(request)
    if isinstance(viewer, Response):
        return viewer
    run_id = _parse_run_id(request.path_params["run_id"])
    data = None
    if run_id is not None:
        data = await run_in_threadpool(
            reads.run_page, services(request).database, viewer.workspace_id, run_id
        )
    if data is None:
        return _not_found(request, viewer, f"run {request.path_params['run_id'][:40]}")
    return render(request, "run.html", viewer, nav="run", **data)


async def run_trace(request: Request) -> Response:
    """A kept profile trace of a run in the viewer's workspace, as trace_api serves it."""
    viewer = await _viewer_or_response(request)
    if isinstance(viewer, Response):
        return viewer
    name = request.path_params["name"]
    try:
        body = await run_in_threadpool(
            lambda: read_trace(
                services(request).database,
                request.path_params["run_id"],
                name,
                visible=lambda run: run.workspace_id == viewer.workspace_id,
            )
        )
    except NotFound:
        return _not_found(request, viewer, f"trace {name[:80]}")
    return trace_response(body, name)


async def audit(request: Request) -> Response:
    viewer = await _viewer_or_response(request)
    if isinstance(viewer, Response):
        return viewer
    page = _page_number(request)
    entries = await run_in_threadpool(
        reads.audit_page, services(request).database, viewer.workspace_id, page
    )
    return render(
        request,
        "audit.html",
        viewer,
        nav="audit",
        entries=entries[:AUDIT_PAGE],
        page=page,
        has_older=len(entries) > AUDIT_PAGE,
    )


async def hardware_page(request: Request) -> Response:
    viewer = await _viewer_or_response(request)
    if isinstance(viewer, Response):
        return viewer
    data = await _hardware_data(request, viewer)
    comparison = data.get("comparison")
    if comparison is not None:
        data["chart"] = comparison_svg(comparison)
    return render(request, "hardware.html", viewer, data.pop("status"), nav="hardware", **data)


async def _hardware_data(request: Request, viewer: Viewer) -> dict[str, Any]:
    svc = services(request)
    query = HardwareQuery.from_params(request.query_params)
    return await run_in_threadpool(
        hardware.hardware_page,
        svc.database,
        svc.documents,
        svc.dashboard.comparisons,
        viewer.workspace_id,
        query,
    )


async def _hardware_export(
    request: Request, render_as: Callable[[HardwareComparison], str], media: str, suffix: str
) -> Response:
    """The /hardware page's table as a file, for the same query."""
    viewer = await _viewer_or_response(request)
    if isinstance(viewer, Response):
        return viewer
    data = await _hardware_data(request, viewer)
    comparison = data.get("comparison")
    if comparison is None:
        message = data.get("problem") or "Pick a workload and 2 to 6 environments first."
        return _error_page(
            request,
            viewer,
            400 if data["status"] == 200 else data["status"],
            "No comparison",
            message,
        )
    response = Response(render_as(comparison), media_type=f"{media}; charset=utf-8")
    filename = hardware.export_filename(comparison, suffix)
    response.headers["Content-Disposition"] = f'attachment; filename="{filename}"'
    return _secure(response)


async def hardware_csv(request: Request) -> Response:
    """The /hardware page's table as CSV (rnx.hardware.CSV_COLUMNS)."""
    return await _hardware_export(request, to_csv, "text/csv", "csv")


async def hardware_markdown(request: Request) -> Response:
    """The /hardware page's table as Markdown (rnx.hardware.to_markdown), to paste into a pull
    request or a design doc."""
    return await _hardware_export(request, to_markdown, "text/markdown", "md")


# ---- signing in and out


def _login_page(request: Request, status: int, target: str, message: str | None) -> Response:
    """The sign-in form, with a fresh pre-login nonce (cookie) and its CSRF token."""
    nonce = new_nonce()
    response = render(
        request,
        "login.html",
        None,
        status,
        csrf=services(request).dashboard.signer.csrf_token(nonce),
        next=target,
        error=message,
        github=services(request).settings.github_oauth is not None,
    )
    set_prelogin_cookie(response, nonce, secure=secure_cookies(request))
    return response


async def login_form(request: Request) -> Response:
    return _login_page(request, 200, _safe_next(request.query_params.get("next")), None)


async def _small_form(request: Request) -> dict[str, str] | None:
    """A urlencoded form of a few short fields, read with a size limit (sign-in and sign-out
    post nothing else); None for anything larger or different."""
    media = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media != "application/x-www-form-urlencoded":
        return None
    try:
        raw = await read_body(request, MAX_FORM_BODY)
        fields = parse_qs(raw.decode("utf-8"), max_num_fields=8, strict_parsing=False)
    except (ApiError, UnicodeDecodeError, ValueError):
        return None
    return {k: v[0] for k, v in fields.items()}


async def login_submit(request: Request) -> Response:
    svc = services(request)
    signer = svc.dashboard.signer
    form = await _small_form(request)
    if form is None:
        return _error_page(
            request, None, 400, "Not a sign-in form", "Sign in from the form at /login."
        )
    target = _safe_next(str(form.get("next") or "/"))
    nonce = request.cookies.get(PRELOGIN_COOKIE)
    if not same_origin(request) or not signer.csrf_ok(nonce, str(form.get("csrf") or "")):
        return _error_page(
            request,
            None,
            403,
            "Sign-in refused",
            "The sign-in form had expired or came from another site. "
            "Open /login again and sign in from there.",
        )
    try:
        viewer = await run_in_threadpool(login_viewer, svc.database, str(form.get("token") or ""))
    except NotAViewer as e:
        return _login_page(request, e.status, target, e.message)
    await run_in_threadpool(record_login, svc.database, viewer)
    # A fresh session (and nonce) on every sign-in: a cookie planted earlier is worth nothing.
    _, cookie = signer.issue(str(viewer.token_id), now=time.time())
    response = _secure(RedirectResponse(target, status_code=303))
    set_session_cookie(response, cookie, secure=secure_cookies(request))
    response.delete_cookie(PRELOGIN_COOKIE, path="/login")
    return response


async def logout(request: Request) -> Response:
    viewer = await _viewer_or_response(request)
    if isinstance(viewer, Response):
        return viewer
    form = await _small_form(request) or {}
    if (
        not viewer.via_session
        or not same_origin(request)
        or not services(request).dashboard.signer.csrf_ok(
            viewer.csrf_binding, str(form.get("csrf") or "")
        )
    ):
        return _error_page(
            request,
            viewer,
            403,
            "Sign-out refused",
            "The form came from another site or had expired; use the Sign out "
            "button on a dashboard page.",
        )
    response = _secure(RedirectResponse("/login", status_code=303))
    response.delete_cookie(
        SESSION_COOKIE, path="/", httponly=True, samesite="lax", secure=secure_cookies(request)
    )
    return response


async def stylesheet(request: Request) -> Response:
    response = Response(_CSS, media_type="text/css")
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["Cache-Control"] = "public, max-age=3600"
    return response


routes: list[BaseRoute] = [
    Route("/", overview, methods=["GET"], include_in_schema=False),
    Route("/repos/{owner}/{name}", history, methods=["GET"], include_in_schema=False),
    Route("/runs/{run_id}", run_page, methods=["GET"], include_in_schema=False),
    Route("/runs/{run_id}/traces/{name}", run_trace, methods=["GET"], include_in_schema=False),
    Route("/audit", audit, methods=["GET"], include_in_schema=False),
    Route("/hardware", hardware_page, methods=["GET"], include_in_schema=False),
    Route("/hardware.csv", hardware_csv, methods=["GET"], include_in_schema=False),
    Route("/hardware.md", hardware_markdown, methods=["GET"], include_in_schema=False),
    Route("/login", login_form, methods=["GET"], include_in_schema=False),
    Route("/login", login_submit, methods=["POST"], include_in_schema=False),
    Route("/logout", logout, methods=["POST"], include_in_schema=False),
    Route("/static/dashboard.css", stylesheet, methods=["GET"], include_in_schema=False),
]
